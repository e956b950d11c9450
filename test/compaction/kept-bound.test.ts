import { describe, expect, it } from 'vitest';
import {
  compactionSizes,
  keptBound,
  planCompaction,
  summarizeContext,
  summaryMessage,
} from '../../lib/compaction/index.ts';
import type { PromptItem } from '../../lib/items.ts';
import { echoModel } from '../../lib/models/echo.ts';
import { countItemTokens, countPromptTokens, resolveTokenBudget } from '../../lib/tokens/index.ts';

// A compaction's kept side may take up to `keptBound`: what the prompt limit leaves beside the
// summary and what every prompt carries (tools, instructions). The summary goes in the prompt as
// a message with its header (`summaryMessage`): a kept side at the bound, beside a summary at its
// cap, must still fit the prompt limit, or every later prompt is refused as too large.

const user = (content: string): PromptItem => ({ type: 'message', role: 'user', content });
const call = (id: string): PromptItem => ({ type: 'function_call', call_id: id, name: 'get_weather', arguments: '{}' });
const output = (id: string, text: string): PromptItem => ({ type: 'function_call_output', call_id: id, output: text });

describe('keptBound', () => {
  for (const model of ['anthropic:claude-sonnet-4-5', 'echo']) {
    it(`keeps a prompt with a summary at its cap within the prompt limit (${model})`, async () => {
      const budget = resolveTokenBudget(model, { context_limit: 4000, response_reserve: 500 });
      const sizes = compactionSizes(budget, { compact_trigger_ratio: 0.8, compact_keep_ratio: 0.3 });
      // The tools and instructions every prompt carries.
      const beside = 120;
      const bound = keptBound(budget, sizes.maxSummaryTokens, beside);
      // A long conversation (its summary reaches its cap), then a parallel step whose first output
      // takes the kept side to the bound: the cut moves back to the step's calls and keeps it.
      const earlier = Array.from({ length: 40 }, (_, index) => user(`${index} `.repeat(120)));
      const step = (length: number) => [
        user('weather in two cities?'),
        call('c_a'),
        call('c_b'),
        output('c_a', 'w'.repeat(length)),
        output('c_b', 'sunny'),
      ];
      const keptOf = (length: number) =>
        step(length)
          .slice(1)
          .reduce((sum, item) => sum + countItemTokens(item, budget.counter), 0);
      let length = 0;
      while (keptOf(length + 1) <= bound.maxKeptTokens!) length += 1;
      const history = [...earlier, ...step(length)].map((item, index) => ({ ...item, seq: index + 1 }));
      const plan = planCompaction(history, { keepTokens: sizes.keepTokens, counter: budget.counter, ...bound });
      expect(plan?.startSeq).toBe(earlier.length + 2);
      const made = await summarizeContext(echoModel, null, plan!, {
        maxSummaryTokens: sizes.maxSummaryTokens,
        window: budget,
      });
      const kept = history.filter((item) => item.seq >= plan!.startSeq);
      const prompt = [summaryMessage(made.context.summary), ...kept];
      expect(countPromptTokens(prompt, [], budget.counter) + beside).toBeLessThanOrEqual(budget.promptLimit);
    });
  }
});

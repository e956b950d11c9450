import { describe, expect, it } from 'vitest';
import type { PromptItem } from '../../lib/items.ts';
import { AnthropicBilling, OpenAiBilling, estimateTokens } from '../../bench/cache-billing.ts';
import { cacheCostsMarkdown, measureCacheCosts } from '../../bench/cache-costs.ts';
import { epochSweepChart } from '../../bench/epoch-sweep-chart.ts';
import { paretoFront, type SweepPoint } from '../../bench/epoch-sweep.ts';
import { simulatePromptCache } from '../../bench/prompt-cache.ts';

const system: PromptItem = { type: 'message', role: 'system', content: 'x'.repeat(3_000) };
const user: PromptItem = { type: 'message', role: 'user', content: 'go' };
const pair = (index: number): PromptItem[] => [
  { type: 'function_call', call_id: `c${index}`, name: 'read', arguments: `{"n":${index}}` },
  { type: 'function_call_output', call_id: `c${index}`, output: `output ${index} `.repeat(40) },
];
const pairs = (from: number, count: number) => Array.from({ length: count }, (_, k) => pair(from + k)).flat();
const tokensOf = (calls: { tokens: number }[]) => calls.map((call) => call.tokens);

describe('cache billing models', () => {
  it(
    'Anthropic: writes the first prompt, reads it back next call, ' + 'only tools and instructions past the lookback',
    () => {
      const billing = new AnthropicBilling('adapter', 1_000);
      const first = [system, user, ...pair(1)];
      const one = billing.bill(first, undefined);
      expect(one).toMatchObject({ read: 0, written: one.tokens });
      expect(one.cost).toBeCloseTo(1.25 * one.tokens);

      const second = [...first, ...pair(2)];
      const two = billing.bill(second, undefined);
      expect(two.read).toBe(one.tokens);
      expect(two.written).toBe(two.tokens - one.tokens);

      // 24 new blocks: the sliding anchors look back 20 blocks and miss the previous prompt.
      const third = [...second, ...pairs(3, 12)];
      const three = billing.bill(third, undefined);
      expect(three.read).toBe(1_000 + estimateTokens(JSON.stringify(system).length));

      // With one breakpoint at the end of the stable prefix, the tail is never read.
      const stableEnd = new AnthropicBilling('stable_end', 1_000);
      stableEnd.bill(first, 0);
      expect(stableEnd.bill(second, 0).read).toBe(three.read);
    },
  );

  it('Anthropic: a prefix under 1,024 tokens is neither written nor read', () => {
    const billing = new AnthropicBilling('adapter', 0);
    const small: PromptItem[] = [{ type: 'message', role: 'system', content: 'short' }, user];
    const calls = [billing.bill(small, undefined), billing.bill([...small, user], undefined)];
    expect(calls.map((call) => [call.read, call.written])).toEqual([
      [0, 0],
      [0, 0],
    ]);
    expect(calls.map((call) => call.cost)).toEqual(tokensOf(calls));
  });

  it('OpenAI: caches the common prefix in 128-token steps from 1,024 tokens, at half price', () => {
    const billing = new OpenAiBilling();
    expect(billing.bill(40_000, 4 * 1_023).read).toBe(0);
    const call = billing.bill(40_000, 4 * (1_024 + 200));
    expect(call.read).toBe(1_152);
    expect(call.cost).toBe(0.5 * 1_152 + (10_000 - 1_152));
  });

  it('the adapter placement reads more than one breakpoint at the stable end, on the simulated session', () => {
    const [run] = simulatePromptCache({ toolCalls: 80, seed: 5 }, [
      { name: 'shorten_tools_epoch', label: 'epoch', spec: 'shorten_tools_epoch' },
    ]);
    const { anthropic, anthropicStableEnd, openai } = run!.billing;
    expect(anthropic.readShare).toBeGreaterThan(0.85);
    expect(anthropic.readShare).toBeGreaterThan(anthropicStableEnd.readShare + 0.3);
    expect(anthropic.cost).toBeLessThan(anthropicStableEnd.cost);
    expect(openai.readShare).toBeLessThanOrEqual(run!.totals.reusableShare + 0.01);
  });

  it('keeps on the Pareto front only the points nothing beats on both cost and size', () => {
    const point = (meanPromptTokens: number, cost: number) =>
      ({ meanPromptTokens, anthropic: { cost } }) as unknown as SweepPoint;
    const points = [point(10, 9), point(20, 5), point(20, 6), point(30, 5), point(40, 1)];
    expect(paretoFront(points, (entry) => entry.anthropic.cost)).toEqual([points[0], points[1], points[4]]);
  });

  it('sweeps the epoch settings and renders the tables and the chart', () => {
    const costs = measureCacheCosts({ toolCalls: 40, sweepToolCalls: 30, seed: 3, log: () => {} });
    expect(costs.sweep.points).toHaveLength(18);
    expect(costs.sweep.points.filter((entry) => entry.isDefault)).toHaveLength(2);
    const markdown = cacheCostsMarkdown(costs.firstCalls, { ...costs, sweepChart: 'sweep.svg' }).join('\n');
    expect(markdown).toContain('![cost against mean prompt size for each epoch setting](sweep.svg)');
    expect(markdown.match(/\(front\)/g)!.length).toBeGreaterThanOrEqual(2);
    const svg = epochSweepChart(costs.sweep, 'sweep');
    expect(svg.match(/r="4"/g)).toHaveLength(2 * 18 + 2);
    expect(svg.match(/r="8"/g)).toHaveLength(4);
  });
});

import { describe, expect, it } from 'vitest';
import { checkPromptFits, planCompaction, truncatePrompt } from '../../lib/compaction/index.ts';
import { TailgateError } from '../../lib/errors.ts';
import type { FunctionCallItem, PromptItem, ReasoningItem } from '../../lib/items.ts';
import type { ModelRequest, ModelResult } from '../../lib/models/model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { approximateTokenCounter, countItemTokens, countPromptTokens } from '../../lib/tokens/token-counter.ts';
import { runTurn } from '../../lib/turn/index.ts';
import { recordingModel, servicesFor } from '../support/recording-model.ts';
import { SessionLog } from '../support/session-log.ts';

/** The reasoning of the current tool loop goes to the provider, so the prompt's tokens count it. */

const counter = approximateTokenCounter;
const thought = (text: string): ReasoningItem => ({ type: 'reasoning', summary: [{ type: 'summary_text', text }] });
/** Anthropic's redacted thinking: no text, its opaque payload only. */
const redacted: ReasoningItem = { type: 'reasoning', summary: [], encrypted_content: 'r'.repeat(400) };
const user = (content: string): PromptItem => ({ type: 'message', role: 'user', content });
const call = (callId: string, reasoning?: ReasoningItem[]): FunctionCallItem => ({
  type: 'function_call',
  call_id: callId,
  name: 'read',
  arguments: '{}',
  ...(reasoning ? { reasoning } : {}),
});
const output = (callId: string): PromptItem => ({ type: 'function_call_output', call_id: callId, output: 'ok' });
const bare = (items: PromptItem[]) =>
  items.map((item) => {
    if (item.type === 'function_call_output') return item;
    const { reasoning: _left, ...rest } = item;
    return rest as PromptItem;
  });

describe("the prompt's tokens and the current tool loop's reasoning", () => {
  const earlier = thought('e'.repeat(800));
  const loop = thought('l'.repeat(800));
  const blank = thought('b'.repeat(800));
  const prompt: PromptItem[] = [
    user('first'),
    call('c1', [earlier]),
    output('c1'),
    user('second'),
    { type: 'message', role: 'assistant', content: 'Reading.', reasoning: [loop] },
    call('c2', [redacted]),
    output('c2'),
    // A blank message's reasoning goes before the call after it, and without one is not sent.
    { type: 'message', role: 'assistant', content: ' ', reasoning: [blank] },
    call('c3'),
    output('c3'),
    { type: 'message', role: 'assistant', content: '', reasoning: [thought('t'.repeat(800))] },
  ];

  it('counts the reasoning sent with the loop: its text, a redacted block its payload; not earlier reasoning', () => {
    const sent = 2 * 200 + 100;
    expect(countPromptTokens(prompt, [], counter)).toBe(countPromptTokens(bare(prompt), [], counter) + sent);
    // With no user message after them, every call's and message's reasoning but the last blank one's is sent.
    const [, ...loopOnly] = prompt.slice(0, 3);
    expect(countPromptTokens(loopOnly, [], counter)).toBe(countPromptTokens(bare(loopOnly), [], counter) + 200);
  });

  it("counts a blank message's reasoning before the text of its answer that follows it", () => {
    const answer: PromptItem[] = [
      user('go'),
      { type: 'message', role: 'assistant', content: '\n\n', reasoning: [blank] },
      { type: 'message', role: 'assistant', content: 'Reading.', reasoning: [loop] },
      call('c4'),
    ];
    expect(countPromptTokens(answer, [], counter)).toBe(countPromptTokens(bare(answer), [], counter) + 400);
  });

  it("a compaction keeps the loop's newest items by their tokens as sent, reasoning included", () => {
    const stored = prompt.map((item, index) => ({ ...item, seq: index + 1 }));
    const bareTail = countPromptTokens(bare(stored).slice(3), [], counter);
    // Enough for the items from the second user message on without their reasoning, not with it.
    expect(planCompaction(bare(stored), { keepTokens: bareTail, counter })?.startSeq).toBe(4);
    expect(planCompaction(stored, { keepTokens: bareTail, counter })?.startSeq).toBeGreaterThan(4);
  });

  it('truncation and the overflow check count it the same way, and name the item it makes the largest', () => {
    const tokens = countPromptTokens(prompt, [], counter);
    const budget = (promptLimit: number) => ({ contextLimit: promptLimit, responseReserve: 0, promptLimit, counter });
    expect(truncatePrompt(prompt, [], budget(tokens)).promptTokens).toBe(tokens);
    expect(checkPromptFits(prompt, [], budget(tokens))).toBe(tokens);
    const refused = (() => {
      try {
        return checkPromptFits(prompt, [], budget(tokens - 1));
      } catch (error) {
        return error;
      }
    })();
    expect(refused).toMatchObject({
      code: 'context_too_large',
      details: { prompt_tokens: tokens, item: { index: 4, tokens: countItemTokens(prompt[4]!, counter) + 200 } },
    });
  });
});

describe('a turn whose tool loop carries reasoning', () => {
  it('is refused when the reasoning it sends takes it past the window, and goes on after a user message', async () => {
    const prompts: ModelRequest[] = [];
    // Each answer calls a tool after about 1,000 tokens of thinking.
    let calls = 0;
    const answer = (): ModelResult => ({
      output: [call(`call_${++calls}`, [thought('x'.repeat(4000))])],
      usage: { input_tokens: 0, output_tokens: 0 },
    });
    const store = new MemoryStore();
    const service = servicesFor(new SessionLog(store), store, recordingModel(prompts, answer));
    await service.sessions.create({ id: 's1', strategy_config: { context_limit: 1000, response_reserve: 100 } });
    const first = await runTurn(service, 's1', { input: 'Read the file.' });
    const input = [{ type: 'function_call_output' as const, call_id: 'call_1', output: 'ok' }];
    expect(first.output).toMatchObject([{ call_id: 'call_1' }]);
    const refused = await runTurn(service, 's1', { input }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(TailgateError);
    expect(refused).toMatchObject({ code: 'context_too_large', details: { item: { seq: 2 } } });
    expect(prompts).toHaveLength(1);
    // After a user message the reasoning is a finished turn's: not sent, not counted.
    await runTurn(service, 's1', { input: 'Never mind.' });
    expect(prompts).toHaveLength(2);
  });
});

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { truncatePrompt, type PromptBoundary } from '../../lib/compaction/truncate-prompt.ts';
import { answeredCalls, loopStart, type PromptItem } from '../../lib/items.ts';
import { approximateTokenCounter, promptItemTokens } from '../../lib/tokens/token-counter.ts';

/**
 * lib/compaction/truncate-prompt.ts pairs each call with its outputs and marks what it drops in
 * typed arrays (a warm turn's prompt under a boundary has thousands of items). The reference
 * below is the same drop written with answeredCalls, a map of arrays and a set: for any prompt,
 * breakpoint, target and boundary both drop the same items and report the same figures.
 */
function reference(
  prompt: readonly PromptItem[],
  promptLimit: number,
  cacheBreakpoint: number | undefined,
  target: number | undefined,
  keepFromSeq: number | undefined,
  stored: PromptBoundary | null,
) {
  const itemTokens = promptItemTokens(prompt, approximateTokenCounter);
  const before = itemTokens.reduce((sum, tokens) => sum + tokens, 0);
  let first = 0;
  while (
    first < prompt.length &&
    prompt[first]!.type === 'message' &&
    (prompt[first] as { role: string }).role === 'system'
  )
    first += 1;
  const inputStart =
    keepFromSeq === undefined ? -1 : prompt.findIndex((item) => item.seq !== undefined && item.seq >= keepFromSeq);
  const end = Math.max(inputStart === -1 ? loopStart(prompt) : inputStart, first);
  const outputsOf = new Map<number, number[]>();
  for (const [at, call] of answeredCalls(prompt)) outputsOf.set(call, [...(outputsOf.get(call) ?? []), at]);
  const dropped = new Set<number>();
  // The messages older than the stored message start: dropped, not counted.
  const unread = new Set<number>();
  let tokens = before;
  const drop = (index: number, kept = end) => {
    const item = prompt[index]!;
    if (dropped.has(index) || item.seq === undefined || item.type === 'function_call_output') return;
    const outputs = outputsOf.get(index) ?? [];
    if (outputs.some((at) => at >= kept)) return;
    for (const at of [index, ...outputs]) {
      dropped.add(at);
      tokens -= itemTokens[at]!;
    }
  };
  // What the boundary names goes before the newest turn, or without an input anywhere.
  const named = keepFromSeq === undefined ? prompt.length : end;
  if (stored)
    for (let index = first; index < named; index += 1) {
      const { type, seq } = prompt[index]!;
      if (seq === undefined) continue;
      if (type === 'message' && seq < stored.message_start_seq) {
        dropped.add(index);
        unread.add(index);
        tokens -= itemTokens[index]!;
      } else if (type === 'function_call' && seq < stored.tool_start_seq) drop(index, named);
    }
  const goal = tokens > promptLimit ? Math.min(target ?? promptLimit, promptLimit) : tokens;
  for (let index = first; index < end && tokens > goal; index += 1)
    if (prompt[index]!.type === 'function_call') drop(index);
  for (let index = first; index < end && tokens > goal; index += 1) if (prompt[index]!.type === 'message') drop(index);
  const places = [...dropped].sort((a, b) => a - b);
  return {
    prompt: prompt.filter((_, index) => !dropped.has(index)),
    tokens,
    cacheBreakpoint:
      cacheBreakpoint === undefined
        ? undefined
        : cacheBreakpoint - places.filter((index) => index <= cacheBreakpoint).length,
    omitted: places.flatMap((index) => (prompt[index]!.seq !== undefined ? [prompt[index]!.seq!] : [])),
    droppedSeqs: places.flatMap((index) =>
      !unread.has(index) && prompt[index]!.seq !== undefined ? [prompt[index]!.seq!] : [],
    ),
    before: before - [...unread].reduce((sum, index) => sum + itemTokens[index]!, 0),
  };
}

/**
 * Prompts of system, user and assistant messages, calls and outputs: call ids reused, a call
 * with several outputs, outputs unanswered, items without a seq.
 */
const promptArbitrary = fc
  .array(
    fc.record({
      kind: fc.constantFrom('system', 'user', 'assistant', 'call', 'output', 'output'),
      id: fc.integer({ min: 0, max: 2 }),
      size: fc.integer({ min: 0, max: 60 }),
      seq: fc.oneof(fc.constant(true), fc.constant(true), fc.constant(false)),
    }),
    { maxLength: 40 },
  )
  .map((steps) =>
    steps.map(({ kind, id, size, seq }, index): PromptItem => {
      const at = seq ? { seq: index + 1 } : {};
      const text = 'x'.repeat(size);
      if (kind === 'call') return { type: 'function_call', call_id: `c${id}`, name: 'f', arguments: text, ...at };
      if (kind === 'output') return { type: 'function_call_output', call_id: `c${id}`, output: text, ...at };
      return { type: 'message', role: kind as 'system' | 'user' | 'assistant', content: text, ...at };
    }),
  );

describe('truncatePrompt pairs calls and outputs as answeredCalls does', () => {
  it('drops what the reference drops, with the same tokens, breakpoint and dropped seqs', () => {
    fc.assert(
      fc.property(
        promptArbitrary,
        fc.integer({ min: 0, max: 400 }),
        fc.option(fc.nat(40), { nil: undefined }),
        fc.option(fc.nat(400), { nil: undefined }),
        fc.option(fc.nat(42), { nil: undefined }),
        fc.option(fc.record({ tool_start_seq: fc.nat(42), message_start_seq: fc.nat(42) }), { nil: null }),
        (prompt, promptLimit, breakpoint, target, keepFromSeq, stored) => {
          const budget = {
            contextLimit: promptLimit,
            responseReserve: 0,
            promptLimit,
            counter: approximateTokenCounter,
          };
          const expected = reference(prompt, promptLimit, breakpoint, target, keepFromSeq, stored);
          let cut: ReturnType<typeof truncatePrompt>;
          try {
            cut = truncatePrompt(prompt, [], budget, breakpoint, {
              boundary: stored,
              ...(target !== undefined ? { target } : {}),
              ...(keepFromSeq !== undefined ? { keepFromSeq } : {}),
            });
          } catch {
            // Still too large after the drop: the reference's prompt too.
            expect(expected.tokens).toBeGreaterThan(promptLimit);
            return;
          }
          expect(cut.prompt).toEqual(expected.prompt);
          expect(cut.promptTokens).toBe(expected.tokens);
          expect(cut.omitted ?? []).toEqual(expected.omitted);
          expect(cut.truncation?.dropped_seqs ?? []).toEqual(expected.droppedSeqs);
          if (cut.truncation) expect(cut.truncation.prompt_tokens_before).toBe(expected.before);
          if (expected.cacheBreakpoint !== undefined && expected.cacheBreakpoint >= 0)
            expect(cut.cacheBreakpoint).toBe(expected.cacheBreakpoint);
        },
      ),
      { numRuns: 1000 },
    );
  });
});

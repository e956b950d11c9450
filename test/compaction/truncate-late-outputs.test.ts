import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { truncatePrompt } from '../../lib/compaction/truncate-prompt.ts';
import { ContextTooLargeError } from '../../lib/compaction/check-prompt-fits.ts';
import type { PromptItem } from '../../lib/items.ts';
import { approximateTokenCounter } from '../../lib/tokens/index.ts';

type Step =
  | { kind: 'msg'; role: 'user' | 'assistant'; size: number }
  | { kind: 'call'; size: number; delay: number }
  | { kind: 'notice' };
const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    kind: fc.constant('msg' as const),
    role: fc.constantFrom('user' as const, 'assistant' as const),
    size: fc.integer({ min: 0, max: 200 }),
  }),
  fc.record({
    kind: fc.constant('call' as const),
    size: fc.integer({ min: 0, max: 400 }),
    delay: fc.integer({ min: 0, max: 4 }),
  }),
  fc.constant({ kind: 'notice' as const }),
);

/** A provider-valid prompt: calls answered at once or a few steps later, synthetic notices without seq. */
function prompt(steps: readonly Step[]): PromptItem[] {
  const items: PromptItem[] = [{ type: 'message', role: 'system', content: 'sys' }];
  const due: { at: number; item: PromptItem }[] = [];
  let seq = 0;
  let open = 0;
  steps.forEach((s, index) => {
    for (const d of due.filter((d) => d.at === index)) {
      items.push({ ...d.item, seq: ++seq });
      open -= 1;
    }
    if (s.kind === 'msg') {
      // A message between a call and its output would split a pair for providers: only when none is open.
      if (open === 0) items.push({ type: 'message', role: s.role, content: 'm'.repeat(s.size), seq: ++seq });
    } else if (s.kind === 'notice') {
      if (open === 0) items.push({ type: 'message', role: 'user', content: 'notice', synthetic: 'context_notice' });
    } else {
      const id = `c${index}`;
      items.push({ type: 'function_call', call_id: id, name: 'f', arguments: '{}', seq: ++seq });
      open += 1;
      due.push({
        at: index + 1 + s.delay,
        item: { type: 'function_call_output', call_id: id, output: 'o'.repeat(s.size) },
      });
    }
  });
  for (const d of due.filter((d) => d.at >= steps.length)) items.push({ ...d.item, seq: ++seq });
  return items;
}

function pairsProblem(items: readonly PromptItem[]): string | null {
  const calls = new Set(items.filter((i) => i.type === 'function_call').map((i) => i.call_id));
  const outputs = new Set(items.filter((i) => i.type === 'function_call_output').map((i) => i.call_id));
  for (const id of calls) if (!outputs.has(id)) return `call ${id} without output`;
  for (const id of outputs) if (!calls.has(id)) return `output ${id} without call`;
  return null;
}

describe('the overflow safety net never splits a pair', () => {
  it('over successive boundaries, with late outputs', () => {
    fc.assert(
      fc.property(
        fc.array(step, { size: 'max', maxLength: 40 }),
        fc.integer({ min: 50, max: 3000 }),
        fc.option(
          fc.record({
            tool_start_seq: fc.integer({ min: 1, max: 60 }),
            message_start_seq: fc.integer({ min: 1, max: 60 }),
          }),
          { nil: null },
        ),
        fc.option(fc.integer({ min: 1, max: 80 }), { nil: undefined }),
        (steps, limit, boundary, keepFromSeq) => {
          const items = prompt(steps);
          const budget = {
            contextLimit: limit,
            responseReserve: 0,
            promptLimit: limit,
            counter: approximateTokenCounter,
          };
          for (const options of [
            {},
            { boundary, target: Math.floor(limit * 0.6), ...(keepFromSeq ? { keepFromSeq } : {}) },
          ]) {
            try {
              const result = truncatePrompt(items, [], budget, undefined, options);
              expect(pairsProblem(result.prompt)).toBeNull();
            } catch (error) {
              if (!(error instanceof ContextTooLargeError)) throw error;
            }
          }
        },
      ),
      { numRuns: 2000 },
    );
  });
});

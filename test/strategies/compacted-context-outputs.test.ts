import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { PromptItem } from '../../lib/items.ts';
import { isContextNotice } from '../../lib/strategies/context-notice.ts';
import { preparePrompt } from '../../lib/strategies/prepare-prompt.ts';
import {
  configArbitrary,
  deepFreeze,
  inboxHook,
  longHistoryArbitrary,
  tailStrategyListArbitrary,
  type SequencedPromptItem,
} from './history-fixtures.ts';

/**
 * A compacted context (`compactedContext`, lib/strategies/history-index.ts) may hold outputs
 * whose call is before its start (summarized as interrupted, answered late): each is kept where
 * it stands, as a message is, and changes nothing else of the prompt. Built here from generated
 * histories by taking some calls out (as if before the start) and keeping their outputs.
 */

const SUMMARY: PromptItem = { type: 'message', role: 'user', content: 'Summary: ...', synthetic: 'summary' };

/** The history after its summary, without the calls `gone` picks: their outputs answer no call before them. */
function withoutCalls(history: readonly SequencedPromptItem[], gone: readonly boolean[]): PromptItem[] {
  let calls = 0;
  const kept = history.filter((item) => item.type !== 'function_call' || !gone[calls++ % gone.length]);
  return [SUMMARY, ...kept];
}

/** The outputs of `items` that answer no call before them. */
function lateOutputs(items: readonly PromptItem[]): Set<number> {
  const open = new Set<string>();
  const late = new Set<number>();
  for (const item of items) {
    if (item.type === 'function_call') open.add(item.call_id);
    else if (item.type === 'function_call_output' && !open.delete(item.call_id)) late.add(item.seq!);
  }
  return late;
}

const caseArbitrary = fc.record({
  history: longHistoryArbitrary,
  gone: fc.array(fc.boolean(), { minLength: 1, maxLength: 7 }),
  config: configArbitrary,
  list: tailStrategyListArbitrary,
});

describe('a compacted context keeps the outputs of calls before its start', () => {
  it('each where it stands, never shortened as a tool output, out of the counts; the rest as without them', () => {
    fc.assert(
      fc.property(caseArbitrary, ({ history, gone, config, list }) => {
        const items = deepFreeze(withoutCalls(history, gone));
        const late = lateOutputs(items);
        const kept = preparePrompt(items, list, { config, inbox: inboxHook, compactedContext: true });
        const before = preparePrompt(items, list, { config, inbox: inboxHook });
        // Every one is sent, once, in history order with the rest, whole (shorten_images aside).
        const sent = kept.items.filter((item) => item.seq !== undefined && late.has(item.seq));
        expect(sent.map((item) => item.seq)).toEqual([...late]);
        for (const item of sent) {
          const original = items.find((stored) => stored.seq === item.seq)!;
          if (item.compacted) expect(list).toContain('shorten_images');
          else expect(item).toBe(original);
        }
        // Nothing else changes: without them the prompt is the one that dropped them, but for
        // where the context notice stands (one ends the run of an open call before it, as a
        // message does, so the notice may go after that call).
        const others = kept.items.filter((item) => item.seq === undefined || !late.has(item.seq));
        expect(JSON.stringify(others.filter((item) => !isContextNotice(item)))).toBe(
          JSON.stringify(before.items.filter((item) => !isContextNotice(item))),
        );
        expect(kept.stats).toEqual(before.stats);
        expect(kept.stablePrefixLength > 0).toBe(before.stablePrefixLength > 0);
      }),
      { numRuns: 300 },
    );
  });

  it('one answered late after the newest items changes nothing before it: the prompt before it stays', () => {
    fc.assert(
      fc.property(caseArbitrary, fc.string({ maxLength: 40 }), ({ history, gone, config, list }, text) => {
        const items = withoutCalls(history, gone);
        const answer: PromptItem = {
          type: 'function_call_output',
          call_id: 'summarized',
          output: text,
          seq: history.length + 1,
        };
        const prompt = (from: PromptItem[]) =>
          preparePrompt(from, list, { config, inbox: inboxHook, compactedContext: true }).items;
        const after = prompt([...items, answer]);
        expect(after.filter((item) => item === answer)).toHaveLength(1);
        expect(after.filter((item) => item !== answer)).toEqual(prompt(items));
      }),
      { numRuns: 300 },
    );
  });
});

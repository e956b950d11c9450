import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { withoutSeqs } from '../../lib/compaction/fit-prompt.ts';
import type { PromptItem } from '../../lib/items.ts';

/** What fitPrompt kept of the strategies' items before: a set of the dropped seqs, then a filter. */
function bySet(items: readonly PromptItem[], gone: readonly number[]): PromptItem[] {
  const dropped = new Set(gone);
  return items.filter((item) => item.seq === undefined || !dropped.has(item.seq));
}

const item = (seq: number | undefined): PromptItem => ({
  type: 'message',
  role: 'user',
  content: `item ${seq ?? 'synthetic'}`,
  ...(seq !== undefined ? { seq } : {}),
});

describe('withoutSeqs', () => {
  it('keeps what a set of the dropped seqs keeps: in order, out of order, with items without a seq', () => {
    const seqs = fc.array(fc.option(fc.integer({ min: 1, max: 40 }), { nil: undefined, freq: 6 }), { maxLength: 30 });
    const ordered = seqs.map((list) => {
      const sorted = list.filter((seq) => seq !== undefined).sort((a, b) => a - b);
      return list.map((seq) => (seq === undefined ? undefined : sorted.shift()));
    });
    const gone = fc.array(fc.integer({ min: 1, max: 40 }), { maxLength: 15 });
    fc.assert(
      fc.property(fc.oneof(seqs, ordered), gone, fc.boolean(), (list, dropped, sortGone) => {
        const items = list.map(item);
        const names = sortGone ? [...dropped].sort((a, b) => a - b) : dropped;
        const kept = withoutSeqs(items, names);
        expect(kept).toEqual(bySet(items, names));
        // The same objects, not copies.
        for (const entry of kept) expect(items).toContain(entry);
      }),
      { numRuns: 1000 },
    );
  });
});

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { emptyAggregates } from '../../lib/strategies/aggregates.ts';
import { assembleTail, chunkBody, layoutView, type ViewChunk } from '../../lib/session/log/view-chunks.ts';
import type { LogItem } from '../../lib/session/records.ts';
import { VIEW_VERSION, type LogView } from '../../lib/session/view-records.ts';
import { bodyLength } from '../../lib/store/object-store.ts';

const scope = { keyPrefix: '', id: 's', generation: '' };

function message(seq: number, text: string): LogItem {
  return { type: 'message', role: 'user', content: text, seq, created_at: '2026-01-01T00:00:00.000Z' } as LogItem;
}

function viewOf(items: LogItem[], windowStart: number): LogView {
  return {
    format: 'tailgate.view.v1',
    v: VIEW_VERSION,
    policy: 'p',
    record: 9,
    last_seq: items.at(-1)?.seq ?? 0,
    aggregates: emptyAggregates(),
    keys: { count: 0, depth: 0, versions: {}, counts: {} },
    tail: { from_seq: 1, window_start: windowStart, items },
    created_at: '2026-01-01T00:00:00.000Z',
  } as LogView;
}

/** Seqs ascending, each an item with one of a few texts (so some are equal to the chunk's and some not). */
const tailArbitrary = fc
  .uniqueArray(fc.integer({ min: 1, max: 60 }), { maxLength: 40 })
  .chain((seqs) =>
    fc.tuple(
      ...seqs.sort((a, b) => a - b).map((seq) => fc.constantFrom('a', 'b', 'c').map((text) => message(seq, text))),
    ),
  );

describe('a view stored against a chunk', () => {
  it('reads back as its tail, whatever changed since the chunk was written', () => {
    fc.assert(
      fc.property(tailArbitrary, tailArbitrary, fc.boolean(), (held, tail, same) => {
        // Items equal by their bytes but other objects, or the very objects the chunk holds.
        const items = same
          ? tail.map(
              (item) =>
                held.find((other) => other.seq === item.seq && JSON.stringify(other) === JSON.stringify(item)) ?? item,
            )
          : tail;
        const chunk: ViewChunk = { key: 'k', record: 1, id: '00000000', items: held, bytes: 1e9 };
        const layout = layoutView(scope, viewOf(items, 1), chunk, 1);
        expect(layout.chunk).toBe(chunk);
        expect(assembleTail(held, layout.drop, layout.inline)).toEqual(items);
        // Nothing the chunk holds as it is, is held again.
        for (const item of layout.inline)
          expect(held.some((other) => JSON.stringify(other) === JSON.stringify(item))).toBe(false);
      }),
    );
  });

  it('writes a new chunk of the items before the window when what changed outgrows the old one', () => {
    const old = Array.from({ length: 10 }, (_, index) => message(index + 1, 'x'.repeat(100)));
    const chunk: ViewChunk = { key: 'k', record: 1, id: '00000000', items: old, bytes: 1_000 };
    const items = Array.from({ length: 40 }, (_, index) => message(index + 1, 'y'.repeat(100)));
    const layout = layoutView(scope, viewOf(items, 31), chunk, 1_000);
    expect(layout.write).toBe(true);
    expect(layout.chunk!.items).toEqual(items.slice(0, 30));
    // Its bytes, counted without building its body, are its body's.
    expect(layout.chunk!.bytes).toBe(bodyLength(chunkBody(layout.chunk!)));
    expect(layout.inline).toEqual(items.slice(30));
    expect(layout.drop).toEqual([]);
    // Too little before the window for a chunk: none.
    expect(layoutView(scope, viewOf(items, 3), undefined, 1_000)).toEqual({
      chunk: null,
      write: false,
      drop: [],
      inline: items,
    });
  });
});

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { listBytes, listParts } from '../../lib/session/log/item-bytes.ts';
import type { LogItem } from '../../lib/session/records.ts';
import { elidedOf, storedItemJson } from '../../lib/session/view-items.ts';
import { concatBytes } from '../../lib/store/object-store.ts';

const TIMES = ['2026-01-01T00:00:00.000Z', '2026-01-01T00:00:01.000Z'];

function message(seq: number, text: string, time: number): LogItem {
  return { type: 'message', role: 'user', content: text, seq, created_at: TIMES[time]! } as LogItem;
}

/** The stored JSON array of `items`, item by item (lib/session/view-items.ts). */
function storedList(items: readonly LogItem[]): string {
  return `[${items.map((item, index) => storedItemJson(item, elidedOf(item, items[index - 1]))).join(',')}]`;
}

function decoded(items: readonly LogItem[], from?: readonly LogItem[], gather?: boolean): string {
  return new TextDecoder().decode(concatBytes(listParts(listBytes(items, from, gather))));
}

const itemsArbitrary = fc
  .uniqueArray(fc.integer({ min: 1, max: 80 }), { maxLength: 50 })
  .chain((seqs) =>
    fc.tuple(
      ...seqs
        .sort((a, b) => a - b)
        .map((seq) =>
          fc.tuple(fc.constantFrom('a', 'bé', '"c"'), fc.nat(1)).map(([text, time]) => message(seq, text, time)),
        ),
    ),
  );

describe('the bytes of a view tail built from the tail before it', () => {
  it('are those of its items serialized one by one, whatever was dropped, replaced or added', () => {
    fc.assert(
      fc.property(
        itemsArbitrary,
        itemsArbitrary,
        fc.array(fc.nat(3), { maxLength: 50 }),
        fc.boolean(),
        (held, added, choices, gather) => {
          // The base tail, built first; then a tail of its items kept (the same objects), dropped,
          // or replaced by an equal copy or another item of the same seq, and items after them.
          expect(decoded(held)).toBe(storedList(held));
          const next: LogItem[] = [];
          held.forEach((item, index) => {
            const choice = choices[index] ?? 0;
            if (choice === 0) next.push(item);
            else if (choice === 1) next.push({ ...item });
            else if (choice === 2) next.push(message(item.seq, 'other', 1));
          });
          const last = held.at(-1)?.seq ?? 0;
          next.push(...added.map((item) => ({ ...item, seq: item.seq + last })));
          expect(decoded(next, held, gather)).toBe(storedList(next));
          // Where each item's slot starts, as the next views and a chunk cut from it read them.
          const slots = next.map(
            (item, index) =>
              new TextEncoder().encode(`${storedItemJson(item, elidedOf(item, next[index - 1]))},`).length,
          );
          const starts = [0];
          for (const length of slots) starts.push(starts.at(-1)! + length);
          expect([...listBytes(next, held, gather).starts]).toEqual(starts);
          // And from it, a part of it (as a view's items beside its chunk).
          const part = next.filter((_, index) => index % 3 !== 0);
          expect(decoded(part, next, false)).toBe(storedList(part));
        },
      ),
    );
  });
});

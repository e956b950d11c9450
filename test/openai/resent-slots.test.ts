import { describe, expect, it } from 'vitest';
import { resentSlots } from '../../lib/openai/input-items.ts';

// The places of a resent history (GET /v1/responses/{id}/input_items): its stored items, each
// compaction item sent before the item it preceded, in the order sent.
describe('resentSlots', () => {
  it('places each compaction item before the item it preceded, several at one place in order', () => {
    const compactions = [
      { at: 0, id: 'cmp_a' },
      { at: 2, id: 'cmp_b', encrypted_content: 'b' },
      { at: 2, id: 'cmp_c' },
      { at: 3, id: 'cmp_d' },
      { at: 4, id: 'cmp_past' },
    ];
    expect(resentSlots({ first_seq: 5, last_seq: 7, compactions })).toEqual([
      { compaction: { at: 0, id: 'cmp_a' } },
      { seq: 5 },
      { seq: 6 },
      { compaction: { at: 2, id: 'cmp_b', encrypted_content: 'b' } },
      { compaction: { at: 2, id: 'cmp_c' } },
      { seq: 7 },
      { compaction: { at: 3, id: 'cmp_d' } },
    ]);
    expect(resentSlots({ first_seq: 1, last_seq: 0, compactions })).toEqual([{ compaction: { at: 0, id: 'cmp_a' } }]);
  });

  it('places many compaction items among many items, each where it was sent', () => {
    const count = 20_000;
    // One compaction item before every other item, sent out of order (the newest first).
    const compactions = Array.from({ length: count / 2 }, (_, index) => ({
      at: count - 2 * (index + 1),
      id: `cmp_${index}`,
    }));
    const atOf = new Map(compactions.map(({ at, id }) => [id, at]));
    const slots = resentSlots({ first_seq: 101, last_seq: 100 + count, compactions });
    expect(slots).toHaveLength(count + count / 2);
    expect(slots.filter((slot) => 'seq' in slot).map((slot) => (slot as { seq: number }).seq)).toEqual(
      Array.from({ length: count }, (_, index) => 101 + index),
    );
    slots.forEach((slot, index) => {
      if (!('compaction' in slot)) return;
      // The item after it is the one it preceded.
      expect(slots[index + 1]).toEqual({ seq: 101 + atOf.get(slot.compaction.id)! });
    });
    expect(slots.slice(0, 4)).toEqual([
      { compaction: { at: 0, id: `cmp_${count / 2 - 1}` } },
      { seq: 101 },
      { seq: 102 },
      { compaction: { at: 2, id: `cmp_${count / 2 - 2}` } },
    ]);
  });
});

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sortedUnion } from '../../lib/sorted.ts';

describe('sortedUnion', () => {
  const reference = (a: number[], b: number[]) => [...new Set([...a, ...b])].sort((x, y) => x - y);

  it('merges two ascending lists into one, each value once', () => {
    expect(sortedUnion([1, 3, 3, 7], [2, 3, 8])).toEqual([1, 2, 3, 7, 8]);
    expect(sortedUnion([], [4, 5])).toEqual([4, 5]);
    expect(sortedUnion([4, 5], [])).toEqual([4, 5]);
  });

  it('gives what a sort of the values once gives, whether or not the lists come sorted', () => {
    const list = fc.array(fc.integer({ min: 0, max: 50 }), { size: 'max', maxLength: 30 });
    fc.assert(
      fc.property(list, list, fc.boolean(), (a, b, sort) => {
        const [left, right] = sort ? [[...a].sort((x, y) => x - y), [...b].sort((x, y) => x - y)] : [a, b];
        expect(sortedUnion(left, right)).toEqual(reference(left, right));
      }),
    );
  });
});

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BoundedCache } from '../../lib/session/log/bounded-cache.ts';

/** The cache's contract, written plainly: entries in use order (oldest first), the oldest dropped past the bound. */
class ReferenceCache {
  entries: { key: string; value: number; size: number }[] = [];
  evicted: string[] = [];
  readonly maxSize: number;
  constructor(maxSize: number) {
    this.maxSize = maxSize;
  }

  get(key: string): number | undefined {
    const at = this.entries.findIndex((entry) => entry.key === key);
    if (at < 0) return undefined;
    const [entry] = this.entries.splice(at, 1);
    this.entries.push(entry!);
    return entry!.value;
  }

  set(key: string, value: number, size: number): void {
    if (size > this.maxSize) return;
    this.delete(key);
    this.entries.push({ key, value, size });
    while (this.entries.reduce((sum, entry) => sum + entry.size, 0) > this.maxSize)
      this.evicted.push(this.entries.shift()!.key);
  }

  delete(key: string): void {
    this.entries = this.entries.filter((entry) => entry.key !== key);
  }
}

const operation = fc.oneof(
  fc.record({
    op: fc.constant('set' as const),
    key: fc.integer({ min: 0, max: 40 }),
    size: fc.integer({ min: 1, max: 30 }),
  }),
  fc.record({ op: fc.constant('get' as const), key: fc.integer({ min: 0, max: 40 }) }),
  fc.record({ op: fc.constant('peek' as const), key: fc.integer({ min: 0, max: 40 }) }),
  fc.record({ op: fc.constant('delete' as const), key: fc.integer({ min: 0, max: 40 }) }),
);

describe('BoundedCache', () => {
  it('keeps what a plain list in use order keeps, and evicts the same entries in the same order', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 10, max: 200 }),
        fc.array(operation, { minLength: 50, maxLength: 400 }),
        (maxSize, operations) => {
          const evicted: string[] = [];
          const cache = new BoundedCache<number>(maxSize, (key) => evicted.push(key));
          const reference = new ReferenceCache(maxSize);
          for (const [index, step] of operations.entries()) {
            const key = `k${step.key}`;
            if (step.op === 'set') {
              cache.set(key, index, step.size);
              reference.set(key, index, step.size);
            } else if (step.op === 'get') expect(cache.get(key)).toBe(reference.get(key));
            else if (step.op === 'peek')
              expect(cache.peek(key)).toBe(reference.entries.find((entry) => entry.key === key)?.value);
            else {
              cache.delete(key);
              reference.delete(key);
            }
            expect(cache.size).toBe(reference.entries.reduce((sum, entry) => sum + entry.size, 0));
          }
          expect(evicted).toEqual(reference.evicted);
          for (const entry of reference.entries) expect(cache.has(entry.key)).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });
});

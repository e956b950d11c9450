import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CountingStore } from '../support/counting-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { defineObjectStoreConformance } from './object-store-conformance.ts';

// A wrapper must not change what the store does.
defineObjectStoreConformance('counting wrapper over memory', () => new CountingStore(new MemoryStore()), 'of the body');

describe('CountingStore', () => {
  it('counts each operation by kind and the body bytes read and written', async () => {
    const store = new CountingStore(new MemoryStore());
    await store.put('a', '0123456789');
    await store.put('a', 'ignored', { onlyIfAbsent: true });
    await store.put('b', new Uint8Array(3));
    await store.get('a');
    await store.get('a', { range: { suffix: 4 } });
    await store.get('missing');
    await store.head('a');
    await store.list('');
    await store.list('', { limit: 1 });
    await store.delete(['a', 'b']);
    expect(store.counts).toEqual({ get: 3, head: 1, put: 3, list: 2, delete: 1, bytesRead: 14, bytesWritten: 20 });
    expect(store.operations).toBe(10);

    store.reset();
    expect(store.counts).toEqual({ get: 0, head: 0, put: 0, list: 0, delete: 0, bytesRead: 0, bytesWritten: 0 });
    expect(store.operations).toBe(0);
  });

  it('counts bytes read as the sum of returned body lengths (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.nat(40), fc.oneof(fc.constant(undefined), fc.nat(50))), { maxLength: 20 }),
        async (reads) => {
          const store = new CountingStore(new MemoryStore());
          await store.put('k', new Uint8Array(40));
          let expected = 0;
          for (const [offset, suffix] of reads) {
            const range = suffix === undefined ? { offset } : { suffix };
            expected += (await store.get('k', { range }))!.body.length;
          }
          expect(store.counts.bytesRead).toBe(expected);
          expect(store.counts.get).toBe(reads.length);
        },
      ),
      { numRuns: 100 },
    );
  });

  it('counts calls that fail', async () => {
    const store = new CountingStore(new FaultyStore(new MemoryStore()).failWhen(() => true));
    await expect(store.get('k')).rejects.toThrow();
    await expect(store.list('')).rejects.toThrow();
    expect(store.counts).toMatchObject({ get: 1, list: 1, bytesRead: 0 });
  });
});

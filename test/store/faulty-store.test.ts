import { describe, expect, it } from 'vitest';
import { StorageError } from '../../lib/errors.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { defineObjectStoreConformance } from './object-store-conformance.ts';

defineObjectStoreConformance(
  'faulty wrapper without rules over memory',
  () => new FaultyStore(new MemoryStore()),
  'of the body',
);

describe('FaultyStore', () => {
  it('fails matching calls before they reach the store, with a StorageError by default', async () => {
    const inner = new MemoryStore();
    const store = new FaultyStore(inner).failWhen(
      ({ operation, key }) => operation === 'put' && key.startsWith('turn/'),
    );
    await expect(store.put('turn/1', 'x')).rejects.toBeInstanceOf(StorageError);
    await expect(store.put('turn/1', 'x')).rejects.toMatchObject({
      code: 'storage_error',
      message: expect.stringContaining('turn/1'),
    });
    expect(await inner.head('turn/1')).toBeNull();
    // Other operations and keys pass through.
    expect(await store.put('session.json', 'x')).not.toBeNull();
    expect(await store.get('turn/1')).toBeNull();
    expect(store.injected).toBe(2);
  });

  it('fails after the work when asked: the write lands but the caller sees an error', async () => {
    const inner = new MemoryStore();
    const store = new FaultyStore(inner).failWhen(({ operation }) => operation === 'put', { after: true, times: 1 });
    await expect(store.put('k', 'landed', { onlyIfAbsent: true })).rejects.toThrow(StorageError);
    expect(new TextDecoder().decode((await inner.get('k'))!.body)).toBe('landed');
    // The retry of a create-only put now finds the key taken.
    expect(await store.put('k', 'landed', { onlyIfAbsent: true })).toBeNull();
  });

  it.each([
    ['first call only', { times: 1 }, [false, true, true, true]],
    ['first two calls', { times: 2 }, [false, false, true, true]],
    ['every call', {}, [false, false, false, false]],
  ] as const)('limits failures by times: %s', async (_label, options, expected) => {
    const store = new FaultyStore(new MemoryStore()).failWhen(({ operation }) => operation === 'list', options);
    const outcomes: boolean[] = [];
    for (let i = 0; i < 4; i++)
      outcomes.push(
        await store.list('').then(
          () => true,
          () => false,
        ),
      );
    expect(outcomes).toEqual(expected);
  });

  it('numbers calls per operation, so "the third get" can fail', async () => {
    const store = new FaultyStore(new MemoryStore()).failWhen(
      ({ operation, index }) => operation === 'get' && index === 3,
    );
    await store.head('x');
    const outcomes: boolean[] = [];
    for (let i = 0; i < 4; i++)
      outcomes.push(
        await store.get('x').then(
          () => true,
          () => false,
        ),
      );
    expect(outcomes).toEqual([true, true, false, true]);
  });

  it('fails a delete of many keys when any key matches, deleting none of them', async () => {
    const inner = new MemoryStore();
    await inner.put('a', '1');
    await inner.put('b', '2');
    const store = new FaultyStore(inner).failWhen(({ operation, key }) => operation === 'delete' && key === 'b');
    await expect(store.delete(['a', 'b'])).rejects.toThrow(/delete b/);
    expect(await inner.head('a')).not.toBeNull();
    await store.delete('a');
    expect(await inner.head('a')).toBeNull();
  });

  it('uses a custom error and heals', async () => {
    const store = new FaultyStore(new MemoryStore()).failWhen(() => true, {
      error: (call) => new Error(`boom ${call.operation}`),
    });
    await expect(store.head('k')).rejects.toThrow('boom head');
    store.heal();
    expect(await store.head('k')).toBeNull();
  });
});

import { describe, expect, it } from 'vitest';
import { StorageError, StorageUnsupportedError } from '../../lib/errors.ts';
import { CountingStore } from '../support/counting-store.ts';
import { FaultyStore, type StoreCall } from '../support/faulty-store.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { Body, ObjectInfo, ObjectStore, PutOptions } from '../../lib/store/object-store.ts';
import { PROBE_PREFIX, requireConditionalWrites } from '../../lib/store/write-probe.ts';

/** Every call that reaches `inner`, in order, with its key. */
function recording(inner: ObjectStore): { store: FaultyStore; calls: StoreCall[] } {
  const calls: StoreCall[] = [];
  const store = new FaultyStore(inner).failWhen((call) => {
    calls.push(call);
    return false;
  });
  return { store, calls };
}

/** A memory store that drops the chosen precondition, as some S3-compatible servers do. */
class Ignoring extends MemoryStore {
  readonly ignored: keyof Pick<PutOptions, 'onlyIfAbsent' | 'ifMatch'>;

  constructor(ignored: keyof Pick<PutOptions, 'onlyIfAbsent' | 'ifMatch'>) {
    super();
    this.ignored = ignored;
  }

  override put(key: string, body: Body, options: PutOptions = {}): Promise<ObjectInfo | null> {
    const { [this.ignored]: _dropped, ...kept } = options;
    return super.put(key, body, kept);
  }
}

describe('requireConditionalWrites', () => {
  it(
    'passes a memory store with two create-only puts and a wrong If-Match on one scratch key under the prefix, ' +
      'then deletes it',
    async () => {
      const memory = new MemoryStore();
      const { store, calls } = recording(memory);
      await expect(requireConditionalWrites(store, { keyPrefix: 'prod/' })).resolves.toBeUndefined();
      const key = calls[0]!.key;
      expect(key).toMatch(/^prod\/\.tailgate\/probe\/[0-9a-f-]{36}$/);
      expect(calls.map((call) => [call.operation, call.key])).toEqual([
        ['put', key],
        ['put', key],
        ['put', key],
        ['delete', key],
      ]);
      expect((await memory.list('')).objects).toEqual([]);
    },
  );

  it.each([
    [
      'onlyIfAbsent',
      ['If-None-Match'],
      /^the store ignores If-None-Match: a create-only put overwrote an existing object; tailgate needs/,
    ],
    [
      'ifMatch',
      ['If-Match'],
      /^the store ignores If-Match: a put with a wrong ETag overwrote the object; tailgate needs/,
    ],
  ] as const)('names only what is missing when a store ignores %s', async (ignored, missing, message) => {
    const store = new Ignoring(ignored);
    await expect(requireConditionalWrites(store)).rejects.toMatchObject({
      missing,
      message: expect.stringMatching(message),
    });
    expect((await store.list('')).objects).toEqual([]);
  });

  it(
    'probes once per store for many concurrent callers, and not again afterwards; another store is probed on ' +
      'its own',
    async () => {
      const store = new CountingStore(new MemoryStore());
      await Promise.all(Array.from({ length: 50 }, () => requireConditionalWrites(store)));
      expect(store.counts).toMatchObject({ get: 0, head: 0, list: 0, put: 3, delete: 1 });
      store.reset();
      for (let call = 0; call < 20; call++) await requireConditionalWrites(store);
      expect(store.operations).toBe(0);

      const other = new CountingStore(new MemoryStore());
      await requireConditionalWrites(other);
      expect(other.counts.put).toBe(3);
    },
  );

  it(
    'shares the verdict of a store with every wrapper of it (a counting store per request costs no ' + 'probe)',
    async () => {
      const backend = new MemoryStore();
      const first = new CountingStore(backend);
      await requireConditionalWrites(first);
      expect(first.counts.put).toBe(3);
      const wrappers = [new CountingStore(backend), new CountingStore(new CountingStore(backend))];
      for (const wrapper of wrappers) await requireConditionalWrites(new FaultyStore(wrapper));
      expect(wrappers.map((wrapper) => wrapper.operations)).toEqual([0, 0]);
    },
  );

  it('remembers a refusal: later callers get the same error without touching the store', async () => {
    const store = new CountingStore(new Ignoring('onlyIfAbsent'));
    const first = await requireConditionalWrites(store).catch((error: unknown) => error);
    expect(first).toBeInstanceOf(StorageUnsupportedError);
    store.reset();
    await expect(requireConditionalWrites(store)).rejects.toBe(first);
    expect(store.operations).toBe(0);
  });

  it('forgets a probe that failed with a storage error and probes again on the next call', async () => {
    const memory = new MemoryStore();
    const store = new FaultyStore(memory).failWhen(
      ({ operation, key }) => operation === 'put' && key.includes(PROBE_PREFIX),
      { times: 1, after: true },
    );
    const counting = new CountingStore(store);
    await expect(
      Promise.all([requireConditionalWrites(counting), requireConditionalWrites(counting)]),
    ).rejects.toBeInstanceOf(StorageError);
    // The failed put landed before its answer was lost; the scratch key is deleted anyway.
    expect(counting.counts).toMatchObject({ put: 1, delete: 1 });
    expect((await memory.list('')).objects).toEqual([]);
    counting.reset();
    await expect(requireConditionalWrites(counting)).resolves.toBeUndefined();
    expect(counting.counts).toMatchObject({ put: 3, delete: 1 });
    counting.reset();
    await requireConditionalWrites(counting);
    expect(counting.operations).toBe(0);
  });

  it('forgets a probe whose clean-up failed with a storage error: the next call probes again', async () => {
    const store = new CountingStore(
      new FaultyStore(new MemoryStore()).failWhen(({ operation }) => operation === 'delete', { times: 1 }),
    );
    await expect(requireConditionalWrites(store)).rejects.toBeInstanceOf(StorageError);
    await expect(requireConditionalWrites(store)).resolves.toBeUndefined();
    expect(store.counts).toMatchObject({ put: 6, delete: 2 });
  });

  it('answers at once when the store timed out: the clean-up of its scratch key is not waited for', async () => {
    class Unanswering extends MemoryStore {
      deletes = 0;
      override put(key: string): Promise<ObjectInfo | null> {
        return Promise.reject(new StorageError(`S3 put ${key} failed: timed out`, { key, name: 'TimeoutError' }));
      }
      override delete(): Promise<void> {
        this.deletes += 1;
        return new Promise(() => {});
      }
    }
    const store = new Unanswering();
    const error = await requireConditionalWrites(store).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(StorageError);
    expect((error as StorageError).message).toContain('timed out');
    expect(store.deletes).toBe(1);
  });

  it('refuses an endpoint that answers a put without an ETag (not an S3 API: a web page, a console port)', async () => {
    class NoEtags extends MemoryStore {
      override async put(key: string, body: Body, options: PutOptions = {}): Promise<ObjectInfo | null> {
        await super.put(key, body);
        void options;
        return { key, size: 0, etag: '', uploaded: new Date(0), metadata: {} };
      }
    }
    const store = new NoEtags();
    const error = await requireConditionalWrites(store).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(StorageError);
    expect(error).not.toBeInstanceOf(StorageUnsupportedError);
    expect((error as StorageError).message).toContain('without an ETag');
    expect((await store.list('')).objects).toEqual([]);
  });
});

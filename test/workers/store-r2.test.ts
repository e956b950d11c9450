import { env } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import { StorageError } from '../../lib/errors.ts';
import { R2Store } from '../../lib/store/r2.ts';
import { defineObjectStoreConformance } from '../store/object-store-conformance.ts';

const bucket = (env as { BUCKET: R2Bucket }).BUCKET;

// The local bucket is shared by every test in this file (no per-test storage isolation),
// which the conformance suite's per-test random prefixes allow for.
defineObjectStoreConformance('r2 binding', () => new R2Store(bucket), 'of the body');

describe('R2Store', () => {
  const fresh = () => `r2-store/${crypto.randomUUID()}/`;

  /** The bucket, with the next `failures` calls of `method` failing as R2's internal errors do. */
  function flaky(method: 'get' | 'head' | 'list' | 'put', failures: number): { bucket: R2Bucket; calls: () => number } {
    let calls = 0;
    const wrapped = new Proxy(bucket, {
      get(target, property) {
        const value = Reflect.get(target, property, target) as unknown;
        if (typeof value !== 'function') return value;
        if (property !== method) return value.bind(target);
        return (...args: unknown[]) => {
          calls += 1;
          if (calls <= failures)
            return Promise.reject(new Error(`${method}: We encountered an internal error. Please try again. (10001)`));
          return (value as (...rest: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    return { bucket: wrapped, calls: () => calls };
  }

  it('tries a read again after a transient error, up to 3 times in all; a write is not repeated', async () => {
    const key = `${fresh()}retried`;
    await new R2Store(bucket).put(key, 'body');
    for (const method of ['get', 'head', 'list'] as const) {
      const twice = flaky(method, 2);
      const store = new R2Store(twice.bucket);
      const read = method === 'list' ? store.list(key) : method === 'head' ? store.head(key) : store.get(key);
      await expect(read).resolves.toBeTruthy();
      expect(twice.calls()).toBe(3);
      const always = flaky(method, 3);
      const failing = new R2Store(always.bucket);
      await expect(
        method === 'list' ? failing.list(key) : method === 'head' ? failing.head(key) : failing.get(key),
      ).rejects.toBeInstanceOf(StorageError);
      expect(always.calls()).toBe(3);
    }
    const once = flaky('put', 1);
    await expect(new R2Store(once.bucket).put(`${fresh()}written`, 'x')).rejects.toBeInstanceOf(StorageError);
    expect(once.calls()).toBe(1);
  });

  it('answers a range from the end with no bytes, also when the bucket says only "Unspecified error"', async () => {
    const key = `${fresh()}ten`;
    await new R2Store(bucket).put(key, '0123456789');
    // As the local bucket answers such a range at times (it logs an assertion and fails).
    const vague = new Proxy(bucket, {
      get(target, property) {
        const value = Reflect.get(target, property, target) as (...args: unknown[]) => unknown;
        if (property !== 'get') return typeof value === 'function' ? value.bind(target) : value;
        return (...args: unknown[]) => {
          const range = (args[1] as { range?: { offset?: number } } | undefined)?.range;
          if (range?.offset !== undefined && range.offset >= 10)
            return Promise.reject(new Error('get: Unspecified error (0)'));
          return value.apply(target, args);
        };
      },
    });
    const store = new R2Store(vague);
    for (const range of [{ offset: 10, length: 1 }, { offset: 12 }]) {
      const got = await store.get(key, { range });
      expect(got!.body.length).toBe(0);
      expect(got!.size).toBe(10);
    }
    expect(new TextDecoder().decode((await store.get(key, { range: { offset: 8, length: 5 } }))!.body)).toBe('89');
  });

  it('returns the plain etag, which onlyIf.etagMatches accepts, not the quoted httpEtag', async () => {
    const store = new R2Store(bucket);
    const key = `${fresh()}etag`;
    const put = await store.put(key, 'v1');
    const raw = await bucket.head(key);
    expect(put!.etag).toBe(raw!.etag);
    expect(put!.etag).not.toContain('"');
    expect(await store.put(key, 'v2', { ifMatch: raw!.httpEtag.replaceAll('"', '') })).not.toBeNull();
  });

  it('stores the content type as HTTP metadata', async () => {
    const store = new R2Store(bucket);
    const key = `${fresh()}typed`;
    await store.put(key, '{}', { contentType: 'application/json' });
    expect((await bucket.head(key))!.httpMetadata?.contentType).toBe('application/json');
  });

  it('deletes many keys in batches of at most 1000', async () => {
    const prefix = fresh();
    const batches: number[] = [];
    const counting = new Proxy(bucket, {
      get(target, property) {
        if (property === 'delete') {
          return (keys: string | string[]) => {
            batches.push(Array.isArray(keys) ? keys.length : 1);
            return target.delete(keys);
          };
        }
        const value = Reflect.get(target, property) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const store = new R2Store(counting);
    await store.put(`${prefix}0`, 'a');
    await store.put(`${prefix}2400`, 'b');
    await store.delete(Array.from({ length: 2401 }, (_, i) => `${prefix}${i}`));
    expect(batches).toEqual([1000, 1000, 401]);
    expect((await store.list(prefix)).objects).toEqual([]);
  });

  it('maps binding failures to StorageError naming the key', async () => {
    const broken = {
      get: () => Promise.reject(new Error('network lost')),
      head: () => Promise.reject(new Error('network lost')),
      put: () => Promise.reject(new Error('we are being rate limited (10058)')),
      list: () => Promise.reject(new Error('internal error')),
      delete: () => Promise.reject(new Error('internal error')),
    } as unknown as R2Bucket;
    const store = new R2Store(broken);
    await expect(store.get('sessions/a/turn/1')).rejects.toBeInstanceOf(StorageError);
    await expect(store.get('sessions/a/turn/1', { range: { suffix: 5 } })).rejects.toThrow(/sessions\/a\/turn\/1/);
    await expect(store.head('k')).rejects.toMatchObject({ code: 'storage_error' });
    await expect(store.put('k', 'v', { onlyIfAbsent: true })).rejects.toThrow(/rate limited/);
    await expect(store.list('p/')).rejects.toBeInstanceOf(StorageError);
    await expect(store.delete(['a', 'b'])).rejects.toBeInstanceOf(StorageError);
  });
});

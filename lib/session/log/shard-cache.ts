import { backendOf, type ObjectStore } from '../../store/object-store.ts';

/**
 * The repeat-index shards this process wrote or read (lib/session/log/key-shards.ts), their
 * sorted keys by object key, so that the process loading a session never reads back the shards
 * it wrote, and a pack does not read again the shards its turn just read. Exact by construction:
 * a shard's key names one content for good (create-only, a function of the history up to its
 * record; a session deleted and created again gets a new generation, so new keys). A shard
 * deleted since still holds what the views naming it say. Kept for the life of the process (the
 * isolate on Workers), one per store backend as the view cache is, bounded by the characters of
 * the keys kept (12 a key), the least recently used going first.
 */

/** Characters of keys kept per store backend: about 700,000 call keys, a history of about 1.7 million items. */
export const SHARD_CACHE_CHARS = 8 * 1024 * 1024;

export class ShardCache {
  readonly maxChars: number;
  /** Least recently used first (a Map keeps insertion order). */
  readonly #entries = new Map<string, string>();
  #chars = 0;

  constructor(maxChars: number) {
    this.maxChars = maxChars;
  }

  get chars(): number {
    return this.#chars;
  }

  get(key: string): string | undefined {
    const keys = this.#entries.get(key);
    if (keys === undefined) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, keys);
    return keys;
  }

  /** Keeps the sorted, concatenated `keys` of the shard stored under `key`. */
  set(key: string, keys: string): void {
    if (keys.length > this.maxChars || this.#entries.has(key)) return;
    this.#entries.set(key, keys);
    this.#chars += keys.length;
    for (const [oldest, held] of this.#entries) {
      if (this.#chars <= this.maxChars) break;
      this.#entries.delete(oldest);
      this.#chars -= held.length;
    }
  }
}

const caches = new WeakMap<ObjectStore, ShardCache>();

/** The cache of `store`'s backend (one per store under its wrappers, `backendOf`). */
export function shardCacheOf(store: ObjectStore): ShardCache {
  const backend = backendOf(store);
  let cache = caches.get(backend);
  if (!cache) {
    cache = new ShardCache(SHARD_CACHE_CHARS);
    caches.set(backend, cache);
  }
  return cache;
}

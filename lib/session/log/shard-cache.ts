import type { ObjectStore } from '../../store/object-store.ts';
import { BoundedCache, perBackend } from './bounded-cache.ts';

/**
 * The repeat-index shards this process wrote or read (lib/session/log/key-shards.ts), their
 * sorted keys by object key, so that the process loading a session never reads back the shards
 * it wrote, and a pack does not read again the shards its turn just read. Exact by construction:
 * a shard's key names one content for good (create-only, a function of the history up to its
 * record; a session deleted and created again gets a new generation, so new keys). A shard
 * deleted since still holds what the views naming it say. Kept for the life of the process (the
 * isolate on Workers), one per store backend as the view cache is, bounded by the characters of
 * the keys kept (12 a key), the least recently used going first. Also here, under a view's key:
 * the view's repeat index as JSON (key-shards.ts rememberIndex), which an append tells its
 * calls' repeats from (repeat-flags.ts), the view itself being too large to keep; its shards'
 * filters apart, each under its shard's key (the views between two flushes name the same).
 */

/** Characters of keys kept per store backend: about 700,000 call keys, a history of about 1.7 million items. */
export const SHARD_CACHE_CHARS = 8 * 1024 * 1024;

/** Sorted, concatenated shard keys by object key, sized in characters. */
export type ShardCache = BoundedCache<string>;

const cacheOf = perBackend((maxChars) => new BoundedCache<string>(maxChars));

/** The cache of `store`'s backend (one per store under its wrappers, `backendOf`). */
export function shardCacheOf(store: ObjectStore): ShardCache {
  return cacheOf(store, SHARD_CACHE_CHARS)!;
}

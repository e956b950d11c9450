import { CorruptObjectError } from '../../errors.ts';
import { filterKeys, INDEX_KEY_CHARS } from '../key-filter.ts';
import { mapLimit } from '../../store/object-store.ts';
import { keySetKey, keyShardKey, type LogScope } from '../keys.ts';
import { keysAscending, SORTED_KEYS_PATTERN, type ShardPlace } from '../view-records.ts';
import type { LogContext } from './context.ts';
import type { KnownKeys } from './types.ts';
import { RecordMissingError } from './head.ts';
import { shardCacheOf } from './shard-cache.ts';

/** Reading the shards of the repeat index (lib/session/log/key-shards.ts) out of their sets. */

export { INDEX_KEY_CHARS };

/** A shard named by a view is gone: a newer pack replaced it. Readers list again, like for a record. */
export class ShardMissingError extends RecordMissingError {}

/** Characters of a set from `offset` (null: the set is gone). */
export type SetReader = (setKey: string, range: { offset: number; length: number }) => Promise<string | null>;

/** A reader fetching each range it is asked for (a turn reads a few shards of a set). */
export function rangeReader(log: LogContext): SetReader {
  return async (setKey, range) => {
    const object = await log.store.get(setKey, { range });
    return object && shardDecoder.decode(object.body);
  };
}

/**
 * A reader fetching each set whole, once (a flush reads every shard of its base's set). Each
 * range is decoded on its own, by byte as a range get gives it: a string of its own, so that a
 * shard kept in the cache does not keep the whole set's text alive with it.
 */
export function wholeReader(log: LogContext): SetReader {
  const sets = new Map<string, Promise<Uint8Array | null>>();
  return async (setKey, range) => {
    let set = sets.get(setKey);
    if (!set) {
      set = log.store.get(setKey).then((object) => object?.body ?? null);
      sets.set(setKey, set);
    }
    const bytes = await set;
    return bytes === null ? null : shardDecoder.decode(bytes.subarray(range.offset, range.offset + range.length));
  };
}

/**
 * The shard of `prefix` at `place`: a range of its set, checked (its view says what it holds),
 * read with the key before it and the start of what follows, so that counts placing it short
 * of its keys or past them are refused too (the set's keys are sorted, so its shard of a prefix
 * is where the keys before and after it have another prefix; a JSON line follows the last).
 */
export async function readShard(
  log: LogContext,
  scope: LogScope,
  prefix: string,
  place: ShardPlace,
  read: SetReader,
): Promise<string> {
  const key = keyShardKey(scope, place.record, prefix);
  const cache = shardCacheOf(log.store);
  const cached = cache.get(key);
  if (cached !== undefined) return cached;
  const setKey = keySetKey(scope, place.record);
  const before = place.offset > 0 ? INDEX_KEY_CHARS : 0;
  const after = Math.max(1, prefix.length);
  const range = { offset: place.offset - before, length: before + place.length + after };
  const text = await read(setKey, range);
  if (text === null) throw new ShardMissingError(setKey);
  const keys = text.slice(before, before + place.length);
  const next = text.slice(before + place.length);
  const bounded =
    (before === 0 || !text.slice(0, before).startsWith(prefix)) && (next.startsWith('\n') || !next.startsWith(prefix));
  if (
    text.length !== range.length ||
    !bounded ||
    !SORTED_KEYS_PATTERN.test(keys) ||
    !keysAscending(keys) ||
    !within(keys, prefix)
  )
    throw new CorruptObjectError(setKey, `its shard of ${JSON.stringify(prefix)} is not what its view names`);
  cache.set(key, keys, keys.length);
  return keys;
}

/** Not fatal: bytes that are not hex digits decode to characters readShard's pattern refuses, as corrupt. */
const shardDecoder = new TextDecoder();

/** Whether every key of the sorted concatenation `sorted` starts with `prefix` (its first and last do). */
function within(sorted: string, prefix: string): boolean {
  return sorted.startsWith(prefix) && sorted.slice(-INDEX_KEY_CHARS).startsWith(prefix);
}

/** Shards read at a time. */
const PARALLEL_SHARDS = 16;

/** The filter of the shard of `prefix` among `filters` (a prefix is data: not an inherited property). */
export function filterOf(filters: KnownKeys['filters'], prefix: string): string | undefined {
  return filters && Object.hasOwn(filters, prefix) ? filters[prefix] : undefined;
}

/**
 * The shards of `prefixes` at `places` (empty where none is named), from the cache or the store
 * (`read`: a range each, or each set whole). A shard whose filter among `filters` is not sized
 * for its keys: the view naming both is corrupt (a CorruptObjectError).
 */
export async function loadShards(
  log: LogContext,
  scope: LogScope,
  places: Map<string, ShardPlace>,
  prefixes: Iterable<string>,
  filters?: KnownKeys['filters'],
  read: SetReader = rangeReader(log),
): Promise<Map<string, string>> {
  const shards = new Map<string, string>();
  await mapLimit([...prefixes], PARALLEL_SHARDS, async (prefix) => {
    const place = places.get(prefix);
    const keys = place === undefined ? '' : await readShard(log, scope, prefix, place, read);
    const filter = place === undefined ? undefined : filterOf(filters, prefix);
    if (filter !== undefined && filterKeys(filter) !== keys.length / INDEX_KEY_CHARS)
      throw new CorruptObjectError(
        keySetKey(scope, place!.record),
        `holds ${keys.length / INDEX_KEY_CHARS} keys of ${prefix}, the filter its view names is sized for others`,
      );
    shards.set(prefix, keys);
  });
  return shards;
}

/** Every shard at `places`: their set whole, once, when this process keeps few of them; else a range each. */
export function allShards(
  log: LogContext,
  scope: LogScope,
  places: Map<string, ShardPlace>,
  filters?: KnownKeys['filters'],
): Promise<Map<string, string>> {
  const cache = shardCacheOf(log.store);
  const kept = [...places].filter(([prefix, { record }]) => cache.has(keyShardKey(scope, record, prefix)));
  const read = kept.length * 2 < places.size ? wholeReader(log) : rangeReader(log);
  return loadShards(log, scope, places, places.keys(), filters, read);
}

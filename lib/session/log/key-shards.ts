import { keyShardKey, type LogScope } from '../keys.ts';
import { mapLimit } from '../../store/object-store.ts';
import { parseStored } from '../records.ts';
import { keyShardSchema, type KeyIndex, type LogView } from '../view-records.ts';
import type { LogContext } from './context.ts';
import { RecordMissingError } from './head.ts';
import type { KnownKeys } from './types.ts';

/**
 * The repeat index: every distinct call key of the history, in shards by hash prefix, each
 * shard an immutable object a view names by version (records.ts, `keyIndexSchema`). A turn
 * reads only the shards of the calls after its view; only `pack` reads or rewrites them whole.
 */

/** Characters of a call key kept in the index. */
export const INDEX_KEY_CHARS = 12;
/** A shard holds about this many keys at most: the index deepens by one hex character beyond. */
const SHARD_KEYS = 128;
/** Shards read or written at a time. */
const PARALLEL_SHARDS = 16;

/** The index of an empty history. */
export const EMPTY_INDEX: KeyIndex = Object.freeze({ count: 0, depth: 0, versions: {} }) as KeyIndex;

/** A shard named by a view is gone: a newer pack replaced it. Readers list again, like for a record. */
export class ShardMissingError extends RecordMissingError {}

/** The depth an index of `count` keys is split at. */
export function depthFor(count: number): number {
  let depth = 0;
  while (depth < 6 && count > SHARD_KEYS * 16 ** depth) depth += 1;
  return depth;
}

/** The version (view record) of each shard an index names. */
export function shardVersions(index: KeyIndex): Map<string, number> {
  const versions = new Map<string, number>();
  for (const [record, prefixes] of Object.entries(index.versions)) {
    if (index.depth === 0) versions.set('', Number(record));
    for (let at = 0; at + index.depth <= prefixes.length && index.depth > 0; at += index.depth)
      versions.set(prefixes.slice(at, at + index.depth), Number(record));
  }
  return versions;
}

/**
 * Loads the shards of `keys` named by `view` (none without a view: nothing came before).
 * A shard gone since the view was listed is a ShardMissingError.
 */
export async function loadKnownKeys(
  log: LogContext,
  scope: LogScope,
  view: LogView | null,
  keys: readonly string[],
): Promise<KnownKeys | null> {
  if (!view) return null;
  const depth = view.keys.depth;
  const versions = shardVersions(view.keys);
  const prefixes = [...new Set(keys.map((key) => key.slice(0, depth)))];
  const shards = new Map<string, Set<string>>();
  await mapLimit(prefixes, PARALLEL_SHARDS, async (prefix) => {
    const record = versions.get(prefix);
    shards.set(prefix, record === undefined ? new Set() : await readShard(log, scope, record, prefix));
  });
  return { depth, shards };
}

async function readShard(log: LogContext, scope: LogScope, record: number, prefix: string): Promise<Set<string>> {
  const key = keyShardKey(scope, record, prefix);
  const object = await log.store.get(key);
  if (!object) throw new ShardMissingError(key);
  const shard = parseStored(key, object.body, keyShardSchema);
  const keys = new Set<string>();
  for (let at = 0; at < shard.keys.length; at += INDEX_KEY_CHARS) keys.add(shard.keys.slice(at, at + INDEX_KEY_CHARS));
  return keys;
}

/**
 * Whether `key` was seen before the view. With `strict`, a key whose shard was not loaded is
 * a bug (aggregates would be wrong); without, it counts as new (for estimates only).
 */
export function seenBefore(known: KnownKeys | null, key: string, strict: boolean): boolean {
  if (!known) return false;
  const shard = known.shards.get(key.slice(0, known.depth));
  if (!shard) {
    if (strict) throw new Error(`repeat index shard of ${key.slice(0, known.depth)} not loaded`);
    return false;
  }
  return shard.has(key.slice(0, INDEX_KEY_CHARS));
}

/**
 * Writes the shards of the index of view `record` (create-only; one already there holds the
 * same keys, since a shard is a function of the history) and returns the index with the keys
 * of the shards it replaced in the base view's index, to delete once the view is written.
 * `known` holds the base view's shards of every new key's prefix (loaded for the aggregates).
 */
export async function writeKeyShards(
  log: LogContext,
  scope: LogScope,
  base: LogView | null,
  known: KnownKeys | null,
  newKeys: readonly string[],
  record: number,
): Promise<{ index: KeyIndex; replaced: string[] }> {
  const previous = base?.keys ?? EMPTY_INDEX;
  const count = previous.count + newKeys.length;
  const depth = depthFor(count);
  const oldVersions = shardVersions(previous);
  const shortKeys = newKeys.map((key) => key.slice(0, INDEX_KEY_CHARS));
  const shards = new Map<string, Set<string>>();
  const add = (key: string) => {
    const prefix = key.slice(0, depth);
    const shard = shards.get(prefix) ?? new Set<string>();
    shards.set(prefix, shard.add(key));
  };
  const regrouped = !base || depth !== previous.depth;
  if (regrouped) {
    // A new depth: every shard is written again, from all the old ones.
    const old = base
      ? await loadKnownKeys(
          log,
          scope,
          base,
          [...oldVersions.keys()].map((p) => p.padEnd(12, '0')),
        )
      : null;
    for (const shard of old?.shards.values() ?? []) for (const key of shard) add(key);
  } else {
    for (const key of shortKeys) {
      const prefix = key.slice(0, depth);
      if (!shards.has(prefix)) shards.set(prefix, new Set(seenShard(known, prefix)));
    }
  }
  for (const key of shortKeys) add(key);
  await mapLimit([...shards], PARALLEL_SHARDS, async ([prefix, keys]) => {
    const body = { format: 'tailgate.keys.v1', record, prefix, keys: [...keys].sort().join('') };
    await log.store.put(keyShardKey(scope, record, prefix), JSON.stringify(body), {
      onlyIfAbsent: true,
      contentType: 'application/json',
    });
  });
  const versions = new Map(regrouped ? [] : oldVersions);
  for (const prefix of shards.keys()) versions.set(prefix, record);
  const replaced = [...oldVersions]
    .filter(([prefix, version]) => version !== record && (regrouped || shards.has(prefix)))
    .map(([prefix, version]) => keyShardKey(scope, version, prefix));
  return { index: { count, depth, versions: encodeVersions(versions) }, replaced };
}

function seenShard(known: KnownKeys | null, prefix: string): Set<string> {
  const shard = known?.shards.get(prefix);
  if (!shard) throw new Error(`repeat index shard of ${prefix} not loaded`);
  return shard;
}

function encodeVersions(versions: Map<string, number>): KeyIndex['versions'] {
  const byRecord: Record<string, string> = {};
  for (const [prefix, record] of [...versions].sort(([a], [b]) => (a < b ? -1 : 1)))
    byRecord[record] = (byRecord[record] ?? '') + prefix;
  return byRecord;
}

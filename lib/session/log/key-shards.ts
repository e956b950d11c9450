import { FILTER_MAX_KEYS, filterBits, filterBitsFor, filterMayHold, shardFilter } from '../key-filter.ts';
import { keySetKey, keyShardKey, type LogScope } from '../keys.ts';
import { shardPlacesOf, shardVersionsOf, type KeyIndex, type LogView, type ShardPlace } from '../view-records.ts';
import type { LogContext } from './context.ts';
import { allShards, filterOf, INDEX_KEY_CHARS, loadShards } from './shard-read.ts';
import { shardCacheOf, type ShardCache } from './shard-cache.ts';
import { deepFreeze, type DeepReadonly } from '../../deep-readonly.ts';
import type { KnownKeys } from './types.ts';

/**
 * The repeat index: every distinct call key of the history. The first keys, a multiple of the
 * delta bound (`LogContext.indexDeltaKeys`, INDEX_DELTA_KEYS by default), are in shards by
 * hash prefix; the keys after them (fewer than the bound) are in the view itself (`delta`). So
 * a view writes shards only when its keys cross the next multiple of the bound (a flush): every
 * shard, in one immutable object (`keys/<g>/<inv record>-set`, keySetKey: the shards' keys
 * concatenated in prefix order, then a line of JSON saying what they are), which the view names
 * by its record with each shard's count of keys, so a reader fetches one shard as a range of
 * it. What the shards hold is a function of the history up to the view, whichever view came
 * before (view-records.ts, `keyIndexSchema`). The view also carries a Bloom filter of each shard
 * (lib/session/key-filter.ts, computed whenever the shard is written): a turn reads only the
 * shards of the calls after its view that its delta does not hold and its shard's filter does
 * not reject. Keys are kept as sorted concatenations of 12 hex characters each.
 */

export { INDEX_KEY_CHARS, ShardMissingError } from './shard-read.ts';
/** Keys a view holds inline at most: a flush of at least this many keys writes at most 16^MAX_DEPTH shards. */
export const INDEX_DELTA_KEYS = 4096;
/** A shard holds about this many keys while the index is shallower than MAX_DEPTH. */
const SHARD_KEYS = 128;
/** The deepest split: 256 shards, so a flush writes at most 1 shard per 16 keys it adds. */
const MAX_DEPTH = 2;

/** The index of an empty history. */
export const EMPTY_INDEX: KeyIndex = Object.freeze({ count: 0, depth: 0, versions: {}, counts: {} }) as KeyIndex;

/** The depth an index whose shards hold `count` keys is split at. */
export function depthFor(count: number): number {
  let depth = 0;
  while (depth < MAX_DEPTH && count > SHARD_KEYS * 16 ** depth) depth += 1;
  return depth;
}

/** The version (view record) of each shard an index names. */
export function shardVersions(index: KeyIndex): Map<string, number> {
  return shardVersionsOf(index.depth, index.versions);
}

/**
 * Loads the keys of `view`'s index that tell whether each of `keys` was seen before it: its
 * delta, and the shards of the keys the delta does not hold (none without a view: nothing came
 * before). A shard gone since the view was listed is a ShardMissingError.
 */
export async function loadKnownKeys(
  log: LogContext,
  scope: LogScope,
  view: LogView | null,
  keys: readonly string[],
  flags?: Map<string, boolean>,
): Promise<KnownKeys | null> {
  if (!view) return null;
  const known = await knownKeysOf(log, scope, view.keys, keys);
  return flags && flags.size > 0 ? { ...known, flags } : known;
}

/** loadKnownKeys of an index (a view's `keys`). */
export async function knownKeysOf(
  log: LogContext,
  scope: LogScope,
  index: KeyIndex,
  keys: readonly string[],
): Promise<KnownKeys> {
  const { depth, filters } = index;
  const delta = index.delta ?? '';
  const prefixes = new Set<string>();
  for (const key of keys) {
    const short = key.slice(0, INDEX_KEY_CHARS);
    if (!holds(delta, short) && !rejects(filters, key.slice(0, depth), short)) prefixes.add(key.slice(0, depth));
  }
  // Where the shards are matters only for those read (most turns read none: a view's delta or
  // filters answer for every key), so the index's places are worked out only then.
  const places = prefixes.size > 0 ? shardPlacesOf(index) : new Map<string, ShardPlace>();
  const shards = await loadShards(log, scope, places, prefixes, filters);
  return { depth, delta, shards, ...(filters ? { filters } : {}) };
}

/** Whether the filter of the shard of `prefix` among `filters` rejects `key`: then no shard holds it. */
function rejects(filters: KnownKeys['filters'], prefix: string, key: string): boolean {
  const filter = filterOf(filters, prefix);
  return filter !== undefined && !filterMayHold(filter, key);
}

/**
 * Keeps the repeat index of the view stored under `key` (kept with the shards, by the view's key:
 * an append after it tells its calls' repeats from it, lib/session/log/repeat-flags.ts). Each
 * shard's filter is kept apart, by the shard's key: the views between two flushes name the same.
 */
export function rememberIndex(log: LogContext, scope: LogScope, key: string, index: KeyIndex): void {
  const { filters, ...rest } = index;
  const json = JSON.stringify(rest);
  const cache = shardCacheOf(log.store);
  const cacheKey = indexKey(log, key);
  cache.set(cacheKey, json, json.length);
  const kept: Record<string, string> = {};
  for (const [prefix, record] of filters ? shardVersions(index) : []) {
    const filter = filterOf(filters, prefix);
    if (filter === undefined) continue;
    cache.set(filterKey(scope, record, prefix), filter, filter.length);
    kept[prefix] = filter;
  }
  // The appends after the view ask for this index (rememberedIndex): a frozen view's (the view
  // cache keeps it) is the answer already, without its JSON parsed back.
  if (Object.isFrozen(index)) remembered(cache, cacheKey, json, rest, kept);
}

/**
 * rememberIndex on a later turn of the event loop: a turn that read the view goes on to its
 * model call first (at 256 shards, keeping the filters costs about what checking the view
 * does). Only rememberedIndex reads what it keeps, and it keeps what is waiting first. Each
 * read sets its own timer: Workers drop the timers of a request that has ended, and what an
 * ended request's read left waiting is kept by the next read's.
 */
export function rememberIndexSoon(log: LogContext, scope: LogScope, key: string, index: KeyIndex): void {
  const cache = shardCacheOf(log.store);
  let waiting = waitingIndexes.get(cache);
  if (!waiting) {
    waiting = [];
    waitingIndexes.set(cache, waiting);
  }
  waiting.push(() => rememberIndex(log, scope, key, index));
  setTimeout(() => keepWaiting(cache), 0);
}

/** The indexes rememberIndexSoon has yet to keep, by cache, in the order they were read. */
const waitingIndexes = new WeakMap<ShardCache, (() => void)[]>();

function keepWaiting(cache: ShardCache): void {
  const waiting = waitingIndexes.get(cache);
  waitingIndexes.delete(cache);
  for (const keep of waiting ?? []) keep();
}

/**
 * The repeat index of the view under `key`, when this process has it (rememberIndex, or the view
 * cached), as the view policy of `log` keys calls (another policy's index keys them otherwise),
 * with the filters of its shards still kept.
 */
export function rememberedIndex(log: LogContext, scope: LogScope, key: string): KeyIndex | undefined {
  const cache = shardCacheOf(log.store);
  keepWaiting(cache);
  const cacheKey = indexKey(log, key);
  const json = cache.get(cacheKey);
  if (json === undefined) {
    const view = log.viewCache?.get(key);
    return view?.policy === log.viewPolicy.version ? view.keys : undefined;
  }
  const last = lastRemembered.get(cache);
  if (last?.key === cacheKey && last.json === json) return last.index;
  const parsed = JSON.parse(json) as KeyIndex;
  const filters: Record<string, string> = {};
  for (const [prefix, record] of shardVersions(parsed)) {
    const filter = cache.get(filterKey(scope, record, prefix));
    if (filter !== undefined) filters[prefix] = filter;
  }
  return remembered(cache, cacheKey, json, parsed, filters);
}

/**
 * The index rememberedIndex answers last, by cache, with the JSON it was parsed from (or that
 * rememberIndex kept): the appends after one view ask for its index each (every shard's filter
 * looked up, the delta parsed), and get this one while the cache holds the same JSON under the
 * same key (frozen: shared by them). It holds at most one index's filters beyond the cache's bound.
 */
const lastRemembered = new WeakMap<ShardCache, { key: string; json: string; index: DeepReadonly<KeyIndex> }>();

/** `index` (without filters) with `filters`, frozen, kept as the answer for `key` while `json` is cached there. */
function remembered(
  cache: ShardCache,
  key: string,
  json: string,
  index: Omit<KeyIndex, 'filters'>,
  filters: Record<string, string>,
): DeepReadonly<KeyIndex> {
  const answer = deepFreeze(Object.keys(filters).length > 0 ? { ...index, filters } : index);
  lastRemembered.set(cache, { key, json, index: answer });
  return answer;
}

/** The cache key of the filter of a shard (a function of the shard, as its keys are). */
function filterKey(scope: LogScope, record: number, prefix: string): string {
  return `${keyShardKey(scope, record, prefix)} filter`;
}

function indexKey(log: LogContext, key: string): string {
  return `${key} ${log.viewPolicy.version}`;
}

/**
 * Whether `key` was seen before the view (for a key whose first call after the view a record
 * flagged, its flag: lib/session/log/repeat-flags.ts). A key outside the delta whose shard was not
 * loaded is new when its shard's filter rejects it; otherwise, with `strict`, that is a bug
 * (aggregates would be wrong); without, it counts as new (estimates).
 */
export function seenBefore(known: KnownKeys | null, key: string, strict: boolean): boolean {
  if (!known) return false;
  const flag = known.flags?.get(key);
  if (flag !== undefined) return flag;
  const short = key.slice(0, INDEX_KEY_CHARS);
  if (holds(known.delta, short)) return true;
  const shard = known.shards.get(key.slice(0, known.depth));
  if (shard === undefined) {
    // Not loaded, and its filter rejects the key: no shard holds it.
    if (rejects(known.filters, key.slice(0, known.depth), short)) return false;
    if (strict) throw new Error(`repeat index shard of ${key.slice(0, known.depth)} not loaded`);
    return false;
  }
  return holds(shard, short);
}

/**
 * Whether the index of `view` holds `key`, told without a read: from its delta, the shards
 * `known` loaded, its shard's filter (a key it rejects is new), or the shards this process keeps
 * (shard-cache.ts); undefined when only a shard read would tell.
 */
export function indexHolds(
  log: LogContext,
  scope: LogScope,
  view: LogView,
  known: KnownKeys | null,
  key: string,
): boolean | undefined {
  const short = key.slice(0, INDEX_KEY_CHARS);
  if (holds(view.keys.delta ?? '', short)) return true;
  const prefix = key.slice(0, view.keys.depth);
  const loaded = known?.depth === view.keys.depth ? known.shards.get(prefix) : undefined;
  if (loaded !== undefined) return holds(loaded, short);
  const version = shardVersions(view.keys).get(prefix);
  // No shard of the prefix, or its filter rejects the key: no key of it before the delta's.
  if (version === undefined || rejects(view.keys.filters, prefix, short)) return false;
  const cached = shardCacheOf(log.store).get(keyShardKey(scope, version, prefix));
  return cached === undefined ? undefined : holds(cached, short);
}

/** Whether the sorted concatenation of keys `sorted` holds `key` (binary search). */
function holds(sorted: string, key: string): boolean {
  const at = position(sorted, key) * INDEX_KEY_CHARS;
  return sorted.slice(at, at + INDEX_KEY_CHARS) === key;
}

/** The index of the first key of the sorted concatenation `sorted` not below `key` (binary search). */
function position(sorted: string, key: string): number {
  let low = 0;
  let high = sorted.length / INDEX_KEY_CHARS;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (sorted.slice(middle * INDEX_KEY_CHARS, (middle + 1) * INDEX_KEY_CHARS) < key) low = middle + 1;
    else high = middle;
  }
  return low;
}

/**
 * The sorted concatenation `sorted` with `keys` (sorted) put in their places, each once: a
 * copy of the shard's text around them, not a split and sort of all its keys.
 */
function insertSorted(sorted: string, keys: readonly string[]): string {
  const parts: string[] = [];
  let from = 0;
  let last = '';
  for (const key of keys) {
    const at = Math.max(from, position(sorted, key) * INDEX_KEY_CHARS);
    parts.push(sorted.slice(from, at));
    from = at;
    if (key !== last && sorted.slice(at, at + INDEX_KEY_CHARS) !== key) parts.push(key);
    last = key;
  }
  parts.push(sorted.slice(from));
  return parts.join('');
}

function split(sorted: string): string[] {
  const keys: string[] = [];
  for (let at = 0; at < sorted.length; at += INDEX_KEY_CHARS) keys.push(sorted.slice(at, at + INDEX_KEY_CHARS));
  return keys;
}

/**
 * The index of view `record`: its base view's, with `newKeys` (the call keys first seen since
 * the base, in order) added. They go into the delta unless the count crosses a multiple of the
 * bound: then every shard is written again, to hold every key of its prefix up to that multiple,
 * all in one object (create-only; one already there holds the same keys, since its content is a
 * function of the history), the rest staying in the delta, and `replaced` names the base's set,
 * to delete once the view is written. A base shard gone is a ShardMissingError. `tailBytes`:
 * the stored bytes of the view's tail, which its shards' filters may take a share of
 * (key-filter.ts `filterBitsFor`; none given: the fewest bits).
 */
export async function writeKeyShards(
  log: LogContext,
  scope: LogScope,
  base: LogView | null,
  newKeys: readonly string[],
  record: number,
  tailBytes?: () => number,
): Promise<{ index: KeyIndex; replaced: string[] }> {
  const previous = base?.keys ?? EMPTY_INDEX;
  const pending = split(previous.delta ?? '');
  // Two full keys of one batch may share their first 12 characters: the index holds them once.
  const fresh = [...new Set(newKeys.map((key) => key.slice(0, INDEX_KEY_CHARS)))];
  const count = previous.count + fresh.length;
  const bound = log.indexDeltaKeys ?? INDEX_DELTA_KEYS;
  const sharded = Math.floor(count / bound) * bound;
  if (sharded <= previous.count - pending.length) {
    const delta = [...new Set([...pending, ...fresh])].sort().join('');
    const { depth, versions, counts } = previous;
    const filters = await carriedFilters(log, scope, previous, tailBytes);
    return { index: indexOf(count, depth, { versions, counts }, delta, filters), replaced: [] };
  }
  const cut = Math.max(0, sharded - previous.count);
  const added = [...pending, ...fresh.slice(0, cut)];
  const delta = fresh.slice(cut).sort().join('');
  const depth = depthFor(sharded);
  const oldPlaces = shardPlacesOf(previous);
  const old = await allShards(log, scope, oldPlaces);
  const cache = shardCacheOf(log.store);
  // A new depth: the old shards' keys split again; the same depth: each old shard with its new keys put in.
  const regrouped = depth !== previous.depth;
  const grouped = new Map<string, string[]>();
  const add = (key: string) => {
    const prefix = key.slice(0, depth);
    const keys = grouped.get(prefix);
    if (keys) keys.push(key);
    else grouped.set(prefix, [key]);
  };
  if (regrouped) for (const keys of old.values()) for (const key of split(keys)) add(key);
  for (const key of added) add(key);
  const shards = new Map<string, string>(regrouped ? [] : old);
  for (const [prefix, keys] of grouped) {
    keys.sort();
    shards.set(prefix, insertSorted(regrouped ? '' : (old.get(prefix) ?? ''), keys));
  }
  const prefixes = [...shards.keys()].sort();
  const counts = prefixes.map((prefix) => shards.get(prefix)!.length / INDEX_KEY_CHARS).join(',');
  const names = prefixes.join('');
  const about = { format: 'tailgate.keys.v2', record, depth, prefixes: names, counts };
  const body = `${prefixes.map((prefix) => shards.get(prefix)!).join('')}\n${JSON.stringify(about)}\n`;
  await log.store.put(keySetKey(scope, record), body, { onlyIfAbsent: true, contentType: 'text/plain' });
  for (const [prefix, keys] of shards) cache.set(keyShardKey(scope, record, prefix), keys, keys.length);
  const replaced = [...new Set([...oldPlaces.values()].map((place) => place.record))]
    .filter((version) => version !== record)
    .map((version) => keySetKey(scope, version));
  // Filters while the shards hold at most FILTER_MAX_KEYS keys.
  const filtering = sharded <= (log.indexFilterKeys ?? FILTER_MAX_KEYS);
  const bits = filtering ? filterBitsFor(sharded, tailBytes?.() ?? 0) : 0;
  const filters: Record<string, string> = {};
  for (const prefix of filtering ? prefixes : []) filters[prefix] = shardFilter(shards.get(prefix)!, bits);
  const named = prefixes.length > 0 ? { versions: { [record]: names }, counts: { [record]: counts } } : EMPTY_NAMES;
  return { index: indexOf(count, depth, named, delta, filters), replaced };
}

/**
 * The filters a view between flushes carries: its base's, unless they take more than twice the
 * share of its own tail that filterBitsFor allows (a view whose window shrank, as after an
 * import or a compaction): then those of the same shards at the bits its tail allows, the
 * shards read for them (once: the views after it carry these).
 */
async function carriedFilters(
  log: LogContext,
  scope: LogScope,
  index: KeyIndex,
  tailBytes: (() => number) | undefined,
): Promise<KeyIndex['filters']> {
  const first = index.filters ? Object.values(index.filters)[0] : undefined;
  if (first === undefined || tailBytes === undefined) return index.filters;
  const sharded = index.count - (index.delta ?? '').length / INDEX_KEY_CHARS;
  const bytes = tailBytes();
  if ((filterBits(first) ?? 0) <= filterBitsFor(sharded, 2 * bytes)) return index.filters;
  const bits = filterBitsFor(sharded, bytes);
  const shards = await allShards(log, scope, shardPlacesOf(index), index.filters);
  const filters: Record<string, string> = {};
  for (const [prefix, keys] of shards) filters[prefix] = shardFilter(keys, bits);
  return filters;
}

/** The shards of an index without any. */
const EMPTY_NAMES: Pick<KeyIndex, 'versions' | 'counts'> = Object.freeze({ versions: {}, counts: {} });

/** An index, its keys in the schema's order (as a read of it gives them), `delta` and `filters` absent when empty. */
function indexOf(
  count: number,
  depth: number,
  { versions, counts }: Pick<KeyIndex, 'versions' | 'counts'>,
  delta: string,
  filters: KeyIndex['filters'],
): KeyIndex {
  const filtered = filters && Object.keys(filters).length > 0;
  return { count, depth, versions, counts, ...(delta ? { delta } : {}), ...(filtered ? { filters } : {}) };
}

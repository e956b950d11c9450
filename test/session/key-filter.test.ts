import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { ProcessStore } from '../../bench/process-store.ts';
import { CorruptObjectError } from '../../lib/errors.ts';
import type { Item } from '../../lib/items.ts';
import {
  FILTER_BITS_PER_KEY,
  FILTER_MAX_BITS_PER_KEY,
  FILTER_MAX_KEYS,
  FILTER_PATTERN,
  filterBits,
  filterBitsFor,
  filterChars,
  filterKeys,
  filterMayHold,
  isFilterText,
  shardFilter,
} from '../../lib/session/key-filter.ts';
import { viewKey, type LogScope } from '../../lib/session/keys.ts';
import { logContext } from '../../lib/session/log/context.ts';
import { INDEX_KEY_CHARS, rememberedIndex } from '../../lib/session/log/key-shards.ts';
import { shardCacheOf } from '../../lib/session/log/shard-cache.ts';
import { readView } from '../../lib/session/log/view-chunks.ts';
import { doneSchema, parseStored } from '../../lib/session/records.ts';
import type { LogView } from '../../lib/session/view-records.ts';
import { viewPolicy } from '../../lib/turn/view-policy.ts';
import { callKey, computeAggregates } from '../../lib/strategies/aggregates.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import {
  allItems,
  appendCalls,
  call,
  newestView,
  output,
  ShardCountingStore,
  shardsOf,
} from '../support/repeat-index.ts';
import { SessionLog, type SessionLogOptions } from '../support/session-log.ts';

/**
 * The Bloom filters of the repeat index's shards (lib/session/key-filter.ts): no key a shard
 * holds is rejected, whatever the keys, through flushes and regroups, built from a base or from
 * the log; a cold reader reads no shard for a key its filter rejects, and still finds a repeat.
 */

const hex = (length: number) =>
  fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: length, maxLength: length });
const viewsPrefix = (scope: LogScope) => viewKey(scope, 1).replace(/\d{12}\.view$/, '');
const keyOf = (path: string) => callKey('read', JSON.stringify({ path })).slice(0, INDEX_KEY_CHARS);

describe('shardFilter', () => {
  it('accepts every key of its shard, whatever the keys, their common prefix and its bits per key (property)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('', '7', 'c3'),
        fc.uniqueArray(hex(12), { maxLength: 300 }),
        fc.integer({ min: FILTER_BITS_PER_KEY, max: FILTER_MAX_BITS_PER_KEY }),
        (prefix, tails, bits) => {
          const keys = tails.map((tail) => (prefix + tail).slice(0, INDEX_KEY_CHARS));
          const sorted = [...new Set(keys)].sort();
          const filter = shardFilter(sorted.join(''), bits);
          expect(filter).toMatch(/^[A-Za-z0-9+/]*$/);
          expect(filter).toHaveLength(filterChars(sorted.length, bits));
          expect(filterBits(filter)).toBe(bits);
          expect(filterKeys(filter)).toBe(sorted.length);
          for (const key of sorted) expect(filterMayHold(filter, key)).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('accepts about 1% of the keys its shard does not hold at 10 bits a key, about 0.05% at 16', () => {
    const keys = Array.from({ length: 2000 }, (_, index) => keyOf(`in-${index}`));
    const sorted = [...new Set(keys)].sort().join('');
    const held = new Set(keys);
    const others = Array.from({ length: 100_000 }, (_, index) => keyOf(`out-${index}`)).filter((key) => !held.has(key));
    const rate = (filter: string) => others.filter((key) => filterMayHold(filter, key)).length / others.length;
    expect(rate(shardFilter(sorted))).toBeLessThan(0.015);
    expect(rate(shardFilter(sorted, 14))).toBeLessThan(0.003);
    expect(rate(shardFilter(sorted, FILTER_MAX_BITS_PER_KEY))).toBeLessThan(0.001);
    // An empty shard holds nothing; a length no shard gives, or bits per key none has, is told.
    expect(filterMayHold('', keys[0]!)).toBe(false);
    expect(['K', 'KA', 'KAA', 'KAAA', 'KAAAA', 'KAAAAA', 'KAAAAAA'].map(filterKeys)).toEqual([
      0,
      undefined,
      1,
      undefined,
      2,
      3,
      undefined,
    ]);
    expect(['JAA', 'RAAA', 'QAAA', '/AA'].map(filterKeys)).toEqual([undefined, undefined, 1, undefined]);
  });
});

describe('isFilterText', () => {
  it('takes what FILTER_PATTERN takes, and nothing else (property)', () => {
    const filterText = fc.string({ unit: fc.constantFrom(...'AZaz09+/=-_ \u00e9\u0141\ud83d') });
    fc.assert(
      fc.property(fc.oneof(filterText, fc.string({ unit: 'binary' })), (text) => {
        expect(isFilterText(text)).toBe(FILTER_PATTERN.test(text));
      }),
    );
    expect(['', 'Qz+/09', 'Qz=', 'Q\n', '\u00c1'].map(isFilterText)).toEqual([true, true, false, false, false]);
  });
});

describe('filterBitsFor', () => {
  it("takes more bits a key where the view's tail allows, between 10 and 16, and the same bits in all at most", () => {
    // A tail too small for more: the fewest, whatever the keys.
    expect(filterBitsFor(4096, 0)).toBe(FILTER_BITS_PER_KEY);
    expect(filterBitsFor(45_056, 700 * 1024)).toBe(FILTER_BITS_PER_KEY);
    // A large tail: as many as the bits in all allow (those of FILTER_MAX_KEYS at 10), up to 16.
    expect(filterBitsFor(4096, 450 * 1024)).toBe(FILTER_MAX_BITS_PER_KEY);
    expect(filterBitsFor(45_056, 3_300 * 1024)).toBe(14);
    expect(filterBitsFor(FILTER_MAX_KEYS, 100 * 1024 * 1024)).toBe(FILTER_BITS_PER_KEY);
    // Within a sixteenth of the tail's bytes (a character per 6 bits).
    for (const [sharded, tail] of [
      [4096, 150_000],
      [8192, 400_000],
      [40_960, 1_500_000],
    ] as const) {
      const bits = filterBitsFor(sharded, tail);
      expect(bits).toBeGreaterThan(FILTER_BITS_PER_KEY);
      expect((sharded * bits) / 6).toBeLessThanOrEqual(tail / 16);
      expect((sharded * (bits + 1)) / 6 > tail / 16 || bits === FILTER_MAX_BITS_PER_KEY).toBe(true);
    }
  });
});

/** A delta bound of 64: flushes every 64 keys, the index regrouped at 128 and 2,048 keys in shards. */
const options: Partial<SessionLogOptions> = {
  viewEveryRecords: 1,
  packMinRecords: 1,
  keepRecords: 1,
  indexDeltaKeys: 64,
};

/** A record of a call (and its output) per path, then a pack. */
async function appendPacked(log: SessionLog, paths: string[]): Promise<void> {
  await appendCalls(log, paths);
  await log.pack('s');
}

/** The filters of `view`'s index are exactly those of the shards it names, as stored. */
async function expectFiltersOfShards(store: ObjectStore, log: SessionLog, view: LogView): Promise<void> {
  const shards = await shardsOf(store, log, view);
  expect(Object.keys(view.keys.filters ?? {}).sort()).toEqual([...shards.keys()].sort());
  for (const [prefix, keys] of shards) {
    const filter = view.keys.filters![prefix]!;
    expect(filter, `shard ${prefix} of the view of record ${view.record}`).toBe(shardFilter(keys, filterBits(filter)));
    for (let at = 0; at < keys.length; at += INDEX_KEY_CHARS)
      expect(filterMayHold(view.keys.filters![prefix]!, keys.slice(at, at + INDEX_KEY_CHARS))).toBe(true);
  }
}

/** A session of 2,200 distinct calls in records of 100, packed after each: depths 0, 1 and 2. */
async function deepSession(
  logOptions = options,
): Promise<{ store: ShardCountingStore; log: SessionLog; depths: Set<number> }> {
  const store = new ShardCountingStore(new MemoryStore());
  const log = new SessionLog(store, logOptions);
  await log.create({ id: 's' });
  const depths = new Set<number>();
  for (let round = 0; round < 22; round++) {
    // 100 new calls, and a repeat of a call of an earlier round (in a shard).
    const repeat = round > 0 ? [`d-${round >> 1}-7`] : [];
    await appendPacked(log, [...Array.from({ length: 100 }, (_, index) => `d-${round}-${index}`), ...repeat]);
    const view = await newestView(store, log);
    depths.add(view.keys.depth);
    const sharded = view.keys.count - (view.keys.delta ?? '').length / INDEX_KEY_CHARS;
    if (sharded <= (logOptions.indexFilterKeys ?? FILTER_MAX_KEYS)) await expectFiltersOfShards(store, log, view);
    else expect(view.keys.filters).toBeUndefined();
  }
  return { store, log, depths };
}

/** A claimed turn of a process new to the session: its shard gets and aggregates; closed with `modelOutput`. */
async function coldTurn(memory: ObjectStore, input: Item[], modelOutput: Item[] = [], logOptions = options) {
  const store = new ShardCountingStore(new ProcessStore(memory));
  const log = new SessionLog(store, logOptions);
  const begun = await log.beginTurn('s', { input });
  if (begun.kind !== 'claimed') throw new Error('expected a claim');
  const shardGets = store.shardGets;
  await log.completeTurn(begun.turn, { status: 'completed', output: modelOutput, receipt: {} });
  return { shardGets, aggregates: begun.turn.aggregates };
}

/** A path of a new call whose key the filter of its shard in `view` rejects (about 99 in 100 do). */
function rejectedPath(view: LogView, name: string): string {
  for (let index = 0; ; index++) {
    const key = keyOf(`${name}-${index}`);
    const filter = view.keys.filters?.[key.slice(0, view.keys.depth)];
    if (filter !== undefined && !filterMayHold(filter, key)) return `${name}-${index}`;
  }
}

describe('repeat index filters', () => {
  it('are the filters of the shards a view names, through flushes and regroups and from the log alone', async () => {
    const { store, log, depths } = await deepSession();
    expect([...depths].sort()).toEqual([0, 1, 2]);
    const built = await newestView(store, log);
    // The view of the same record built from the log alone (every view deleted): the same index
    // but for the versions of its shards (all written again by that view).
    const scope = await log.scope('s');
    const views = (await store.list(viewsPrefix(scope), { limit: 1000 })).objects.filter((object) =>
      object.key.endsWith('.view'),
    );
    await store.delete(views.map((object) => object.key));
    const rebuilder = new SessionLog(new ProcessStore(store), options);
    expect((await rebuilder.pack('s', { refresh: true })).view).toBeDefined();
    const rebuilt = await newestView(store, rebuilder);
    expect(rebuilt.record).toBe(built.record);
    const { versions: _built, ...index } = built.keys;
    const { versions: _rebuilt, ...again } = rebuilt.keys;
    expect(again).toEqual(index);
    await expectFiltersOfShards(store, rebuilder, rebuilt);
  });

  it('spare a cold turn the shard of a call they reject, and of the model call its completion flags', async () => {
    const { store } = await deepSession();
    const view = await newestView(store, new SessionLog(store, options));
    expect(view.keys.depth).toBe(2);
    // A new call the filter rejects: no shard read, counted new.
    const fresh = rejectedPath(view, 'fresh');
    const before = await allItems(new SessionLog(store, options));
    const input = [call(9001, fresh), output(9001)];
    const cold = await coldTurn(store, input);
    expect(cold.shardGets).toBe(0);
    const numbered = (items: Item[], from: number) => items.map((item, index) => ({ ...item, seq: from + index }));
    expect(cold.aggregates).toEqual(computeAggregates([...before, ...numbered(input, before.length + 1)]));
    // A repeat of a call in a shard (the filter accepts it): its shard is read, the repeat found.
    const repeat = [call(9002, 'd-3-5'), output(9002)];
    const after = await allItems(new SessionLog(store, options));
    const again = await coldTurn(store, repeat);
    expect(again.shardGets).toBe(1);
    expect(again.aggregates).toEqual(computeAggregates([...after, ...numbered(repeat, after.length + 1)]));
    expect(again.aggregates.repeat_flags).not.toEqual(cold.aggregates.repeat_flags);
    // A model's new call: its completion tells it new from the filter, so the next cold turn,
    // with its output, reads no shard.
    const modelCall = rejectedPath(view, 'model');
    await coldTurn(store, [{ type: 'message', role: 'user', content: 'go on' }], [call(9003, modelCall)]);
    const scope = await new SessionLog(store, options).scope('s');
    const listed = await store.list(viewsPrefix(scope), { limit: 1000 });
    const done = listed.objects.find((object) => object.key.endsWith('.done'))!.key;
    expect(parseStored(done, (await store.get(done))!.body, doneSchema).repeats).toBe(`${viewPolicy.version}:0`);
    const last = await coldTurn(store, [output(9003)]);
    expect(last.shardGets).toBe(0);
    const items = await allItems(new SessionLog(store, options));
    expect(last.aggregates).toEqual(computeAggregates(items));
  });

  it('spare an append the shard of a call they reject in a process that read the view but no shard', async () => {
    const { store: memory } = await deepSession();
    const view = await newestView(memory, new SessionLog(memory, options));
    const store = new ShardCountingStore(new ProcessStore(memory));
    const log = new SessionLog(store, options);
    // A turn without calls: this process reads the view (and keeps its index and filters), no shard.
    const begun = await log.beginTurn('s', { input: [{ type: 'message', role: 'user', content: 'hi' }] });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    await log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {} });
    expect(store.shardGets).toBe(0);
    // An append of a new call its filter rejects flags it new from the kept filter, without a read.
    await log.append('s', [call(9300, rejectedPath(view, 'appended')), output(9300)]);
    expect(store.shardGets).toBe(0);
    // Flagged in its record: a turn of another process reads no shard for it either.
    const cold = await coldTurn(memory, [{ type: 'message', role: 'user', content: 'go on' }]);
    expect(cold.shardGets).toBe(0);
    expect(cold.aggregates).toEqual(computeAggregates(await allItems(new SessionLog(memory, options))));
  });

  it('are kept by a process that read the view once the read has gone on, at once when an append asks', async () => {
    const { store: memory } = await deepSession();
    const view = await newestView(memory, new SessionLog(memory, options));
    expect(Object.keys(view.keys.filters ?? {}).length).toBeGreaterThan(0);
    const scope = await new SessionLog(memory, options).scope('s');
    // A process new to the session (its own shard cache), reading the view as a cold turn does.
    const reader = logContext(new ProcessStore(memory), { viewPolicy, viewCacheBytes: 0 });
    const key = viewKey(scope, view.record);
    const read = await readView(reader, scope, key, view.record);
    if (!read || read === 'gone') throw new Error(`${key} unread`);
    // The read returned before the index and its filters were kept: the turn goes on to its model.
    const cache = shardCacheOf(reader.store);
    expect(cache.size).toBe(0);
    // An append that asks for the index gets it with every shard's filter, kept then.
    expect(rememberedIndex(reader, scope, key)).toEqual(view.keys);
    expect(cache.size).toBeGreaterThan(0);
  });

  it('are kept after a read whose later turn never came (its request ended first), by the next read', async () => {
    const { store: memory } = await deepSession();
    const view = await newestView(memory, new SessionLog(memory, options));
    const scope = await new SessionLog(memory, options).scope('s');
    const reader = logContext(new ProcessStore(memory), { viewPolicy, viewCacheBytes: 0 });
    const key = viewKey(scope, view.record);
    const cache = shardCacheOf(reader.store);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      expect(await readView(reader, scope, key, view.record)).toMatchObject({ record: view.record });
      // The runtime drops the timers of a request that has ended (Cloudflare Workers).
      vi.clearAllTimers();
      expect(await readView(reader, scope, key, view.record)).toMatchObject({ record: view.record });
      vi.runAllTimers();
      expect(cache.size).toBeGreaterThan(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it('are left out past the keys in shards the log filters, the shards then read as without them', async () => {
    // Filters up to 1,024 keys in shards: the views of the first 10 rounds carry them.
    const capped = { ...options, indexFilterKeys: 1024 };
    const { store } = await deepSession(capped);
    const view = await newestView(store, new SessionLog(store, capped));
    expect(view.keys.count - (view.keys.delta ?? '').length / INDEX_KEY_CHARS).toBeGreaterThan(1024);
    expect(view.keys.filters).toBeUndefined();
    const before = await allItems(new SessionLog(store, capped));
    const input = [call(9201, 'unfiltered'), output(9201), call(9202, 'd-4-4'), output(9202)];
    const cold = await coldTurn(store, input, [], capped);
    expect(cold.shardGets).toBe(new Set([keyOf('unfiltered'), keyOf('d-4-4')].map((key) => key.slice(0, 2))).size);
    expect(cold.aggregates).toEqual(
      computeAggregates([...before, ...input.map((item, index) => ({ ...item, seq: before.length + 1 + index }))]),
    );
  });

  it('make a view whose filter does not fit its shard, or is not base64, a corrupt object', async () => {
    const { store } = await deepSession();
    const log = new SessionLog(store, options);
    const scope = await log.scope('s');
    const listed = await store.list(viewsPrefix(scope), { limit: 1000 });
    const key = listed.objects.map((object) => object.key).find((name) => name.endsWith('.view'))!;
    const body = (await store.get(key))!.body;
    const rewrite = async (change: (filters: Record<string, string>, prefix: string) => void) => {
      const stored = JSON.parse(new TextDecoder().decode(body)) as { keys: { filters: Record<string, string> } };
      change(stored.keys.filters, keyOf('d-3-5').slice(0, 2));
      await store.put(key, JSON.stringify(stored));
    };
    const turn = () => coldTurn(store, [call(9100, 'd-3-5'), output(9100)]);
    // Every bit set, sized for one key more than its shard holds: the shard read tells.
    await rewrite((filters, prefix) => {
      const filter = filters[prefix]!;
      filters[prefix] = filter[0] + '/'.repeat(filterChars(filterKeys(filter)! + 1, filterBits(filter)) - 1);
    });
    await expect(turn()).rejects.toThrow(CorruptObjectError);
    await rewrite((filters, prefix) => {
      filters[prefix] = `${filters[prefix]!.slice(1)}=`;
    });
    await expect(turn()).rejects.toThrow(CorruptObjectError);
    // As written, the turn goes on.
    await store.put(key, body);
    expect((await turn()).shardGets).toBe(1);
  });
});

describe('filters of more bits a key', () => {
  it("are a flush's where its view's tail allows, and spare a cold turn a key 10 bits would accept", async () => {
    // 300 distinct calls whose outputs are 2 KB each: 256 keys in shards, a view's tail of hundreds of KiB.
    const store = new ShardCountingStore(new MemoryStore());
    const log = new SessionLog(store, options);
    await log.create({ id: 's' });
    let calls = 0;
    for (let round = 0; round < 3; round++) {
      const items = Array.from({ length: 100 }, (_, index) => {
        calls += 1;
        return [call(calls, `big-${round}-${index}`), { ...output(calls), output: 'x'.repeat(2000) }];
      });
      await log.append('s', items.flat());
      await log.pack('s');
    }
    const view = await newestView(store, log);
    expect(view.keys.depth).toBe(1);
    const filters = view.keys.filters!;
    const bits = new Set(Object.values(filters).map(filterBits));
    // One flush wrote every shard: one bits per key, the most a sixteenth of the tail allows.
    expect([...bits]).toEqual([FILTER_MAX_BITS_PER_KEY]);
    // A new call whose key the filter of 10 bits a key accepts (a false positive there) and
    // this view's filter rejects: a cold turn reads no shard for it, and counts it new.
    const shards = await shardsOf(store, log, view);
    const fresh = (index: number) => keyOf(`sparse-${index}`);
    let index = 0;
    for (; ; index++) {
      const key = fresh(index);
      const prefix = key.slice(0, view.keys.depth);
      const shard = shards.get(prefix);
      if (shard === undefined) continue;
      if (filterMayHold(shardFilter(shard), key) && !filterMayHold(filters[prefix]!, key)) break;
    }
    const before = await allItems(log);
    const input = [call(9400, `sparse-${index}`), output(9400)];
    const cold = await coldTurn(store, input);
    expect(cold.shardGets).toBe(0);
    const numbered = input.map((item, at) => ({ ...item, seq: before.length + 1 + at }));
    expect(cold.aggregates).toEqual(computeAggregates([...before, ...numbered]));
  });

  it('are made again at fewer bits by a view whose tail shrank past twice their share, then carried', async () => {
    const store = new ShardCountingStore(new MemoryStore());
    const log = new SessionLog(store, options);
    await log.create({ id: 's' });
    let calls = 0;
    const items = (count: number, bytes: number) =>
      Array.from({ length: count }, () => {
        calls += 1;
        return [call(calls, `shrink-${calls}`), { ...output(calls), output: 'x'.repeat(bytes) }];
      }).flat();
    // 300 calls with outputs of 200 bytes, in the tail of the views: 256 keys in shards, 16 bits a key.
    for (let round = 0; round < 3; round++) {
      await log.append('s', items(100, 200));
      await log.pack('s', { requirement: () => ({ toolCalls: 300, seqs: [] }) });
    }
    const large = await newestView(store, log);
    expect(new Set(Object.values(large.keys.filters!).map(filterBits))).toEqual(new Set([FILTER_MAX_BITS_PER_KEY]));
    // 12 small calls more (no flush: 312 keys), a view of the newest call and its margin alone.
    const small = () => ({ requirement: () => ({ toolCalls: 1, seqs: [] }) });
    await log.append('s', items(12, 10));
    const reads = store.shardGets;
    await log.pack('s', small());
    const shrunk = await newestView(store, log);
    expect(shrunk.keys.versions).toEqual(large.keys.versions);
    expect(new Set(Object.values(shrunk.keys.filters!).map(filterBits))).toEqual(new Set([FILTER_BITS_PER_KEY]));
    await expectFiltersOfShards(store, log, shrunk);
    // The next view carries them, without reading a shard.
    await log.append('s', items(2, 10));
    const before = store.shardGets;
    expect(before).toBeGreaterThan(reads);
    await log.pack('s', small());
    const next = await newestView(store, log);
    expect(next.record).toBeGreaterThan(shrunk.record);
    expect(next.keys.filters).toEqual(shrunk.keys.filters);
    expect(store.shardGets).toBe(before);
    // A cold turn tells the repeats as before.
    const history = await allItems(log);
    const input = [call(9500, 'shrink-7'), output(9500)];
    const cold = await coldTurn(store, input);
    const numbered = input.map((item, at) => ({ ...item, seq: history.length + 1 + at }));
    expect(cold.aggregates).toEqual(computeAggregates([...history, ...numbered]));
  });

  it('are not taken where the tail is small beside the keys in shards: 10 bits a key', async () => {
    // 2,048 keys in shards, a tail of about 200 small items.
    const { store, log } = await deepSession();
    const view = await newestView(store, log);
    expect(new Set(Object.values(view.keys.filters!).map(filterBits))).toEqual(new Set([FILTER_BITS_PER_KEY]));
  });
});

import { describe, expect, it } from 'vitest';
import { ProcessStore } from '../../bench/process-store.ts';
import type { Item, StoredItem } from '../../lib/items.ts';
import { keySetKey } from '../../lib/session/keys.ts';
import { INDEX_KEY_CHARS, shardVersions } from '../../lib/session/log/key-shards.ts';
import { shardPlacesOf, type LogView } from '../../lib/session/view-records.ts';
import { CorruptObjectError } from '../../lib/errors.ts';
import { callKey, computeAggregates } from '../../lib/strategies/aggregates.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { GetOptions, ObjectStore } from '../../lib/store/object-store.ts';
import { SessionLog, type SessionLogOptions } from '../support/session-log.ts';
import { copyObjects } from '../support/copy-store.ts';
import {
  allItems,
  appendCalls,
  call,
  eachPackCrash,
  newestView,
  output,
  ShardCountingStore,
  shardsOf,
} from '../support/repeat-index.ts';

/**
 * The repeat index's delta (lib/session/log/key-shards.ts): a view holds the keys added since
 * its shards, and writes shards only when the keys cross a multiple of the bound; the
 * aggregates stay those of the whole history through flushes, crashes, cold readers and views
 * written before the delta existed.
 */

const keyOf = (path: string) => callKey('read', JSON.stringify({ path })).slice(0, INDEX_KEY_CHARS);

const BOUND = 8;
const options: Partial<SessionLogOptions> = {
  viewEveryRecords: 1,
  packMinRecords: 1,
  keepRecords: 1,
  indexDeltaKeys: BOUND,
};

const append = appendCalls;

/** Every key the shards `view` names hold, read from the store (a ShardMissing there fails the test). */
async function shardKeys(store: ObjectStore, log: SessionLog, view: LogView): Promise<string[]> {
  return [...(await shardsOf(store, log, view)).values()].flatMap((keys) => keys.match(/.{12}/g) ?? []);
}

/**
 * Session `s` with a delta bound of 200 (`extra` on top), its first flush packed: 200 keys of
 * `name-<n>`, split by their first hex character into 16 shards.
 */
async function flushedWide(store: ObjectStore, name: string, extra: Partial<SessionLogOptions> = {}) {
  const wide = { ...options, indexDeltaKeys: 200, ...extra };
  const log = await created(store, wide);
  const paths = Array.from({ length: 200 }, (_, index) => `${name}-${index}`);
  await append(log, paths);
  await log.pack('s');
  return { log, wide, paths };
}

const deltaOf = (view: LogView): string[] => (view.keys.delta ?? '').match(/.{12}/g) ?? [];

/** The aggregates a claimed turn gets, then closes it. */
async function turnAggregates(log: SessionLog, input: Item[]) {
  const begun = await log.beginTurn('s', { input });
  if (begun.kind !== 'claimed') throw new Error('expected a claim');
  await log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {} });
  return begun.turn.aggregates;
}

function aggregatesAfter(items: readonly StoredItem[], input: readonly Item[]) {
  return computeAggregates([...items, ...input.map((item, index) => ({ ...item, seq: items.length + 1 + index }))]);
}

async function created(store: ObjectStore, logOptions = options): Promise<SessionLog> {
  const log = new SessionLog(store, logOptions);
  await log.create({ id: 's' });
  return log;
}

describe('repeat index delta', () => {
  it('holds the keys since its shards in the view, writing shards as they cross a multiple of the bound', async () => {
    const store = new ShardCountingStore(new MemoryStore());
    const log = await created(store);
    const order: string[] = [];
    let viewed = 0;
    for (let round = 0; round < 9; round++) {
      // 3 new calls a record, and a repeat of a key in the delta or in a shard.
      const paths = [0, 1, 2].map((index) => `f-${round}-${index}`);
      const repeat = round > 0 ? [`f-${Math.floor(round / 2)}-1`] : [];
      order.push(...paths.map(keyOf));
      const puts = store.shardPuts;
      await append(log, [...paths, ...repeat]);
      expect((await log.pack('s')).view).toBeDefined();
      const view = await newestView(store, log);
      const sharded = Math.floor(order.length / BOUND) * BOUND;
      expect(view.keys.count).toBe(order.length);
      // The shards hold exactly the first keys up to the multiple; the delta the rest.
      expect((await shardKeys(store, log, view)).sort()).toEqual(order.slice(0, sharded).sort());
      expect(deltaOf(view)).toEqual(order.slice(sharded).sort());
      // (The keys of the turn after the last view are new in this one too.)
      const crossed = Math.floor(viewed / BOUND) < Math.floor(order.length / BOUND);
      // A flush writes every shard in one object.
      expect(store.shardPuts - puts, `round ${round}`).toBe(crossed ? 1 : 0);
      viewed = order.length;
      const items = await allItems(log);
      expect(view.aggregates).toEqual(computeAggregates(items));
      // A turn repeating a delta key (the newest) and a shard key (the first), and a new call.
      const input = [call(1000 + round, `f-${round}-2`), output(1000 + round), call(2000 + round, 'f-0-0')];
      input.push(output(2000 + round), call(3000 + round, `new-${round}`), output(3000 + round));
      order.push(keyOf(`new-${round}`));
      expect(await turnAggregates(log, input)).toEqual(aggregatesAfter(items, input));
    }
  });

  it('writes no shard for a view of fewer new keys than the default bound, and never reads back its own', async () => {
    const store = new ShardCountingStore(new MemoryStore());
    const { indexDeltaKeys: _bound, ...defaults } = options;
    const log = await created(store, defaults);
    for (let round = 0; round < 20; round++) {
      await append(
        log,
        Array.from({ length: 50 }, (_, index) => `g-${round}-${index}`),
      );
      await log.pack('s');
    }
    const view = await newestView(store, log);
    expect(view.keys.count).toBe(1000);
    expect(deltaOf(view)).toHaveLength(1000);
    expect(store.shardPuts).toBe(0);
    expect(store.shardGets).toBe(0);
  });

  it('reads no shard back in the process that wrote it, across flushes', async () => {
    const store = new ShardCountingStore(new MemoryStore());
    const log = await created(store);
    for (let round = 0; round < 12; round++) {
      await append(log, [`h-${round}-a`, `h-${round}-b`, `h-${round}-c`, `h-${round >> 1}-a`]);
      await log.pack('s');
      await turnAggregates(log, [call(5000 + round, `h-0-b`), output(5000 + round), call(6000 + round, 'x')]);
    }
    expect(store.shardPuts).toBeGreaterThan(0);
    expect(store.shardGets).toBe(0);
  });

  it('reads, in a process new to the session, only the shards of the calls its view delta does not hold', async () => {
    const memory = new MemoryStore();
    const log = await created(memory);
    // 10 keys: 8 in shards, 2 in the delta.
    await append(
      log,
      Array.from({ length: 10 }, (_, index) => `k-${index}`),
    );
    await log.pack('s');
    const view = await newestView(memory, log);
    expect(deltaOf(view)).toHaveLength(2);
    const inDelta = ['k-0', 'k-1', 'k-2', 'k-3', 'k-4', 'k-5', 'k-6', 'k-7', 'k-8', 'k-9'].filter((path) =>
      deltaOf(view).includes(keyOf(path)),
    );
    expect(inDelta).toHaveLength(2);
    const items = await allItems(log);
    const cold = new ShardCountingStore(new ProcessStore(memory));
    const repeats = inDelta.flatMap((path, index) => [call(100 + index, path), output(100 + index)]);
    expect(await turnAggregates(new SessionLog(cold, options), repeats)).toEqual(aggregatesAfter(items, repeats));
    expect(cold.shardGets).toBe(0);
    // A repeat of a shard key and a new key: the shards of their prefixes (depth 0: one shard).
    const colder = new ShardCountingStore(new ProcessStore(memory));
    const mixed = [call(200, 'k-0'), output(200), call(201, 'fresh'), output(201)];
    const before = await allItems(log);
    expect(await turnAggregates(new SessionLog(colder, options), mixed)).toEqual(aggregatesAfter(before, mixed));
    expect(colder.shardGets).toBe(view.keys.depth === 0 ? 1 : 2);
  });

  for (const [label, first] of [
    ['its first flush', []],
    ['a flush replacing a set', ['p', 'q', 'r', 's', 't', 'u', 'v', 'w']],
  ] as const)
    it(`keeps aggregates exact when a pack crashes at any storage call of ${label}, before or after it`, async () => {
      const template = new MemoryStore();
      const setUp = await created(template);
      if (first.length > 0) {
        await append(setUp, [...first]);
        await setUp.pack('s');
      }
      await append(setUp, ['a', 'b', 'c', 'd', 'e']);
      await setUp.pack('s');
      // 4 more keys cross the next multiple of 8: the next pack writes a set (reading the one it
      // replaces), then its view.
      await append(setUp, ['a', 'f', 'g', 'h', 'i']);
      await eachPackCrash(
        template,
        (store) => new SessionLog(new ProcessStore(store), options),
        async (store, _log, where) => {
          // Each step in a process new to the session: nothing kept from the crashed one.
          const items = await allItems(new SessionLog(new ProcessStore(store), options));
          const input = [call(900, 'b'), output(900), call(901, 'h'), output(901), call(902, 'j'), output(902)];
          const reader = new SessionLog(new ProcessStore(store), options);
          expect(await turnAggregates(reader, input), where).toEqual(aggregatesAfter(items, input));
          await new SessionLog(new ProcessStore(store), options).pack('s');
          const log = new SessionLog(new ProcessStore(store), options);
          const view = await newestView(store, log);
          const all = await allItems(log);
          expect(view.aggregates, where).toEqual(computeAggregates(all.filter((item) => item.seq <= view.last_seq)));
          expect([...(await shardKeys(store, log, view)), ...deltaOf(view)].sort(), where).toEqual(
            [...new Set([...first, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'].map(keyOf))].sort(),
          );
        },
      );
    });

  it('goes on from views written before the delta (no field) and stays exact', async () => {
    const store = new MemoryStore();
    // Every view writes its shards: views as they were before the delta, without the field.
    const old = await created(store, { ...options, indexDeltaKeys: 1 });
    await append(old, ['o-1', 'o-2', 'o-3', 'o-4', 'o-5']);
    await old.pack('s');
    const before = await newestView(store, old);
    expect(before.keys.delta).toBeUndefined();
    expect(before.keys.count).toBe(5);
    const log = new SessionLog(new ProcessStore(store), options);
    for (let round = 0; round < 4; round++) {
      await append(log, [`n-${round}-a`, `n-${round}-b`, 'o-2']);
      await log.pack('s');
      const view = await newestView(store, log);
      const items = await allItems(log);
      expect(view.aggregates).toEqual(computeAggregates(items));
      expect(view.keys.count).toBe(5 + 2 * (round + 1));
      // The shards hold the 5 keys of the old view until the count crosses 8, then the first 8.
      const sharded = view.keys.count >= 2 * BOUND ? 2 * BOUND : view.keys.count >= BOUND ? BOUND : 5;
      expect(await shardKeys(store, log, view)).toHaveLength(sharded);
      expect(deltaOf(view)).toHaveLength(view.keys.count - sharded);
      const input = [call(700 + round, 'o-4'), output(700 + round), call(800 + round, `n-${round}-a`)];
      input.push(output(800 + round));
      const cold = new SessionLog(new ProcessStore(store), options);
      expect(await turnAggregates(cold, input)).toEqual(aggregatesAfter(items, input));
    }
  });

  it('stores a flush in one object, read a shard at a time, refusing a shard not as its view names it', async () => {
    const memory = new MemoryStore();
    const { log, wide, paths } = await flushedWide(memory, 's');
    const view = await newestView(memory, log);
    const scope = await log.scope('s');
    const places = shardPlacesOf(view.keys);
    expect(view.keys.depth).toBe(1);
    expect(places.size).toBe(16);
    // One object: the shards in prefix order, each where the view says, then a line saying what they are.
    const stored = (await memory.list(keySetKey(scope, 1).replace(/\d{12}-set$/, ''))).objects.map((o) => o.key);
    expect(stored).toEqual([keySetKey(scope, view.record)]);
    const text = new TextDecoder().decode((await memory.get(stored[0]!))!.body);
    const keys = paths.map(keyOf).sort();
    expect(text.slice(0, 200 * INDEX_KEY_CHARS)).toBe(keys.join(''));
    for (const [prefix, place] of places) {
      const shard = keys.filter((key) => key.startsWith(prefix)).join('');
      expect(text.slice(place.offset, place.offset + place.length)).toBe(shard);
    }
    expect(JSON.parse(text.slice(200 * INDEX_KEY_CHARS))).toMatchObject({ format: 'tailgate.keys.v2', depth: 1 });
    // A process new to the session reads the shard of a repeated call's prefix: that range only.
    const ranges: unknown[] = [];
    const reading = (store: ObjectStore): ObjectStore =>
      new Proxy(store, {
        get(target, property) {
          if (property === 'get')
            return (key: string, options?: GetOptions) => {
              if (key.includes('/keys/')) ranges.push(options?.range);
              return target.get(key, options);
            };
          const value = Reflect.get(target, property, target) as unknown;
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    const items = await allItems(log);
    const fresh = [call(300, 's-5'), output(300)];
    const cold = new SessionLog(reading(new ProcessStore(memory)), wide);
    expect(await turnAggregates(cold, fresh)).toEqual(aggregatesAfter(items, fresh));
    const place = places.get(keyOf('s-5').slice(0, 1))!;
    // (With the key before it and the first character after it: the counts are checked too.)
    const before = place.offset > 0 ? INDEX_KEY_CHARS : 0;
    expect(ranges).toEqual([{ offset: place.offset - before, length: before + place.length + 1 }]);
    // The same set with two keys of that shard swapped, or cut short: a corrupt object.
    const [first, second] = [place.offset, place.offset + INDEX_KEY_CHARS];
    const swapped =
      text.slice(0, first) +
      text.slice(second, second + INDEX_KEY_CHARS) +
      text.slice(first, second) +
      text.slice(second + INDEX_KEY_CHARS);
    // A call of another key of that shard (the one of 's-5' is known from the turn's record now).
    const other = paths.find((path) => path !== 's-5' && keyOf(path)[0] === keyOf('s-5')[0])!;
    for (const body of [swapped, text.slice(0, place.offset + place.length - 1)]) {
      await memory.put(stored[0]!, body);
      const again = new SessionLog(new ProcessStore(memory), wide);
      await expect(again.beginTurn('s', { input: [call(301, other), output(301)] })).rejects.toThrow(
        CorruptObjectError,
      );
    }
  });

  it('refuses a view whose counts place a shard short of its keys, with no filter to tell', async () => {
    const memory = new MemoryStore();
    // No filters: only the counts say where each shard ends.
    const { log, wide, paths } = await flushedWide(memory, 's', { indexFilterKeys: 0 });
    const view = await newestView(memory, log);
    expect(view.keys.filters).toBeUndefined();
    const [record, counts] = Object.entries(view.keys.counts)[0]!;
    const shardCounts = counts.split(',').map(Number);
    const at = shardCounts.findIndex((count, index) => count > 1 && index < shardCounts.length - 1);
    // One key less for that shard, one more for the next: the set's length is what the counts sum to.
    const fewer = shardCounts.map((count, index) => (index === at ? count - 1 : index === at + 1 ? count + 1 : count));
    const scope = await log.scope('s');
    const key = (await memory.list(keySetKey(scope, 1).replace(/keys\/.*$/, 'turn/'))).objects.find((object) =>
      object.key.endsWith('.view'),
    )!.key;
    const text = new TextDecoder().decode((await memory.get(key))!.body);
    const quoted = `"counts":{"${record}":"${counts}"}`;
    expect(text).toContain(quoted);
    await memory.put(key, text.replace(quoted, `"counts":{"${record}":"${fewer.join(',')}"}`));
    // A call of the last key of that shard: the range the view names leaves it out.
    const prefix = view.keys.versions[record]!.slice(at, at + 1);
    const last = paths
      .filter((path) => keyOf(path).startsWith(prefix))
      .sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : 1))
      .at(-1)!;
    const cold = new SessionLog(new ProcessStore(memory), wide);
    await expect(cold.beginTurn('s', { input: [call(300, last), output(300)] })).rejects.toThrow(CorruptObjectError);
  });

  it('reads its base set whole, once, when a flush in a process new to the session rewrites every shard', async () => {
    const memory = new MemoryStore();
    // Each flush writes 16 shards, and the second rewrites all of the first's.
    const { log, wide } = await flushedWide(memory, 'w');
    expect(shardPlacesOf((await newestView(memory, log)).keys).size).toBe(16);
    const store = new ProcessStore(memory);
    const cold = new SessionLog(store, wide);
    await append(
      cold,
      Array.from({ length: 200 }, (_, index) => `x-${index}`),
    );
    // The ranges of the keys/ gets (undefined: a whole object).
    const ranges: unknown[] = [];
    const get = store.get.bind(store);
    store.get = (key, getOptions) => {
      if (key.includes('/keys/')) ranges.push(getOptions?.range);
      return get(key, getOptions);
    };
    expect((await cold.pack('s')).view).toBeDefined();
    const view = await newestView(memory, log);
    expect(view.keys.count).toBe(400);
    // A shard or two read for the new calls' repeats (their filters let a few through), then the set whole.
    expect(ranges.filter((range) => range === undefined)).toHaveLength(1);
    expect(ranges.length).toBeLessThan(8);
    expect(view.aggregates).toEqual(computeAggregates(await allItems(log)));
  });

  it('keeps the aggregates exact from depth 0 to 2, in processes new to the session, filters or none', async () => {
    for (const filtering of [{}, { indexFilterKeys: 500 }]) {
      const memory = new MemoryStore();
      // A bound of 100: flushes at depth 0 (100 keys in shards), 1 (from 200) and 2 (from 2,100).
      const deep = { ...options, indexDeltaKeys: 100, ...filtering };
      const first = await created(memory, deep);
      const depths = new Set<number>();
      for (let round = 0; round < 24; round++) {
        const log = round % 3 === 0 ? first : new SessionLog(new ProcessStore(memory), deep);
        const repeat = round > 0 ? [`k-${round - 1}-7`, `k-${Math.floor(round / 2)}-3`] : [];
        await append(log, [...Array.from({ length: 100 }, (_, index) => `k-${round}-${index}`), ...repeat]);
        await log.pack('s');
        const view = await newestView(memory, log);
        depths.add(view.keys.depth);
        const items = await allItems(log);
        expect(view.aggregates, `round ${round}`).toEqual(computeAggregates(items));
        const input = [call(90_000 + round, `k-${Math.floor(round / 3)}-50`), output(90_000 + round)];
        const cold = new SessionLog(new ProcessStore(memory), deep);
        expect(await turnAggregates(cold, input), `round ${round}`).toEqual(aggregatesAfter(items, input));
      }
      expect(depths).toEqual(new Set([0, 1, 2]));
    }
  });

  it("writes a flush's set byte for byte the same whichever view it was built from, or none", async () => {
    // A bound of 40: flushes at depth 0 and 1; the last append crosses a multiple.
    const bounded = { ...options, indexDeltaKeys: 40 };
    for (const sizes of [
      [50, 5, 30],
      [150, 20, 50],
      [10, 10, 10, 10, 100],
    ]) {
      const template = new MemoryStore();
      const log = await created(template, bounded);
      let calls = 0;
      const paths = (count: number) => Array.from({ length: count }, () => `u-${calls++}`);
      for (const size of sizes.slice(0, -1)) {
        await append(log, paths(size));
        await log.pack('s');
      }
      await append(log, paths(sizes.at(-1)!));
      // Its newest views deleted (0, 1, 2, all): each pack builds the set from an older base, or from the log.
      const sets = new Set<string>();
      for (const dropped of [0, 1, 2, 99]) {
        const store = new MemoryStore();
        await copyObjects(template, store);
        const listed = (await store.list('sessions/s/', { limit: 1000 })).objects;
        await store.delete(
          listed
            .filter((object) => object.key.endsWith('.view'))
            .slice(0, dropped)
            .map((o) => o.key),
        );
        await new SessionLog(new ProcessStore(store), bounded).pack('s');
        const newest = (await store.list('sessions/s/', { limit: 1000 })).objects.find((o) => o.key.endsWith('-set'))!;
        sets.add(`${newest.key}\n${new TextDecoder().decode((await store.get(newest.key))!.body)}`);
      }
      expect(sets.size, `${sizes}`).toBe(1);
    }
  });

  it('builds the index again from the log when a flush meets a shard gone for good', async () => {
    const store = new MemoryStore();
    const { log, wide } = await flushedWide(store, 'p');
    await append(
      log,
      Array.from({ length: 199 }, (_, index) => `q-${index}`),
    );
    await log.pack('s');
    const view = await newestView(store, log);
    expect(view.keys.depth).toBe(1);
    expect(deltaOf(view)).toHaveLength(199);
    // The shards the newest view names are gone (no newer view to take): their set.
    const scope = await log.scope('s');
    const sets = new Set([...shardVersions(view.keys).values()]);
    expect(sets.size).toBe(1);
    await store.delete([...sets].map((record) => keySetKey(scope, record)));
    // A process new to the session: one more key crosses 400, and the flush needs them all.
    const writer = new SessionLog(new ProcessStore(store), wide);
    await append(writer, ['last', 'q-3']);
    expect((await writer.pack('s')).view).toBeDefined();
    const rebuilt = await newestView(store, writer);
    expect(rebuilt.aggregates).toEqual(computeAggregates(await allItems(writer)));
    expect(rebuilt.keys.count).toBe(400);
    expect(await shardKeys(store, writer, rebuilt)).toHaveLength(400);
  });
});

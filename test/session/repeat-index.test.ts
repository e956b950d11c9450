import { describe, expect, it } from 'vitest';
import type { Item, StoredItem } from '../../lib/items.ts';
import { viewKey } from '../../lib/session/keys.ts';
import { SessionLog, type SessionLogOptions } from '../support/session-log.ts';
import { allItems, call, eachPackCrash, newestView, output } from '../support/repeat-index.ts';
import { computeAggregates } from '../../lib/strategies/aggregates.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { ProcessStore } from '../../bench/process-store.ts';

/**
 * The repeat index (lib/session/log/key-shards.ts): a turn reads only the shards of the calls
 * after its view, and the aggregates it gets are exactly those of the whole history, whatever
 * the depth of the index, a crash in the middle of a pack, or a shard deleted under a reader.
 */

/** Appends `pairs` (a call and its output each) in records of `perRecord` pairs. */
async function appendPairs(log: SessionLog, paths: string[], from: number, perRecord: number): Promise<void> {
  for (let start = 0; start < paths.length; start += perRecord) {
    const items = paths.slice(start, start + perRecord).flatMap((path, index) => {
      const n = from + start + index;
      return [call(n, path), output(n)];
    });
    await log.append('s', items);
  }
}

/** The aggregates a claimed turn gets, then closes it. */
async function turnAggregates(log: SessionLog, input: Item[]) {
  const begun = await log.beginTurn('s', { input });
  if (begun.kind !== 'claimed') throw new Error('expected a claim');
  await log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {} });
  return begun.turn.aggregates;
}

/** The aggregates of `items` followed by `input` (numbered after them). */
function aggregatesAfter(items: readonly StoredItem[], input: readonly Item[]) {
  return computeAggregates([...items, ...input.map((item, index) => ({ ...item, seq: items.length + 1 + index }))]);
}

/** A session with a view of 3 calls (p, q, r) and a repeat of p after it. */
async function packedSession(): Promise<{ store: MemoryStore; log: SessionLog }> {
  const store = new MemoryStore();
  const log = new SessionLog(store, options);
  await log.create({ id: 's' });
  await appendPairs(log, ['p', 'q', 'r'], 0, 3);
  await log.pack('s');
  await appendPairs(log, ['p'], 3, 1);
  return { store, log };
}

/** Every view writes the shards of its new keys (a delta bound of 1; repeat-index-delta.test.ts has larger ones). */
const options: Partial<SessionLogOptions> = {
  viewEveryRecords: 1,
  packMinRecords: 1,
  keepRecords: 1,
  indexDeltaKeys: 1,
};

describe('repeat index', () => {
  it('tells repeats from new calls across shards and depths, exactly as the whole history does', async () => {
    const store = new MemoryStore();
    const log = new SessionLog(store, options);
    await log.create({ id: 's' });
    const depths = new Set<number>();
    let n = 0;
    let distinct = 0;
    // 2,500 distinct calls: the index deepens from one shard (depth 0) to 16 and then 256.
    for (let round = 0; round < 13; round++) {
      const size = round === 0 ? 100 : 200;
      await appendPairs(
        log,
        Array.from({ length: size }, (_, index) => `file-${round}-${index}`),
        n,
        50,
      );
      n += size;
      distinct += size;
      // Repeats of calls from every earlier round (so of many shards), and within the batch.
      const repeats = Array.from({ length: round + 1 }, (_, index) => `file-${index}-${(round * 7) % 100}`);
      await appendPairs(log, [...repeats, repeats[0]!], n, 50);
      n += repeats.length + 1;
      const packed = await log.pack('s');
      expect(packed.view).toBeDefined();
      const view = await newestView(store, log);
      depths.add(view.keys.depth);
      const items = await allItems(log);
      expect(view.aggregates).toEqual(computeAggregates(items.filter((item) => item.seq <= view.last_seq)));
      expect(view.keys.count).toBe(distinct);
      // A turn after the view: calls repeated from older shards and new ones.
      const input = [call(n, `file-0-${round % 100}`), output(n), call(n + 1, `fresh-${round}`), output(n + 1)];
      n += 2;
      distinct += 1;
      expect(await turnAggregates(log, input)).toEqual(aggregatesAfter(items, input));
    }
    expect([...depths].sort()).toEqual([0, 1, 2]);
  });

  it(
    'keeps aggregates exact when a pack crashes at any of its storage calls, ' + 'before or after the call lands',
    async () => {
      const setUp = async (store: ObjectStore) => {
        const log = new SessionLog(store, options);
        await log.create({ id: 's' });
        await appendPairs(
          log,
          Array.from({ length: 300 }, (_, index) => `a-${index}`),
          0,
          100,
        );
        await log.pack('s');
        await appendPairs(log, ['a-1', 'a-150', 'b-1', 'b-2', 'a-299'], 300, 5);
      };
      // Set up once, copied for each run.
      const template = new MemoryStore();
      await setUp(template);
      await eachPackCrash(
        template,
        (store) => new SessionLog(store, options),
        async (store, log, where) => {
          const items = await allItems(log);
          const input = [call(999, 'a-2'), output(999), call(1000, 'b-2'), output(1000)];
          const expected = aggregatesAfter(items, input);
          // A turn right after the crash, and after a pack that follows it.
          expect(await turnAggregates(log, input.slice(0, 2)), where).toEqual(
            aggregatesAfter(items, input.slice(0, 2)),
          );
          await log.pack('s');
          expect(await turnAggregates(log, input.slice(2))).toEqual(expected);
          const view = await newestView(store, log);
          expect(view.aggregates).toEqual(
            computeAggregates((await allItems(log)).filter((item) => item.seq <= view.last_seq)),
          );
        },
      );
    },
  );

  it('lists again when a shard its view names is deleted under it, and reads the newer view', async () => {
    const memory = new MemoryStore();
    const packer = new SessionLog(memory, options);
    await packer.create({ id: 's' });
    await appendPairs(packer, ['x', 'y', 'z'], 0, 3);
    await packer.pack('s');
    // Appended by a process that never read the view: its record flags no repeats, so the reader reads the shards.
    await appendPairs(new SessionLog(new ProcessStore(memory), options), ['x', 'w'], 3, 2);
    // The reader lists (the view of record 1), then a pack writes the view of record 2 and
    // deletes the shard it replaced before the reader gets it.
    let packed = false;
    const racing: ObjectStore = {
      head: (key) => memory.head(key),
      list: (prefix, listOptions) => memory.list(prefix, listOptions),
      put: (key, body, putOptions) => memory.put(key, body, putOptions),
      delete: (keys) => memory.delete(keys),
      get: async (key, getOptions) => {
        if (!packed && key.includes('/keys/')) {
          packed = true;
          expect((await packer.pack('s')).view).toBeDefined();
        }
        return memory.get(key, getOptions);
      },
    };
    const input = [call(5, 'w'), output(5)];
    const aggregates = await turnAggregates(new SessionLog(racing, options), input);
    expect(packed).toBe(true);
    // The history now ends with the turn's input: x and w are repeats.
    const items = await allItems(packer);
    expect(items).toHaveLength(12);
    expect(aggregates).toEqual(computeAggregates(items));
    expect(aggregates.repeated.size).toBe(2);
  });

  it('reads the log without views when the newest view names a shard that is gone for good', async () => {
    const { store, log } = await packedSession();
    const shards = (await store.list('sessions/s/keys/', {})).objects.map((object) => object.key);
    expect(shards).toHaveLength(1);
    await store.delete(shards);
    const items = await allItems(log);
    const input = [call(9, 'q'), output(9), call(10, 's'), output(10)];
    // A process that has not kept the shard (the writer's cache still holds it, exactly).
    const reader = new SessionLog(new ProcessStore(store), options);
    expect(await turnAggregates(reader, input)).toEqual(aggregatesAfter(items, input));
    // The next view rebuilds the index from the log.
    await reader.pack('s', { refresh: true });
    const view = await newestView(store, log);
    expect(view.keys.count).toBe(4);
    expect(view.aggregates).toEqual(computeAggregates(await allItems(log)));
  });

  it('ignores a view written under another view policy and reads the log instead', async () => {
    const { store, log } = await packedSession();
    const view = await newestView(store, log);
    // Tampered: were this policy's view read, q would count as seen and its repeat as new.
    await store.put(
      viewKey(await log.scope('s'), view.record),
      JSON.stringify({ ...view, policy: 'another', aggregates: { ...view.aggregates, tool_calls: 99 } }),
    );
    const items = await allItems(log);
    const input = [call(9, 'q'), output(9)];
    expect(await turnAggregates(log, input)).toEqual(aggregatesAfter(items, input));
  });

  it('ignores a view of another version and reads the log instead', async () => {
    const { store, log } = await packedSession();
    const view = await newestView(store, log);
    // A view as an older version wrote it: no `v`, the keys inline.
    const { v: _v, keys: _keys, ...older } = view;
    await store.put(
      viewKey(await log.scope('s'), view.record),
      JSON.stringify({ ...older, call_keys: 'ffffffffffff' }),
    );
    const items = await allItems(log);
    const input = [call(9, 'q'), output(9)];
    expect(await turnAggregates(log, input)).toEqual(aggregatesAfter(items, input));
  });
});

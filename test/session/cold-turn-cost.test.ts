import { afterEach, describe, expect, it, vi } from 'vitest';
import { REPEATED_KEY_CHARS } from '../../lib/history.ts';
import type { Item } from '../../lib/items.ts';
import { depthFor } from '../../lib/session/log/key-shards.ts';
import { filterMayHold } from '../../lib/session/key-filter.ts';
import { afterViewBytes, MAX_RECORDS_AFTER_VIEW } from '../../lib/session/log/pack-schedule.ts';
import { appendItems } from '../../lib/turn/append.ts';
import { callKey, computeAggregates, extendAggregates } from '../../lib/strategies/aggregates.ts';
import { allItems } from '../support/repeat-index.ts';
import { viewPolicy } from '../../lib/turn/view-policy.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { ProcessStore } from '../../bench/process-store.ts';
import { listAll, type ObjectStore } from '../../lib/store/object-store.ts';
import type { LogRecord } from '../../lib/session/records.ts';
import type { LogView } from '../../lib/session/view-records.ts';
import { CountingStore } from '../support/counting-store.ts';
import { inbox, SessionLog, type ViewPolicy } from '../support/session-log.ts';

/**
 * The first turn of a process new to a session whose packing lags (a fast load leaves records
 * after the newest view): what it reads beyond the turn of a packed session is bounded by the
 * records after the view, read once each, and by the repeat index's shards of their calls.
 */

const OUTPUT = 'tool output line\n'.repeat(12);

/** Gets by kind of key: records, repeat index shards, the rest. */
class KindCountingStore extends CountingStore {
  recordGets = 0;
  shardGets = 0;
  /** Puts of views and segments, never reset. */
  viewPuts = 0;
  segmentPuts = 0;
  override put(...args: Parameters<CountingStore['put']>): ReturnType<CountingStore['put']> {
    if (args[0].endsWith('.view')) this.viewPuts += 1;
    if (args[0].endsWith('.seg')) this.segmentPuts += 1;
    return super.put(...args);
  }
  override get(...args: Parameters<CountingStore['get']>): ReturnType<CountingStore['get']> {
    if (args[0].includes('/keys/')) this.shardGets += 1;
    else if (/\/turn\/[^/]+\/\d+$/.test(args[0])) this.recordGets += 1;
    return super.get(...args);
  }
  override reset(): void {
    super.reset();
    this.recordGets = 0;
    this.shardGets = 0;
  }
}

/** A delta bound of 64 keys, so that a view of 600 keys names shards (576 keys) and holds a delta (24). */
const options = { indexDeltaKeys: 64 };

/** `pairs` calls with their outputs, the calls' arguments distinct from every other record's. */
function pairs(record: number, count: number): Item[] {
  return Array.from({ length: count }, (_, index): Item[] => {
    const id = `c${record}_${index}`;
    return [
      { type: 'function_call', call_id: id, name: 'read', arguments: JSON.stringify({ record, index }) },
      { type: 'function_call_output', call_id: id, output: OUTPUT },
    ];
  }).flat();
}

/**
 * A session packed up to record `packed`, then `after` more records of `perRecord` pairs each,
 * never packed, appended by the process that packed (it has the view's repeat index: its records
 * flag their calls' repeats) or, `newAppender`, by a process that never read the view (no flags).
 */
async function laggingSession(packed: number, after: number, perRecord: number, newAppender = false) {
  const store = new KindCountingStore(new MemoryStore());
  const loader = new SessionLog(store, options);
  await loader.create({ id: 's' });
  for (let record = 1; record <= packed; record++) await loader.append('s', pairs(record, perRecord));
  await loader.pack('s');
  const appender = newAppender ? new SessionLog(new ProcessStore(store), options) : loader;
  const keys: string[] = [];
  for (let record = packed + 1; record <= packed + after; record++) {
    const items = pairs(record, perRecord);
    await appender.append('s', items);
    for (const item of items) if (item.type === 'function_call') keys.push(callKey(item.name, item.arguments));
  }
  return { store, keysAfterView: keys };
}

/** A first turn in a new process: its gets of records and shards, and its base. */
async function coldTurn(store: KindCountingStore, input: Item[]) {
  store.reset();
  const begun = await new SessionLog(new ProcessStore(store), options).beginTurn('s', { input });
  if (begun.kind !== 'claimed') throw new Error('expected a claim');
  const counts = { recordGets: store.recordGets, shardGets: store.shardGets };
  return { ...counts, turn: begun.turn };
}

describe('a cold first turn after a fast load', () => {
  it('reads each record after the view once, whichever record carries it', async () => {
    // 40 records and more after the view; a record carries the 14 before it (recentRecords), so the
    // newest and two older ones hold them all. Read one by one, they were 26 gets.
    const { store } = await laggingSession(10, 40, 5);
    const { recordGets, turn } = await coldTurn(store, [{ type: 'message', role: 'user', content: 'go on' }]);
    expect(recordGets).toBeLessThanOrEqual(3);
    const since = turn.base.since;
    const view = turn.base.view!;
    expect(view.record).toBeLessThanOrEqual(10);
    expect(since.map((item) => item.seq)).toEqual(since.map((_, index) => view.last_seq + 1 + index));
    expect(since.at(-1)!.seq).toBe(50 * 10);
    expect(turn.aggregates.tool_calls).toBe(50 * 5);
  });

  it('reads a shard per key prefix of unflagged calls after its view and in its input, outside its delta', async () => {
    const { store, keysAfterView } = await laggingSession(60, 3, 10, true);
    // Then 3 repeats of the first record's calls (in the view's shards), unflagged too.
    const repeats = pairs(1, 3).map((item, index) => ({ ...item, call_id: `again_${index >> 1}` }) as Item);
    await new SessionLog(new ProcessStore(store), options).append('s', repeats);
    for (const item of repeats)
      if (item.type === 'function_call') keysAfterView.push(callKey(item.name, item.arguments));
    const input: Item[] = [{ type: 'message', role: 'user', content: 'go on' }];
    const { shardGets, turn } = await coldTurn(store, input);
    const { depth, delta, filters } = turn.base.view!.keys;
    expect(depth).toBe(depthFor(576));
    expect(delta).toHaveLength(24 * 12);
    // The shards' filters reject most new keys (about 1% false positives), never a repeat.
    const accepted = keysAfterView.filter((key) => filterMayHold(filters![key.slice(0, depth)]!, key));
    expect(accepted.length).toBeLessThan(keysAfterView.length / 4);
    const prefixes = new Set(accepted.map((key) => key.slice(0, depth)));
    // The bound docs/STORAGE.md names: at most min(calls after the view and in the input, 16^depth),
    // none for a key the view's delta holds (these are all new) or its shard's filter rejects.
    expect(shardGets).toBe(prefixes.size);
    expect(shardGets).toBeGreaterThan(0);
    expect(shardGets).toBeLessThanOrEqual(Math.min(keysAfterView.length, 16 ** depth));
    // The repeats found (in the shards read), the new calls new: the whole history's aggregates.
    const items = await allItems(new SessionLog(store, options));
    expect(turn.aggregates).toEqual(computeAggregates([...items, { ...input[0]!, seq: items.length + 1 }]));
  });

  it('hashes each call after its view once', async () => {
    const { store, keysAfterView } = await laggingSession(60, 3, 10);
    let hashed = 0;
    const counted = (name: string, args: string) => {
      hashed += 1;
      return callKey(name, args);
    };
    // The service's policy, its call keys counted (the aggregates hash the calls they are not given).
    const policy: ViewPolicy = {
      ...viewPolicy,
      callKey: counted,
      extendAggregates: (previous, items, seen, keys) =>
        extendAggregates(
          previous,
          items,
          seen,
          keys ?? items.flatMap((item) => (item.type === 'function_call' ? [counted(item.name, item.arguments)] : [])),
        ),
    };
    const log = new SessionLog(new ProcessStore(store), { ...options, viewPolicy: policy });
    const begun = await log.beginTurn('s', { input: [{ type: 'message', role: 'user', content: 'go on' }] });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    expect(begun.turn.aggregates.tool_calls).toBe(63 * 10);
    // The shards to read, the flags to write and the aggregates all take the same keys.
    expect(hashed).toBe(keysAfterView.length);
  });

  it('reads no shard for the calls of records that flag their repeats', async () => {
    const { store } = await laggingSession(60, 3, 10);
    const { shardGets, turn } = await coldTurn(store, [{ type: 'message', role: 'user', content: 'go on' }]);
    expect(turn.base.view!.keys.depth).toBe(depthFor(576));
    expect(shardGets).toBe(0);
    expect(turn.aggregates.tool_calls).toBe(63 * 10);
  });
});

describe('cold turns after cold turns', () => {
  /** A turn in a new process whose model answers with a call of `path`, distinct from every other. */
  async function coldModelTurn(store: KindCountingStore, input: Item[], path: string) {
    const { shardGets, turn } = await coldTurn(store, input);
    const call: Item = {
      type: 'function_call',
      call_id: `m_${path}`,
      name: 'read',
      arguments: JSON.stringify({ path }),
    };
    const log = new SessionLog(new ProcessStore(store), options);
    await log.completeTurn(turn, { status: 'completed', output: [call], receipt: {} });
    return {
      shardGets,
      turn,
      answer: [{ type: 'function_call_output', call_id: `m_${path}`, output: OUTPUT }] as Item[],
    };
  }

  it("read shards only for the newest turn's model calls: each claim flags the turns it carries", async () => {
    const { store } = await laggingSession(60, 3, 10);
    let input: Item[] = [{ type: 'message', role: 'user', content: 'go on' }];
    const shardGets: number[] = [];
    for (let turn = 0; turn < 6; turn++) {
      const next = await coldModelTurn(store, input, `m${turn}`);
      shardGets.push(next.shardGets);
      input = next.answer;
    }
    const { shardGets: last, turn } = await coldTurn(store, input);
    // The first meets only flagged appends; each later one at most the model call of the turn
    // before it, which its completion could not flag unless its process held the call's shard (it
    // read it for the call before, of the same prefix): one get at most, not one per turn before.
    expect(shardGets[0]).toBe(0);
    expect([...shardGets, last].every((gets) => gets <= 1)).toBe(true);
    expect(turn.aggregates.tool_calls).toBe(63 * 10 + 6);
  });

  it("flag the model's calls in their completion when their process can tell them without a read", async () => {
    const { store, keysAfterView } = await laggingSession(60, 3, 10);
    // The loading process wrote the shards: it tells a new call of the model from them.
    const loader = new SessionLog(store, options);
    const begun = await loader.beginTurn('s', { input: [{ type: 'message', role: 'user', content: 'go on' }] });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    const fresh: Item = { type: 'function_call', call_id: 'm1', name: 'read', arguments: '{"path":"new"}' };
    await loader.completeTurn(begun.turn, { status: 'completed', output: [fresh], receipt: {} });
    const answer: Item[] = [{ type: 'function_call_output', call_id: 'm1', output: OUTPUT }];
    const afterLoader = await coldTurn(store, answer);
    expect(afterLoader.shardGets).toBe(0);
    // A new process holds no shard of a new call (its model's output: unflagged, one get for the
    // next turn), but tells a repeat of a call after the view from the calls it read.
    const repeated: Item = { type: 'function_call', call_id: 'm2', name: 'read', arguments: '{"index":0,"record":61}' };
    expect(callKey(repeated.name, repeated.arguments)).toBe(keysAfterView[0]);
    const log = new SessionLog(new ProcessStore(store), options);
    await log.completeTurn(afterLoader.turn, { status: 'completed', output: [repeated], receipt: {} });
    const afterRepeat = await coldTurn(store, [{ type: 'function_call_output', call_id: 'm2', output: OUTPUT }]);
    expect(afterRepeat.shardGets).toBe(0);
    expect(afterRepeat.turn.aggregates.tool_calls).toBe(63 * 10 + 2);
    const repeatedKey = keysAfterView[0]!.slice(0, REPEATED_KEY_CHARS);
    expect(afterRepeat.turn.aggregates.repeated.get(repeatedKey)).toBe(afterRepeat.turn.counts.items - 1);
  });
});

describe('appends that outrun their background packs', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /**
   * Appends `records` records through POST /items' code, its background packs never run;
   * `after` runs after each append.
   */
  async function fastLoad(
    records: number,
    logOptions: { recentBytes?: number; viewChunkBytes?: number } = {},
    items: (record: number) => Item[] = (record) => pairs(record, 5),
    after: (store: KindCountingStore) => Promise<void> = async () => undefined,
  ) {
    // Background work starts on a timer (lib/turn/append.ts afterResponse); frozen, it never runs.
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    const store = new KindCountingStore(new MemoryStore());
    const sessions = new SessionLog(store, { ...options, ...logOptions });
    await sessions.create({ id: 's' });
    const services = { env: {}, background: () => undefined, log: () => undefined, inbox, sessions };
    for (let record = 1; record <= records; record++) {
      await appendItems(services, 's', items(record));
      await after(store);
    }
    vi.useRealTimers();
    return store;
  }

  /** Records of 5 calls with outputs of 8,000 characters: about 40 KB each, a view of 20 of them 10 times one. */
  const largeRecord = (record: number) =>
    pairs(record, 5).map((item) =>
      item.type === 'function_call_output' ? { ...item, output: 'x'.repeat(8_000) } : item,
    );

  /**
   * The newest view (its record; its bytes as listed, and with its chunk's) and the bytes of the
   * items the newest record holds (its own and those it carries), which a cold turn reads with
   * the view (read here without a claim).
   */
  async function afterNewestView(store: ObjectStore) {
    const objects = await listAll(store, 'sessions/s/');
    const recordOf = (key: string) => 1e12 - Number(/(\d{12})[^/]*$/.exec(key)![1]);
    const view = objects.filter((object) => object.key.endsWith('.view')).sort((a, b) => (a.key < b.key ? -1 : 1))[0];
    const read = async (key: string) => JSON.parse(new TextDecoder().decode((await store.get(key))!.body));
    const chunk = view && ((await read(view.key)) as LogView).tail?.chunk;
    const chunkBytes = chunk ? objects.find((object) => object.key.endsWith(`-${chunk.id}`))!.size : 0;
    const newest = objects.find((object) => /\/turn\/[^/]+\/\d{12}$/.test(object.key))!;
    const record = (await read(newest.key)) as LogRecord;
    return {
      view: view ? recordOf(view.key) : 0,
      listedBytes: view?.size ?? 0,
      viewBytes: (view?.size ?? 0) + chunkBytes,
      heldBytes: [...(record.recent ?? []), record].reduce((sum, group) => sum + JSON.stringify(group.items).length, 0),
    };
  }

  it('leave at most MAX_RECORDS_AFTER_VIEW records after the newest view, all carried by the newest', async () => {
    const store = await fastLoad(30);
    const { recordGets, turn } = await coldTurn(store, [{ type: 'message', role: 'user', content: 'go on' }]);
    expect(turn.base.view?.record ?? 0).toBeGreaterThanOrEqual(30 - MAX_RECORDS_AFTER_VIEW);
    expect(recordGets).toBe(1);
    expect(turn.aggregates.tool_calls).toBe(30 * 5);
    expect(turn.base.since.at(-1)?.seq).toBe(30 * 10);
  });

  it('write a view before a record would leave records after it uncarried (records larger than a carry)', async () => {
    // A carry of about 2 records of these: the walk would read the records after the view one by one.
    const store = await fastLoad(7, { recentBytes: 4_000 });
    const { recordGets, turn } = await coldTurn(store, [{ type: 'message', role: 'user', content: 'go on' }]);
    expect(turn.base.view).not.toBeNull();
    expect(recordGets).toBe(1);
    expect(turn.aggregates.tool_calls).toBe(7 * 5);
  });

  it('write a view before the records after it hold more than afterViewBytes of it, and then carry none', async () => {
    // At every point of the load a cold turn reads the view and at most its tenth and 64 KiB
    // more (8 records of these, which the count bound alone allows, are 320 KB; the record of
    // an append that packs carries the records its view covers no more).
    let worst = 0;
    const store = await fastLoad(24, {}, largeRecord, async (loaded) => {
      const { viewBytes, heldBytes } = await afterNewestView(loaded);
      if (viewBytes > 0) worst = Math.max(worst, heldBytes / afterViewBytes(viewBytes));
    });
    expect(worst).toBeGreaterThan(0.5);
    expect(worst).toBeLessThanOrEqual(1);
    // The appends waited for their views, not for records going into segments at each of them:
    // a pack takes 8 records at least, as one without a new view (packMinRecords).
    expect(store.viewPuts).toBeGreaterThanOrEqual(5);
    expect(store.segmentPuts).toBeLessThanOrEqual(24 / 8);
    const { turn } = await coldTurn(store, [{ type: 'message', role: 'user', content: 'go on' }]);
    expect(turn.aggregates.tool_calls).toBe(24 * 5);
    expect(turn.base.since.at(-1)?.seq ?? turn.base.view!.last_seq).toBe(24 * 10);
  });

  it("count a view in a chunk by its bytes and its chunk's, not by its head as listed", async () => {
    // A message of 30,000 characters and 60 calls a record: the messages before the window of
    // 256 calls go to a chunk, and the view listed is its head, a small part of it.
    const messageRecord = (record: number): Item[] => [
      { type: 'message', role: 'user', content: `${record} `.repeat(10_000) },
      ...pairs(record, 60),
    ];
    let byHead = 0;
    let byBytes = 0;
    const store = await fastLoad(30, { viewChunkBytes: 200_000 }, messageRecord, async (loaded) => {
      const { listedBytes, viewBytes, heldBytes } = await afterNewestView(loaded);
      if (viewBytes === listedBytes) return;
      byHead = Math.max(byHead, heldBytes / afterViewBytes(listedBytes));
      byBytes = Math.max(byBytes, heldBytes / afterViewBytes(viewBytes));
    });
    // Records after a view pass what its head alone would allow, never what it and its chunk do.
    expect(byHead).toBeGreaterThan(1);
    expect(byBytes).toBeLessThanOrEqual(1);
    const { turn } = await coldTurn(store, [{ type: 'message', role: 'user', content: 'go on' }]);
    expect(turn.aggregates.tool_calls).toBe(30 * 60);
  });
});

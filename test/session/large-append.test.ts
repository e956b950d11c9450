import { afterEach, describe, expect, it, vi } from 'vitest';
import { ProcessStore } from '../../bench/process-store.ts';
import type { Item } from '../../lib/items.ts';
import { afterViewBytes } from '../../lib/session/log/pack-schedule.ts';
import type { LogRecord } from '../../lib/session/records.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { listAll } from '../../lib/store/object-store.ts';
import { appendItems } from '../../lib/turn/append.ts';
import { CountingStore } from '../support/counting-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { inbox, SessionLog, summarized } from '../support/session-log.ts';
import { turnOf } from './rewind-simulation-suite.ts';

// An append whose own items are more than afterViewBytes of the newest view packs with a view of
// its record before it answers; then one more record, of no items, carries the state after it
// (lib/session/log/state-record.ts), so a process new to the session reads the view and that
// small record, not the append's items a second time.

/** `count` calls with outputs of `bytes` characters, the last call left open when `open`. */
function calls(record: number, count: number, bytes: number, open = false): Item[] {
  const items = Array.from({ length: count }, (_, index): Item[] => {
    const call_id = `c${record}_${index}`;
    return [
      { type: 'function_call', call_id, name: 'read', arguments: `{"r":${record},"i":${index}}` },
      { type: 'function_call_output', call_id, output: 'x'.repeat(bytes) },
    ];
  }).flat();
  return open ? items.slice(0, -1) : items;
}
const services = (sessions: SessionLog) => ({
  env: {},
  background: () => undefined,
  log: () => undefined,
  inbox,
  sessions,
});
const upTo = (last: number, first = 1) => Array.from({ length: last - first + 1 }, (_, index) => first + index);
const decode = (body: Uint8Array) => JSON.parse(new TextDecoder().decode(body));

afterEach(() => vi.useRealTimers());

/** The records of `s` (newest first, tombstones left out) and the newest view's key and bytes. */
async function stored(store: MemoryStore) {
  const objects = await listAll(store, 'sessions/s/turn/');
  const records: LogRecord[] = [];
  for (const object of objects.filter((entry) => /\/\d{12}$/.test(entry.key) && entry.size > 0))
    records.push(decode((await store.get(object.key))!.body) as LogRecord);
  const view = objects.find((object) => object.key.endsWith('.view'))!;
  return { records, view: { record: 1e12 - Number(/(\d{12})\.view$/.exec(view.key)![1]), bytes: view.size } };
}

/**
 * A session of 10 records of 5 calls of 2,000 characters, then a turn (its usage in the totals),
 * then one append of 60 calls of 8,000 characters (about 490 KB) ending with an open call,
 * appended as POST /items does, background packs never run.
 */
async function largeAppendSession(memory: MemoryStore, open = true) {
  vi.useFakeTimers({ toFake: ['setTimeout'] });
  const sessions = new SessionLog(new ProcessStore(memory), {});
  await sessions.create({ id: 's' });
  for (let record = 1; record <= 10; record++) await appendItems(services(sessions), 's', calls(record, 5, 2_000));
  await turnOf(sessions, 's', 'hello');
  await appendItems(services(sessions), 's', calls(12, 60, 8_000, open));
  vi.useRealTimers();
  // 100 items, the turn's 2, then 119 (120 with the last call's output).
  return 100 + 2 + (open ? 119 : 120);
}

describe('a large append', () => {
  it('is followed by a record of no items carrying the state after it', async () => {
    const memory = new MemoryStore();
    const items = await largeAppendSession(memory);
    const { records, view } = await stored(memory);
    const [newest, large] = records;
    expect(large!.items).toHaveLength(119);
    expect(view.record).toBe(large!.record);
    expect(JSON.stringify(large!.items).length).toBeGreaterThan(afterViewBytes(view.bytes));
    expect(newest).toMatchObject({ record: large!.record + 1, kind: 'append', items: [], first_seq: items + 1 });
    const { format, counts, context, overflow, open_calls, ledger, undelivered } = large!;
    expect(newest).toMatchObject({ format, counts, open_calls, ledger });
    expect([newest!.context, newest!.overflow, newest!.undelivered]).toEqual([context, overflow, undelivered]);
    expect(open_calls).toEqual(['c12_59']);
    expect(ledger).toBeDefined();
    expect(newest!.lease_expires_at).toBeUndefined();
    expect(newest!.recent).toBeUndefined();
  });

  it('leaves a cold turn reading its view and a record of a few hundred bytes beside it', async () => {
    const memory = new MemoryStore();
    const items = await largeAppendSession(memory);
    const { view } = await stored(memory);
    const counting = new CountingStore(memory);
    const output: Item = { type: 'function_call_output', call_id: 'c12_59', output: 'done' };
    const begun = await new SessionLog(new ProcessStore(counting), {}).beginTurn('s', { input: [output] });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    // The view, then no item after it; every call and the open one answered.
    expect(begun.turn.base.view?.last_seq).toBe(items);
    expect(begun.turn.base.since).toEqual([]);
    expect(begun.turn.aggregates.tool_calls).toBe(50 + 60);
    const { get, list, put, bytesRead } = counting.counts;
    expect({ get, list, put }).toEqual({ get: 3, list: 1, put: 1 });
    expect(bytesRead - view.bytes).toBeLessThan(2_000);
  });

  it("leaves the next append's head read a small record", async () => {
    const memory = new MemoryStore();
    const items = await largeAppendSession(memory);
    const counting = new CountingStore(memory);
    const next = new SessionLog(new ProcessStore(counting), {});
    const output: Item = { type: 'function_call_output', call_id: 'c12_59', output: 'done' };
    await expect(next.append('s', [output])).resolves.toMatchObject({ first_seq: items + 1, last_seq: items + 1 });
    expect(counting.counts.bytesRead).toBeLessThan(4_000);
    const { items: listed } = await next.listItems('s', { limit: 1000 });
    expect(listed.map((item) => item.seq).reverse()).toEqual(upTo(items + 1));
  });

  it('under a compacted context leaves every item of the context to a manual compaction and a cold turn', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    const memory = new MemoryStore();
    const sessions = new SessionLog(memory, {});
    await sessions.create({ id: 's' });
    for (let record = 1; record <= 3; record++) await appendItems(services(sessions), 's', calls(record, 1, 100));
    const context = { summary: 'x', summarized: { first_seq: 1, last_seq: 2 }, interrupted: [], model: 'echo' };
    await sessions.compact('s', async () => summarized({ start_seq: 3, ...context }));
    await sessions.pack('s', { refresh: true });
    await appendItems(services(sessions), 's', calls(5, 60, 8_000));
    await appendItems(services(sessions), 's', calls(6, 1, 100));
    vi.useRealTimers();
    expect((await stored(memory)).records.map((record) => record.items.length).slice(0, 3)).toEqual([2, 0, 120]);
    let seen: number[] = [];
    await new SessionLog(new ProcessStore(memory), {}).compact('s', async (view) => {
      seen = view.items.map((item) => item.seq ?? 0);
      return null;
    });
    expect(seen).toEqual(upTo(128, 3));
    const begun = await new SessionLog(new ProcessStore(memory), {}).beginTurn('s', {
      input: [{ type: 'message', role: 'user', content: 'go' }],
    });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    const from = (begun.turn.base.view?.last_seq ?? 0) + 1;
    expect(begun.turn.base.since.map((item) => item.seq)).toEqual(upTo(128, from));
    expect(begun.turn.aggregates.tool_calls).toBe(3 + 60 + 1);
  });

  it('leaves the turn before it deletable as before: refused, an append came after it', async () => {
    const memory = new MemoryStore();
    await largeAppendSession(memory);
    await expect(new SessionLog(memory, {}).deleteTurn('s', 1)).rejects.toThrow(/an append came after it/);
  });

  it('can be forked after and taken back to by a delete of the turn after it', async () => {
    const memory = new MemoryStore();
    const items = await largeAppendSession(memory, false);
    const sessions = new SessionLog(memory, {});
    const fork = await sessions.fork('s', { at_seq: items, fields: { id: 'f' } });
    expect(fork.counts.items).toBe(items);
    await turnOf(sessions, 'f', 'in the fork');
    const forked = await new SessionLog(memory, {}).listItems('f', { limit: 1000 });
    expect(forked.items.map((item) => item.seq).reverse()).toEqual(upTo(items + 2));
    // A turn right after the large append and its record of no items, deleted: the session goes
    // back to that record, its state the append's.
    await turnOf(sessions, 's', 'after');
    await expect(sessions.deleteTurn('s', 2)).resolves.toMatchObject({ counts: { items, turns: 1 } });
    const { items: listed } = await new SessionLog(memory, {}).listItems('s', { limit: 1000 });
    expect(listed.map((item) => item.seq).reverse()).toEqual(upTo(items));
    await turnOf(sessions, 's', 'again');
    await expect(new SessionLog(memory, {}).get('s')).resolves.toMatchObject({
      counts: { items: items + 2, turns: 2 },
    });
  });

  it('whose record of no items failed to land is logged, and the append stands', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    const memory = new MemoryStore();
    // Every put of record 13 fails: the record of no items after the large append (record 12).
    const faulty = new FaultyStore(memory).failWhen(
      ({ operation, key }) => operation === 'put' && /\/turn\/[^/]+\/\d{12}$/.test(key) && key.endsWith('999999999987'),
    );
    const sessions = new SessionLog(new ProcessStore(faulty), {});
    await sessions.create({ id: 's' });
    for (let record = 1; record <= 10; record++) await appendItems(services(sessions), 's', calls(record, 5, 2_000));
    await turnOf(sessions, 's', 'hello');
    const logged: string[] = [];
    const logging = { ...services(sessions), log: (message: string) => void logged.push(message) };
    await expect(appendItems(logging, 's', calls(12, 60, 8_000))).resolves.toMatchObject({ last_seq: 222 });
    vi.useRealTimers();
    expect(faulty.injected).toBe(1);
    expect(logged).toEqual([expect.stringMatching(/record of no items.*session s\b/)]);
    expect((await stored(memory)).records[0]).toMatchObject({ record: 12, first_seq: 103 });
  });
});

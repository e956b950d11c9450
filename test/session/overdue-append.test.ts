import { afterEach, describe, expect, it, vi } from 'vitest';
import { ProcessStore } from '../../bench/process-store.ts';
import type { Item } from '../../lib/items.ts';
import type { LogRecord } from '../../lib/session/records.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { appendItems, PACK_EVERY_RECORDS } from '../../lib/turn/append.ts';
import { copyObjects } from '../support/copy-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { inbox, SessionLog, summarized } from '../support/session-log.ts';

// An append is overdue once the records after the newest view hold more item bytes than a tenth
// of that view and 64 KiB (lib/session/log/pack-schedule.ts): it packs with a view before it
// answers, and its record carries none of the records that view covers.

/** 5 calls with outputs of 8,000 characters: about 40 KB, 10 items, a record. */
const large = (record: number): Item[] =>
  Array.from({ length: 5 }, (_, index): Item[] => {
    const call_id = `c${record}_${index}`;
    return [
      { type: 'function_call', call_id, name: 'read', arguments: `{"r":${record % 3},"i":${index}}` },
      { type: 'function_call_output', call_id, output: 'x'.repeat(8_000) },
    ];
  }).flat();
/** The same with outputs of 40,000 characters: about 200 KB, more than afterViewBytes of a view of 14 of the above. */
const huge = (record: number): Item[] =>
  large(record).map((item) => (item.type === 'function_call_output' ? { ...item, output: 'x'.repeat(40_000) } : item));
/**
 * An append overdue for the records after the view (`large`), or for its own items (`huge`: a
 * record of no items follows it).
 */
const appends = { large, huge };
const user = (text: string): Item => ({ type: 'message', role: 'user', content: text });
const services = (sessions: SessionLog) => ({
  env: {},
  background: () => undefined,
  log: () => undefined,
  inbox,
  sessions,
});
const upTo = (last: number, first = 1) => Array.from({ length: last - first + 1 }, (_, index) => first + index);

afterEach(() => vi.useRealTimers());

/** A new process lists every item, and a turn of another claims a base of every item after its view. */
async function expectExact(stored: MemoryStore, items: number, calls: number): Promise<void> {
  const { items: listed } = await new SessionLog(new ProcessStore(stored), {}).listItems('s', { limit: 10_000 });
  expect(listed.map((item) => item.seq).reverse()).toEqual(upTo(items));
  const copy = new MemoryStore();
  await copyObjects(stored, copy);
  const begun = await new SessionLog(copy, {}).beginTurn('s', { input: [user('go')] });
  if (begun.kind !== 'claimed') throw new Error('expected a claim');
  const from = (begun.turn.base.view?.last_seq ?? 0) + 1;
  expect(begun.turn.base.since.map((item) => item.seq)).toEqual(upTo(items, from));
  expect(begun.turn.aggregates.tool_calls).toBe(calls);
}

/** A session of 3 messages compacted from seq 1, with a view of its newest record. */
async function compactedSession(sessions: SessionLog): Promise<void> {
  await sessions.create({ id: 's' });
  for (let record = 1; record <= 3; record++) await appendItems(services(sessions), 's', [user(`r${record}`)]);
  const context = { summary: 'x', summarized: { first_seq: 1, last_seq: 1 }, interrupted: [], model: 'echo' };
  await sessions.compact('s', async () => summarized({ start_seq: 1, ...context }));
  await sessions.pack('s', { refresh: true });
  // 40 KB, then 80 KB after the view: the second append is overdue.
  await appendItems(services(sessions), 's', large(5));
  await appendItems(services(sessions), 's', large(6));
}

describe('an overdue append in a session with a compacted context', () => {
  it('carries whole records up to its own or none, and every item stays listed', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    const store = new MemoryStore();
    await compactedSession(new SessionLog(store, {}));
    const { items } = await new SessionLog(store, {}).listItems('s', { limit: 1000 });
    expect(items.map((item) => item.seq).reverse()).toEqual(upTo(23));
    const { objects } = await store.list('sessions/s/turn/');
    const newest = objects.find((object) => /\/\d{12}$/.test(object.key) && object.size > 0);
    const body = newest && (await store.get(newest.key))?.body;
    if (!body) throw new Error('no record');
    const record = JSON.parse(new TextDecoder().decode(body)) as LogRecord;
    const carried = (record.recent ?? []).map((group) => group.record);
    if (carried.length > 0) expect(carried).toEqual(upTo(record.record - 1, carried[0]));
  });

  it('hands a manual compaction every item of its context', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    const sessions = new SessionLog(new MemoryStore(), {});
    await compactedSession(sessions);
    let seen: number[] = [];
    await sessions.compact('s', async (view) => {
      seen = view.items.map((item) => item.seq ?? 0);
      return null;
    });
    expect(seen).toEqual(upTo(23));
  });
});

describe.each(['large', 'huge'] as const)('an overdue append (%s) failing at each storage call', (size) => {
  it.each(['crash', 'once', 'lost'] as const)('leaves a log every reader reads exactly (%s)', async (mode) => {
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    let calls = 0;
    let newest: LogRecord | undefined;
    for (let failAt = 1; ; failAt++) {
      const stored = new MemoryStore();
      const process = new ProcessStore(stored);
      const faulty = new FaultyStore(process);
      const sessions = new SessionLog(faulty, {});
      await sessions.create({ id: 's' });
      for (let record = 1; record <= 14; record++) await appendItems(services(sessions), 's', large(record));
      let seen = 0;
      if (mode === 'crash') faulty.failWhen(() => ++seen >= failAt);
      else faulty.failWhen(() => ++seen === failAt, { times: 1, after: mode === 'lost' });
      const landed = await appendItems(services(sessions), 's', appends[size](15)).then(
        () => true,
        () => false,
      );
      if (mode === 'crash') process.end();
      if (seen < failAt) {
        calls = failAt - 1;
        newest = await newestRecord(stored);
        break;
      }
      const records = (await new SessionLog(new ProcessStore(stored), {}).get('s')).counts.items / 10;
      if (landed) expect(records).toBe(15);
      await expectExact(stored, records * 10, records * 5);
      // Two more appends in a new process, the second overdue again, then a new process reads.
      const next = new SessionLog(new ProcessStore(stored), {});
      await appendItems(services(next), 's', large(records + 1));
      await appendItems(services(next), 's', large(records + 2));
      await expectExact(stored, (records + 2) * 10, (records + 2) * 5);
    }
    expect(calls).toBeGreaterThan(5);
    // Without a failure, a huge append is followed by its record of no items.
    expect(newest).toMatchObject(size === 'huge' ? { record: 16, items: [] } : { record: 15 });
  });
});

/** The newest record of `s` stored. */
async function newestRecord(store: MemoryStore): Promise<LogRecord> {
  const { objects } = await store.list('sessions/s/turn/');
  const newest = objects.find((object) => /\/\d{12}$/.test(object.key) && object.size > 0)!;
  return JSON.parse(new TextDecoder().decode((await store.get(newest.key))!.body)) as LogRecord;
}

/** Holds call number `at` (of every operation) until released. */
class GatedStore extends ProcessStore {
  calls = 0;
  at = Number.POSITIVE_INFINITY;
  #release: () => void = () => undefined;
  readonly #gate = new Promise<void>((resolve) => (this.#release = resolve));
  #reached: () => void = () => undefined;
  readonly hit = new Promise<void>((resolve) => (this.#reached = resolve));
  release(): void {
    this.#release();
  }
  async #wait(): Promise<void> {
    if (++this.calls !== this.at) return;
    this.#reached();
    await this.#gate;
  }
  override async get(...args: Parameters<ObjectStore['get']>) {
    await this.#wait();
    return super.get(...args);
  }
  override async head(...args: Parameters<ObjectStore['head']>) {
    await this.#wait();
    return super.head(...args);
  }
  override async put(...args: Parameters<ObjectStore['put']>) {
    await this.#wait();
    return super.put(...args);
  }
  override async list(...args: Parameters<ObjectStore['list']>) {
    await this.#wait();
    return super.list(...args);
  }
  override async delete(...args: Parameters<ObjectStore['delete']>) {
    await this.#wait();
    return super.delete(...args);
  }
}

describe.each(['large', 'huge'] as const)('an overdue append (%s) racing another process', (size) => {
  it.each(['append', 'turn'] as const)(
    'at each of its storage calls: %s',
    async (other) => {
      let at = 1;
      for (; at < 60; at++) {
        const stored = new MemoryStore();
        const gated = new GatedStore(stored);
        const sessions = new SessionLog(gated, {});
        await sessions.create({ id: 's' });
        for (let record = 1; record <= 14; record++) await appendItems(services(sessions), 's', large(record));
        gated.calls = 0;
        gated.at = at;
        const appended = appendItems(services(sessions), 's', appends[size](15));
        if (await Promise.race([gated.hit.then(() => false), appended.then(() => true)])) break;
        const rival = new SessionLog(new ProcessStore(stored), {});
        let items = 140;
        let calls = 70;
        if (other === 'append') {
          await appendItems(services(rival), 's', large(16));
          items += 10;
          calls += 5;
        } else {
          const begun = await rival.beginTurn('s', { input: [user('hi')] });
          if (begun.kind === 'claimed') {
            const output: Item[] = [{ type: 'message', role: 'assistant', content: 'ok' }];
            await rival.completeTurn(begun.turn, { status: 'completed', receipt: {}, output });
            items += 2;
          }
        }
        gated.release();
        await appended.catch(() => undefined);
        if ((await new SessionLog(new ProcessStore(stored), {}).get('s')).counts.items === items + 10) {
          items += 10;
          calls += 5;
        }
        await expectExact(stored, items, calls);
        await appendItems(services(new SessionLog(new ProcessStore(stored), {})), 's', large(17));
        await expectExact(stored, items + 10, calls + 5);
      }
      expect(at).toBeGreaterThan(6);
    },
    120_000,
  );
});

/** The views of `s` listed, newest first. */
async function viewKeys(store: ObjectStore): Promise<string[]> {
  const { objects } = await store.list('sessions/s/turn/');
  return objects.map((object) => object.key).filter((key) => key.endsWith('.view'));
}

/** The segments of `s` listed. */
async function segmentKeys(store: ObjectStore): Promise<string[]> {
  const { objects } = await store.list('sessions/s/turn/');
  return objects.map((object) => object.key).filter((key) => key.endsWith('.seg'));
}

describe('an overdue append within the debt bound', () => {
  it('answers once its view is stored and the stale view deleted: the records wait for the next pack', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    const stored = new MemoryStore();
    const sessions = new SessionLog(new ProcessStore(stored), {});
    const background: Promise<unknown>[] = [];
    const deferred = { ...services(sessions), background: (task: Promise<unknown>) => void background.push(task) };
    await sessions.create({ id: 's' });
    // Overdue appends write views until there are two; background packs never run meanwhile.
    let record = 0;
    while ((await viewKeys(stored)).length < 2) await appendItems(deferred, 's', large(++record));
    background.length = 0;
    // Large appends until one writes a view: the oldest of three goes before it answers.
    const [newest] = await viewKeys(stored);
    while ((await viewKeys(stored))[0] === newest) await appendItems(deferred, 's', large(++record));
    expect(await viewKeys(stored)).toHaveLength(2);
    expect(await segmentKeys(stored)).toEqual([]);
    // A process ending here (the background's pack never run) leaves a log read exactly, and
    // appended to by another.
    await expectExact(stored, record * 10, record * 5);
    const copy = new MemoryStore();
    await copyObjects(stored, copy);
    await appendItems(services(new SessionLog(new ProcessStore(copy), {})), 's', large(record + 1));
    await expectExact(copy, (record + 1) * 10, (record + 1) * 5);
    // The next pack in this process packs the records (the next append's, every 4 records).
    do await appendItems(deferred, 's', large(++record));
    while (record % PACK_EVERY_RECORDS !== 0);
    vi.runAllTimers();
    await Promise.all(background);
    expect(await viewKeys(stored)).toHaveLength(2);
    expect(await segmentKeys(stored)).not.toEqual([]);
    await expectExact(stored, record * 10, record * 5);
  });
});

/** A process whose store lists at most 4 keys a page (a store may list fewer than asked). */
class SmallPages extends ProcessStore {
  override list(...[prefix, options]: Parameters<ObjectStore['list']>) {
    return super.list(prefix, { ...options, limit: Math.min(options?.limit ?? 4, 4) });
  }
}

describe('a view an overdue append made stale in a process that ended before its next pack', () => {
  it('is deleted before the append answers, wherever the listing finds it', async () => {
    const stored = new MemoryStore();
    /** A process whose background packs run, each awaited after its append. */
    const running = (sessions: SessionLog) => {
      const background: Promise<unknown>[] = [];
      return async (items: Item[]) => {
        await appendItems({ ...services(sessions), background: (task) => void background.push(task) }, 's', items);
        await Promise.all(background.splice(0));
      };
    };
    const first = running(new SessionLog(new SmallPages(stored), {}));
    await new SessionLog(stored, {}).create({ id: 's' });
    // Until a pack that wrote a view has packed the records of the view before it.
    const numbered = (key: string) => 999_999_999_999 - Number(key.split('/').at(-1)!.slice(0, 12));
    const olderViewPacked = async () => {
      const [view] = (await viewKeys(stored)).slice(1);
      const [segment] = await segmentKeys(stored);
      return view !== undefined && segment !== undefined && numbered(view) <= numbered(segment);
    };
    let record = 0;
    while (!(await olderViewPacked())) await first(large(++record));
    // Processes that each append once and end before a background pack runs: one writes a view.
    const [newest] = await viewKeys(stored);
    for (let ended = 0; (await viewKeys(stored))[0] === newest && ended < 8; ended++)
      await appendItems(services(new SessionLog(new SmallPages(stored), {})), 's', large(++record));
    expect((await viewKeys(stored))[0]).not.toBe(newest);
    // Another process's packs, and what it appends, leave two views, not one more for good.
    const last = running(new SessionLog(new SmallPages(stored), {}));
    for (let more = 0; more < 12; more++) await last(large(++record));
    expect(await viewKeys(stored)).toHaveLength(2);
    await expectExact(stored, record * 10, record * 5);
  });
});

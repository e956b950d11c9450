import { afterEach, describe, expect, it, vi } from 'vitest';
import { NotFoundError } from '../../lib/errors.ts';
import type { Item } from '../../lib/items.ts';
import {
  FIRST_BACKOFF_MS,
  MAX_BACKOFF_MS,
  MAX_PACK_DEBT_RECORDS,
  PackSchedule,
} from '../../lib/session/log/pack-schedule.ts';
import type { PackResult } from '../../lib/session/log/types.ts';
import type { LogRecord } from '../../lib/session/records.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appendItems } from '../../lib/turn/append.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { inbox, SessionLog } from '../support/session-log.ts';

const items = (record: number): Item[] =>
  Array.from({ length: 5 }, (_, index) => ({ type: 'message', role: 'user', content: `r${record} i${index}` }));

/** Records (with items) no segment covers yet: what packing still owes. */
async function debtIn(store: ObjectStore): Promise<number> {
  const { objects } = await store.list('sessions/s/turn/');
  return objects.filter((object) => /\/\d{12}$/.test(object.key) && object.size > 0).length;
}

function appender(store: ObjectStore) {
  const log = new SessionLog(store, {});
  const lines: { message: string; details: unknown }[] = [];
  const services = {
    env: {},
    background: () => undefined,
    log: (message: string, details?: unknown) => lines.push({ message, details }),
    inbox,
    sessions: log,
  };
  return { log, lines, append: (record: number) => appendItems(services, 's', items(record)) };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('pack debt', () => {
  it('stays bounded when background packs never get to run: an append over the bound packs first', async () => {
    // Background work starts on a timer (lib/turn/append.ts afterResponse); frozen, it never runs.
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    const store = new MemoryStore();
    const { log, append } = appender(store);
    await log.create({ id: 's' });
    let worst = 0;
    for (let record = 1; record <= 120; record++) {
      await append(record);
      worst = Math.max(worst, await debtIn(store));
    }
    expect(worst).toBeLessThanOrEqual(MAX_PACK_DEBT_RECORDS);
    expect((await log.listItems('s', { limit: 1000 })).items).toHaveLength(600);
  });

  it('answers an append whose pack fails, with its items stored, and logs the failure', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    const store = new FaultyStore(new MemoryStore());
    const { log, lines, append } = appender(store);
    await log.create({ id: 's' });
    store.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.seg'));
    for (let record = 1; record <= MAX_PACK_DEBT_RECORDS + 1; record++) await append(record);
    // The first failure; on a slow machine the backoff may end before the last append, and a second is logged.
    expect(lines[0]).toEqual({
      message: 'tailgate: packing failed; next attempt after a backoff',
      details: expect.objectContaining({ session_id: 's', failures: 1, backoff_ms: FIRST_BACKOFF_MS }),
    });
    expect((await log.listItems('s', { limit: 1000 })).items).toHaveLength(5 * (MAX_PACK_DEBT_RECORDS + 1));
  });
});

describe('an append that packs with a view', () => {
  /** Appends of 5 calls with outputs of 8,000 characters: a few of them pass afterViewBytes of a view. */
  const large = (record: number): Item[] =>
    Array.from({ length: 5 }, (_, index): Item[] => [
      {
        type: 'function_call',
        call_id: `c${record}_${index}`,
        name: 'read',
        arguments: `{"r":${record},"i":${index}}`,
      },
      { type: 'function_call_output', call_id: `c${record}_${index}`, output: 'x'.repeat(8_000) },
    ]).flat();

  it('reads the config once for its pack, and neither the head nor the config again', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    const calls: { operation: string; key: string }[] = [];
    const store = new FaultyStore(new MemoryStore()).failWhen((call) => {
      calls.push(call);
      return false;
    });
    const log = new SessionLog(store, {});
    const services = { env: {}, background: () => undefined, log: () => undefined, inbox, sessions: log };
    await log.create({ id: 's' });
    let packed = 0;
    for (let record = 1; record <= 12; record++) {
      calls.length = 0;
      await appendItems(services, 's', large(record));
      const configGets = calls.filter((call) => call.operation === 'get' && call.key === 'sessions/s/session.json');
      const headListings = calls.filter((call) => call.operation === 'list' && call.key === 'sessions/s/turn/');
      if (!calls.some((call) => call.operation === 'put' && call.key.endsWith('.view'))) {
        // The commit's own head: its config and one listing.
        expect([configGets.length, headListings.length]).toEqual([1, 1]);
        continue;
      }
      packed += 1;
      // The commit's head, then the pack's config: no second head (a listing of the session's
      // incarnations and a get of its config), nor a third get of the config inside the pack.
      expect([configGets.length, headListings.length]).toEqual([2, 1]);
    }
    expect(packed).toBeGreaterThanOrEqual(2);
    // A config handed to a pack is the session's own: another's would pack that one's log.
    await log.create({ id: 't' });
    await expect(log.pack('s', { config: await log.config('t'), refresh: true })).rejects.toThrow(/config of t/);
  });

  it("packs a session deleted and created again meanwhile from that one's own records", async () => {
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    const user = (text: string): Item => ({ type: 'message', role: 'user', content: text });
    const log = new SessionLog(new MemoryStore(), {});
    await log.create({ id: 's' });
    let raced = false;
    const sessions = Object.assign(Object.create(log) as SessionLog, {
      // The pack of the old incarnation's overdue append starts late (behind another pack of s,
      // say): meanwhile s is deleted, created again, and appended to, its newest append overdue too.
      config: async (id: string) => {
        if (!raced) {
          raced = true;
          await log.delete('s');
          await log.create({ id: 's' });
          for (let n = 1; n <= 9; n++) await log.append('s', [user(`new ${n}`)], { packsOverdue: true });
        }
        return log.config(id);
      },
    });
    const services = { env: {}, background: () => undefined, log: () => undefined, inbox, sessions };
    // The 9th append has no view to go on from: its record carries none of the 8 before it, and
    // its pack was handed their items.
    for (let n = 1; n <= 9; n++) await appendItems(services, 's', [user(`old ${n}`)]);
    expect(raced).toBe(true);
    const turn = await log.beginTurn('s', { input: [user('go')] });
    if (turn.kind !== 'claimed') throw new Error('expected a claim');
    const { view, since } = turn.turn.base;
    const seen = [...(view?.tail?.items ?? []), ...since].map((item) => (item.type === 'message' ? item.content : ''));
    expect(seen).toEqual(Array.from({ length: 9 }, (_, index) => `new ${index + 1}`));
  });

  it('carries the records after the view while its packs back off after a failure', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    const store = new FaultyStore(new MemoryStore());
    const log = new SessionLog(store, {});
    const services = { env: {}, background: () => undefined, log: () => undefined, inbox, sessions: log };
    await log.create({ id: 's' });
    for (let record = 1; record <= 6; record++) await appendItems(services, 's', large(record));
    // From here every view put fails: the first overdue append's pack fails, and the packs back off.
    store.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.view'));
    for (let record = 7; record <= 14; record++) await appendItems(services, 's', large(record));
    expect(log.packSchedule.backingOff('s')).toBe(true);
    const { objects } = await store.list('sessions/s/turn/');
    const newest = objects.find((object) => /\/\d{12}$/.test(object.key) && object.size > 0)!;
    const record = JSON.parse(new TextDecoder().decode((await store.get(newest.key))!.body)) as LogRecord;
    // The newest record carries the records since the one whose pack failed (that one carries
    // none of those before it, which its view was to cover), not none of them.
    const carried = (record.recent ?? []).map((group) => group.record);
    expect(carried.at(-1)).toBe(record.record - 1);
    expect(carried.length).toBeGreaterThanOrEqual(4);
  });
});

describe('PackSchedule', () => {
  const done: PackResult = { packed: true, deleted: 0, through: 10, generation: 'g1' };

  it('backs off exponentially after failures, up to a ceiling, and starts again after a success', async () => {
    let now = 0;
    const schedule = new PackSchedule(() => now);
    const logged: unknown[] = [];
    let calls = 0;
    let fail = true;
    const pack = async () => {
      calls += 1;
      if (fail) throw new Error('refused');
      return done;
    };
    const run = () => schedule.run('s', pack, (_message, details) => logged.push(details));
    const delays: number[] = [];
    for (let attempt = 0; attempt < 12; attempt++) {
      await run();
      const delay = (logged.at(-1) as { backoff_ms: number }).backoff_ms;
      delays.push(delay);
      now += delay - 1;
      await run();
      expect(calls).toBe(attempt + 1);
      now += 1;
    }
    expect(delays.slice(0, 4)).toEqual([1, 2, 4, 8].map((factor) => factor * FIRST_BACKOFF_MS));
    expect(delays.at(-1)).toBe(MAX_BACKOFF_MS);
    fail = false;
    await run();
    expect(schedule.debt({ id: 's', generation: 'g1' }, 40)).toBe(30);
    // Of another incarnation of s (deleted and created again), nothing is known packed.
    expect(schedule.debt({ id: 's', generation: 'g2' }, 40)).toBe(40);
    fail = true;
    await run();
    expect((logged.at(-1) as { failures: number; backoff_ms: number }).backoff_ms).toBe(FIRST_BACKOFF_MS);
  });

  it('a pack finding its session deleted logs nothing and backs nothing off', async () => {
    const schedule = new PackSchedule(() => 0);
    const logged: string[] = [];
    const gone = async (): Promise<PackResult> => {
      throw new NotFoundError('session s not found', { id: 's' });
    };
    await schedule.run('s', gone, (message) => logged.push(message), 'g1');
    expect(logged).toEqual([]);
    expect(schedule.backingOff('s', 'g1')).toBe(false);
  });

  it('a session deleted and created again does not wait out the backoff of the incarnation before', async () => {
    const schedule = new PackSchedule(() => 0);
    const ran: string[] = [];
    const pack = (generation: string, fail: boolean) => async () => {
      ran.push(generation);
      if (fail) throw new Error('refused');
      return { ...done, generation };
    };
    await schedule.run('s', pack('g1', true), () => undefined, 'g1');
    expect(schedule.backingOff('s', 'g1')).toBe(true);
    expect(schedule.backingOff('s')).toBe(true);
    // The old incarnation's packs wait; the new one's run.
    await schedule.run('s', pack('g1', false), () => undefined, 'g1');
    expect(schedule.backingOff('s', 'g2')).toBe(false);
    await schedule.run('s', pack('g2', false), () => undefined, 'g2');
    expect(ran).toEqual(['g1', 'g2']);
    expect(schedule.backingOff('s', 'g1')).toBe(false);
  });

  it("gives a session's packs the sweep a view-only pack left until one given it succeeds", async () => {
    const schedule = new PackSchedule(() => 0);
    const given: boolean[] = [];
    const pack = (result: Partial<PackResult> | Error) => async (_lastView: unknown, sweep: boolean) => {
      given.push(sweep);
      if (result instanceof Error) throw result;
      return { ...done, ...result };
    };
    const run = (result: Partial<PackResult> | Error) => schedule.run('s', pack(result), () => undefined, 'g1');
    await run({});
    await run({ unswept: true });
    // Another view-only pack owes it still; a failure keeps it; another session's owes nothing.
    await run({ unswept: true });
    await run(new Error('refused'));
    await schedule.run('t', pack({}), () => undefined);
    expect(given).toEqual([false, false, true, true, false]);
    // (Past the failure's backoff.)
    const later = new PackSchedule(() => 0);
    await later.run('s', pack({ unswept: true }), () => undefined);
    await later.run('s', pack({}), () => undefined);
    await later.run('s', pack({}), () => undefined);
    expect(given.slice(5)).toEqual([false, true, false]);
  });

  it('runs one pack of a session at a time, and once more after it however often it was asked meanwhile', async () => {
    const schedule = new PackSchedule();
    let running = 0;
    let most = 0;
    let calls = 0;
    let release: () => void = () => undefined;
    const pack = async () => {
      calls += 1;
      running += 1;
      most = Math.max(most, running);
      await new Promise<void>((resolve) => {
        release = resolve;
      });
      running -= 1;
      return done;
    };
    const first = schedule.run('s', pack, () => undefined);
    const asked = [1, 2, 3].map(() => schedule.run('s', pack, () => undefined));
    await Promise.resolve();
    release();
    await vi.waitFor(() => expect(calls).toBe(2), { timeout: 15_000 });
    release();
    await Promise.all([first, ...asked]);
    expect({ calls, most }).toEqual({ calls: 2, most: 1 });
  });

  it('resolves a run only once the pack it was given ran, whenever it is asked as the pack before ends', async () => {
    const early: number[] = [];
    for (let depth = 0; depth < 12; depth++) {
      const schedule = new PackSchedule();
      let release: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      const first = schedule.run(
        's',
        async () => {
          await gate;
          return done;
        },
        () => undefined,
      );
      release();
      // Other work of the process runs meanwhile, `depth` microtasks on.
      for (let turn = 0; turn < depth; turn++) await Promise.resolve();
      let ran = false;
      // An append that must pack before it answers (lib/turn/append.ts) awaits this.
      await schedule.run(
        's',
        async () => {
          await new Promise((resolve) => setTimeout(resolve, 1));
          ran = true;
          return done;
        },
        () => undefined,
      );
      if (!ran) early.push(depth);
      await first;
    }
    expect(early).toEqual([]);
  });

  it('never runs two packs of one session at once, however many other sessions it packed meanwhile', async () => {
    const schedule = new PackSchedule();
    let running = 0;
    let most = 0;
    let release: () => void = () => undefined;
    const slow = new Promise<void>((resolve) => {
      release = resolve;
    });
    const pack = async () => {
      running += 1;
      most = Math.max(most, running);
      await slow;
      running -= 1;
      return done;
    };
    const first = schedule.run('s', pack, () => undefined);
    // A busy process packs 10,000 other sessions (as many as it keeps) while the pack of s runs.
    for (let other = 0; other < 10_000; other++)
      await schedule.run(
        `other-${other}`,
        async () => ({ packed: false, deleted: 0 }),
        () => undefined,
      );
    const second = schedule.run('s', pack, () => undefined);
    await Promise.resolve();
    release();
    await Promise.all([first, second]);
    expect(most).toBe(1);
  });
});

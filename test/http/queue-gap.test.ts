import { describe, expect, it } from 'vitest';
import { createTurnRunner, type AppOptions } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { listAll, type ObjectStore } from '../../lib/store/object-store.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';
import { appHarness } from '../support/app-harness.ts';
import { CountingStore } from '../support/counting-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { HeldStore, type HeldCall } from '../support/held-store.ts';
import { createClient, TOKEN } from './http-suite.ts';

// Queued inputs (`on_busy: enqueue`) run before a request that arrives after their 202, also
// when it arrives between the close of the turn they wait behind (its `.done`) and that close's
// pickup (docs/API.md "Busy sessions", docs/STORAGE.md "Queued inputs"): the closer is held on
// its pickup's listing of the queue, and a request sent then is answered as a busy session's.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };

/** A process on `store` whose background turns go to `sent` and whose work after its answers goes to `tasks`. */
function world(store: HeldStore) {
  const sent: BackgroundTurn[] = [];
  const tasks: Promise<unknown>[] = [];
  const options: Omit<AppOptions, 'store'> = {
    readEnvironment: (c) => c.env ?? environment,
    queueTurn: () => async (run) => void sent.push(run),
    afterResponse: (task) => void tasks.push(task),
  };
  const api = createClient(appHarness(store, environment, options));
  const runner = createTurnRunner({ ...options, store: () => store });
  /** Runs background turn `index` (its close's pickup among `tasks`, not awaited). */
  const run = (index: number) => runner(sent[index]!, environment, (task) => void tasks.push(task));
  const drain = async () => {
    while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
  };
  /** Runs every background turn sent, in order, each with the work after it. */
  const runAll = async (from: number) => {
    for (let index = from; index < sent.length; index++) {
      expect(await run(index)).toBe('done');
      await drain();
    }
  };
  return { api, sent, run, drain, runAll };
}

const queueListing = (call: HeldCall) => call.operation === 'list' && call.keys[0]!.includes('/queue/');

async function userInputs(api: ReturnType<typeof createClient>, id: string): Promise<unknown[]> {
  const items = (await api.get(`/v1/sessions/${id}/items?limit=100`)).body.items;
  return items
    .filter((item: { role?: string }) => item.role === 'user')
    .map((item: { content: unknown }) => item.content)
    .reverse();
}

describe('a request between a close and its pickup', () => {
  it.each(['enqueue', 'reject'] as const)('runs after the inputs queued before it (its policy %s)', async (policy) => {
    const store = new HeldStore(new MemoryStore());
    const { api, sent, run, drain, runAll } = world(store);
    const id = await api.session({ on_busy: 'enqueue' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'bg', background: true })).status).toBe(202);
    for (const input of ['q0', 'q1']) {
      const queued = await api.post(`/v1/sessions/${id}/turns`, { input });
      expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    }
    await drain();
    // Turn 1 closes; its pickup waits on its listing of the queue.
    const held = store.hold(queueListing);
    const closing = run(0);
    await held.reached;
    const late = await api.post(`/v1/sessions/${id}/turns`, { input: 'q2', on_busy: policy });
    held.release();
    expect(await closing).toBe('done');
    await drain();
    if (policy === 'enqueue') {
      expect(late.status, JSON.stringify(late.body)).toBe(202);
      expect(late.body.position).toBe(2);
    } else {
      expect(late.status, JSON.stringify(late.body)).toBe(409);
      expect(late.body.error.code).toBe('turn_in_progress');
    }
    await runAll(1);
    expect(sent).toHaveLength(policy === 'enqueue' ? 4 : 3);
    expect(await userInputs(api, id)).toEqual(policy === 'enqueue' ? ['bg', 'q0', 'q1', 'q2'] : ['bg', 'q0', 'q1']);
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(0);
    // The last queued turn's close, finding the queue empty, lowered its signal.
    const signals = (await listAll(store, '')).filter((object) => object.key.endsWith('/-queued'));
    expect(signals.map((object) => object.size)).toEqual([0]);
  });

  it('an interrupt runs at once, the queued inputs waiting for it: none is taken up to be cancelled', async () => {
    const store = new HeldStore(new MemoryStore());
    const { api, run, drain, runAll } = world(store);
    const id = await api.session({ on_busy: 'enqueue' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'bg', background: true })).status).toBe(202);
    for (const input of ['q0', 'q1']) expect((await api.post(`/v1/sessions/${id}/turns`, { input })).status).toBe(202);
    await drain();
    const held = store.hold(queueListing);
    const closing = run(0);
    await held.reached;
    const late = await api.post(`/v1/sessions/${id}/turns`, { input: 'now', on_busy: 'interrupt' });
    expect(late.status, JSON.stringify(late.body)).toBe(200);
    held.release();
    expect(await closing).toBe('done');
    await drain();
    await runAll(1);
    expect(await userInputs(api, id)).toEqual(['bg', 'now', 'q0', 'q1']);
    const turns = (await api.get(`/v1/sessions/${id}/turns`)).body.turns;
    expect(turns.map((turn: { status: string }) => turn.status)).toEqual(Array(4).fill('completed'));
  });
});

describe('a session whose queue ran dry', () => {
  it('costs what it would without the signal, lowered: a read of the session, and a turn', async () => {
    const counting = new CountingStore(new MemoryStore());
    const { api, drain, runAll } = world(new HeldStore(counting));
    const session = async () => {
      const id = await api.session({ on_busy: 'enqueue' });
      expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'bg', background: true })).status).toBe(202);
      for (const input of ['q0', 'q1'])
        expect((await api.post(`/v1/sessions/${id}/turns`, { input })).status).toBe(202);
      await drain();
      return id;
    };
    const dry = await session();
    const without = await session();
    await runAll(0);
    // A turn of the request's own, its record and completion the newest keys.
    for (const id of [dry, without])
      expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'fg' })).status).toBe(200);
    await drain();
    const signals = (await listAll(counting, '')).filter((object) => object.key.endsWith('/-queued'));
    expect(signals.map((object) => object.size)).toEqual([0, 0]);
    await counting.delete(signals.filter((object) => object.key.includes(without)).map((object) => object.key));
    const operations = ({ get, head, put, list, delete: deleted }: CountingStore['counts']) => ({
      get,
      head,
      put,
      list,
      delete: deleted,
    });
    const costs = async (id: string) => {
      counting.reset();
      expect((await api.get(`/v1/sessions/${id}`)).status).toBe(200);
      const read = operations(counting.counts);
      counting.reset();
      expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'after' })).status).toBe(200);
      await drain();
      return { read, turn: operations(counting.counts) };
    };
    expect(await costs(dry)).toEqual(await costs(without));
  });
});

describe('a request that takes the queue up first, crashed at each storage call', () => {
  const leased = { ...environment, TURN_LEASE_MS: '3000' };

  /** A process on `store`, whose background turns go to `sent` and its work after its answers to `tasks`. */
  function processOn(store: ObjectStore, clock: () => Date, logged: string[] = []) {
    const sent: BackgroundTurn[] = [];
    const tasks: Promise<unknown>[] = [];
    const options: Omit<AppOptions, 'store'> = {
      readEnvironment: (c) => c.env ?? leased,
      clock,
      log: (line) => void logged.push(line),
      queueTurn: () => async (run) => void sent.push(run),
      afterResponse: (task) => void tasks.push(task),
    };
    const api = createClient(appHarness(store, leased, options));
    const runner = createTurnRunner({ ...options, store: () => store });
    const drain = async () => {
      while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
    };
    let ran = 0;
    /** Runs the background turns sent since the last call, each with the work after it. */
    const runSent = async () => {
      while (ran < sent.length) {
        await runner(sent[ran++]!, leased, (task) => void tasks.push(task));
        await drain();
      }
    };
    return { api, sent, drain, runSent };
  }

  /**
   * `bg` closed, `q0` and `q1` queued behind it, and the closer's process died after its `.done`,
   * before its pickup: the session is idle, its queue's signal raised.
   */
  async function deadCloser() {
    let now = Date.parse('2030-01-01T00:00:00Z');
    const clock = () => new Date(now);
    const store = new FaultyStore(new MemoryStore());
    const setup = processOn(store, clock);
    const id = await setup.api.session({ on_busy: 'enqueue' });
    expect((await setup.api.post(`/v1/sessions/${id}/turns`, { input: 'bg', background: true })).status).toBe(202);
    for (const input of ['q0', 'q1']) {
      expect((await setup.api.post(`/v1/sessions/${id}/turns`, { input })).status).toBe(202);
      now += 1;
    }
    await setup.drain();
    store.failWhen(queueListed, { times: 1 });
    await setup.runSent();
    store.heal();
    expect((await setup.api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('completed');
    return { store, id, clock, advance: (ms: number) => (now += ms) };
  }

  const queueListed = ({ operation, key }: { operation: string; key: string }) =>
    operation === 'list' && key.includes('/queue/');

  /** Numbers each call once (a delete of many keys is one call), in the order made. */
  function sequence() {
    const seen = new Map<string, number>();
    return ({ operation, index }: { operation: string; index: number }) => {
      const name = `${operation}:${index}`;
      if (!seen.has(name)) seen.set(name, seen.size + 1);
      return seen.get(name)!;
    };
  }

  /** The request in the gap, with the work after its answer. */
  async function late(
    store: ObjectStore,
    clock: () => Date,
    id: string,
    policy: 'enqueue' | 'reject',
    logged: string[] = [],
  ) {
    const process = processOn(store, clock, logged);
    const answer = await process.api.post(`/v1/sessions/${id}/turns`, { input: 'late', on_busy: policy });
    await process.drain();
    return answer;
  }

  it.each(['enqueue', 'reject'] as const)(
    'a delete of the newest turn keeps the inputs queued before it ahead of a later request (%s)',
    async (policy) => {
      const { store, id, clock } = await deadCloser();
      const process = processOn(store, clock);
      // The session goes back before `bg` (a new generation); q0 and q1 still run, in its place.
      expect((await process.api.delete(`/v1/sessions/${id}/turns/1`)).status).toBe(200);
      const answer = await process.api.post(`/v1/sessions/${id}/turns`, { input: 'late', on_busy: policy });
      expect(answer.status, JSON.stringify(answer.body)).toBe(policy === 'enqueue' ? 202 : 409);
      for (let round = 0; round < 5; round++) {
        await process.drain();
        await process.runSent();
      }
      expect(await userInputs(process.api, id)).toEqual(policy === 'enqueue' ? ['q0', 'q1', 'late'] : ['q0', 'q1']);
      expect((await process.api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(0);
    },
  );

  /** The calls the request in the gap makes on a store that never fails (each numbered once). */
  async function callsOfLate(policy: 'enqueue' | 'reject') {
    const clean = await deadCloser();
    const numbered = sequence();
    let calls = 0;
    clean.store.failWhen((call) => {
      calls = Math.max(calls, numbered(call));
      return false;
    });
    const answered = await late(clean.store, clean.clock, clean.id, policy);
    expect(answered.status).toBe(policy === 'enqueue' ? 202 : 409);
    expect(calls).toBeGreaterThan(5);
    return calls;
  }

  /**
   * A survivor on the healed store, once any lease the dead process left ran out, sends a turn
   * and takes the queue up until it ran dry: each acknowledged input ran once, in order, and
   * `late` (answered `status`) once when answered 202, else at most once, and then only when
   * `mayRun` (its answer could not tell whether it runs).
   */
  async function survives(
    { store, id, clock, advance }: Awaited<ReturnType<typeof deadCloser>>,
    status: number,
    where: string,
    mayRun: boolean,
  ) {
    advance(4000);
    const survivor = processOn(store.inner, clock);
    const final = await survivor.api.post(`/v1/sessions/${id}/turns`, { input: 'F' });
    expect([200, 202], where).toContain(final.status);
    for (let round = 0; round < 20; round++) {
      await survivor.drain();
      await survivor.runSent();
      // A listing of the queue takes it up, as a close would.
      const { total } = (await survivor.api.get(`/v1/sessions/${id}/queue`)).body;
      await survivor.drain();
      await survivor.runSent();
      const turns = (await survivor.api.get(`/v1/sessions/${id}/turns`)).body.turns;
      const open = turns.some((turn: { status: string }) => ['queued', 'in_progress'].includes(turn.status));
      if (total === 0 && !open) break;
      advance(4000);
    }
    const inputs = await userInputs(survivor.api, id);
    // Each acknowledged input once, in order; `late`, unanswered, at most once, behind q1.
    expect(
      inputs.filter((input) => input !== 'late'),
      where,
    ).toEqual(['bg', 'q0', 'q1', 'F']);
    const lates = inputs.filter((input) => input === 'late').length;
    expect(lates, where).toBe(status === 202 ? 1 : Math.min(lates, 1));
    if (lates === 1) expect(inputs.indexOf('late'), where).toBeGreaterThan(inputs.indexOf('q1'));
    // Answered 503, it runs only when its answer could not tell whether it would.
    if (status !== 202 && lates === 1) expect(mayRun, `${where}: answered ${status}, it ran`).toBe(true);
    expect((await survivor.api.get(`/v1/sessions/${id}/queue`)).body.total, where).toBe(0);
  }

  it.each(['enqueue', 'reject'] as const)(
    'nothing acknowledged is lost or run twice, in order (%s)',
    async (policy) => {
      const calls = await callsOfLate(policy);
      for (let at = 1; at <= calls; at++) {
        for (const after of [false, true]) {
          const world = await deadCloser();
          const seq = sequence();
          world.store.failWhen((call) => seq(call) === at, { after, times: 1 });
          world.store.failWhen((call) => seq(call) > at);
          const logged: string[] = [];
          const answer = await late(world.store, world.clock, world.id, policy, logged);
          const where = `crashed at call ${at} ${after ? 'after' : 'before'} it: ${answer.status}`;
          await survives(
            world,
            answer.status,
            where,
            logged.some((line) => line.includes('it runs if')),
          );
        }
      }
    },
    // A crash at each of the storage calls of a queue taken up: a ceiling for a loaded machine.
    90_000,
  );

  // Each outage's length and first failure apart: one test would outlast a loaded machine's timeout.
  const outages = [2, 5, 10].flatMap((length) => [false, true].map((after) => [length, after] as const));
  it.each(outages)(
    'nothing acknowledged is lost or run twice, nor any input answered 503 run, through an outage of %i calls ' +
      '(the first after it did the work: %s)',
    async (length, after) => {
      // The store fails every call from one on for a while (the first of them after it did the
      // work, or before), then answers again: the enqueue's withdraw, its put again and its look
      // at a tombstone whose answer was lost meet a store that came back. A 503 whose input runs
      // must say so in its log ("it runs if").
      const calls = await callsOfLate('enqueue');
      for (let at = 1; at <= calls; at++) {
        const world = await deadCloser();
        const seq = sequence();
        world.store.failWhen((call) => seq(call) === at, { after, times: 1 });
        world.store.failWhen((call) => seq(call) > at && seq(call) < at + length);
        const logged: string[] = [];
        const answer = await late(world.store, world.clock, world.id, 'enqueue', logged);
        const first = after ? 'after' : 'before';
        const where = `calls ${at} to ${at + length - 1} failed (the first ${first} it): ${answer.status}`;
        expect([202, 503], where).toContain(answer.status);
        await survives(
          world,
          answer.status,
          where,
          logged.some((line) => line.includes('it runs if')),
        );
      }
    },
  );
});

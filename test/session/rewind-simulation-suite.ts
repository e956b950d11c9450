import { beforeEach, describe, expect, it, vi } from 'vitest';
import type { Item } from '../../lib/items.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { attempt, LEASE_MS, type Outcome } from '../support/simulation.ts';
import { SessionLog } from '../support/session-log.ts';
import { InterleavedStore } from './fork-simulation-suite.ts';

/**
 * Deletes of a session's newest turn (lib/session/log/rewind.ts) racing a turn and a fork in
 * every order (test/session/protocol-simulation-suite.ts runs this on each store): one runs
 * whole between any two storage calls of the other, both ways round, and the delete is crashed
 * at each of its calls, before the call and after it landed. After each run: no 5xx; an
 * acknowledged turn's items are in the session, once; an acknowledged delete left none of the
 * deleted turn's; an acknowledged fork holds the history up to the deleted turn and takes an
 * append; the session takes a turn afterwards; and once both sessions are deleted and a lease
 * has passed, nothing is left.
 */

const S = 's';
const FORK = 'f';
const user = (content: string): Item => ({ type: 'message', role: 'user', content });
const assistant = (content: string): Item => ({ type: 'message', role: 'assistant', content });

/** A whole model turn answering `re <text>`, with a usage the session totals count. */
export async function turnOf(log: SessionLog, id: string, text: string): Promise<void> {
  const begun = await log.beginTurn(id, { input: [user(text)] });
  if (begun.kind !== 'claimed') throw new Error('expected a claim');
  await log.completeTurn(begun.turn, {
    status: 'completed',
    output: [assistant(`re ${text}`)],
    receipt: {},
    usage: USAGE,
  });
}

/** The usage of every turn these tests complete. */
export const USAGE = {
  input_tokens: 1,
  cached_input_tokens: 0,
  cache_write_tokens: 0,
  output_tokens: 1,
  reasoning_tokens: 0,
  cost_usd: null,
};

/** The contents of a session's items, oldest first. */
export async function contents(log: SessionLog, id: string): Promise<string[]> {
  const page = await log.listItems(id, { limit: 1000 });
  return page.items.reverse().map((item) => (item as { content: string }).content);
}

interface Run {
  store: ObjectStore;
  log: (store?: ObjectStore) => SessionLog;
  late: () => void;
  /** The turns the session's usage totals counted before the race: they never go down. */
  spent: number;
}

async function start(makeStore: () => Promise<ObjectStore>): Promise<Run> {
  const store = await makeStore();
  let offset = 0;
  const clock = () => new Date(Date.now() + offset);
  const log = (on: ObjectStore = store) => new SessionLog(on, { clock, leaseMs: LEASE_MS });
  await log().create({ id: S });
  await turnOf(log(), S, 'a');
  await turnOf(log(), S, 'b');
  return { store, log, late: () => (offset += LEASE_MS + 1), spent: 2 };
}

const BEFORE = ['a', 're a', 'b', 're b'];
const AFTER = ['a', 're a'];

const rewind = (log: SessionLog) => attempt(() => log.deleteTurn(S, 2));
const removeFork = (log: SessionLog) => attempt(() => log.delete(FORK));
/** A fork of the session's incarnation before a delete of its newest turn, then that turn taken again. */
const forkEarlier = async (log: SessionLog) => {
  await log.fork(S, { at_turn: 1, fields: { id: FORK } });
  await log.deleteTurn(S, 2);
  await turnOf(log, S, 'b');
};
const turn = (log: SessionLog) => attempt(() => turnOf(log, S, 'c'));
const fork = (log: SessionLog) => attempt(() => log.fork(S, { at_turn: 2, fields: { id: FORK } }));
const notRun: Outcome<unknown> = { ok: false, status: 404, code: 'not_run', error: null };

/** The invariants after a race (see the file's comment). */
async function check(
  run: Run,
  outcomes: { rewind: Outcome<unknown>; turn?: Outcome<unknown>; fork?: Outcome<unknown> },
  where: string,
) {
  for (const outcome of Object.values(outcomes))
    if (outcome && !outcome.ok) expect(outcome.status, `${where}: ${outcome.code}`).toBeLessThan(500);
  const log = run.log();
  const items = await contents(log, S);
  expect((await log.get(S)).usage.turns, where).toBeGreaterThanOrEqual(run.spent);
  if (outcomes.rewind.ok) expect(items.slice(0, 3), where).not.toEqual(BEFORE.slice(0, 3));
  if (outcomes.turn?.ok)
    expect(
      items.filter((text) => text === 'c'),
      where,
    ).toEqual(['c']);
  expect([BEFORE, AFTER, [...BEFORE, 'c', 're c'], [...AFTER, 'c', 're c']], where).toContainEqual(items);
  if (outcomes.fork?.ok) {
    expect(await contents(log, FORK), where).toEqual(BEFORE);
    await log.append(FORK, [user('after')]);
    expect(await contents(log, FORK), where).toEqual([...BEFORE, 'after']);
  }
  // A lease later (a fence of a delete that died has run out), the session takes a turn.
  run.late();
  await turnOf(log, S, 'd');
  expect((await contents(log, S)).slice(-2), where).toEqual(['d', 're d']);
  for (let round = 0; round < 2; round++) {
    await attempt(() => log.delete(FORK));
    await attempt(() => log.delete(S));
    run.late();
  }
  expect(
    (await run.store.list('sessions/', { limit: 1000 })).objects.map((object) => object.key),
    where,
  ).toEqual([]);
}

/** Storage calls of one uninterrupted run of `work` on a fresh world. */
async function callsOf(makeStore: () => Promise<ObjectStore>, work: (log: SessionLog) => Promise<unknown>) {
  const run = await start(makeStore);
  const counted = new InterleavedStore(run.store, {});
  await work(run.log(counted));
  return counted.calls;
}

/** `first` on an interleaved store, `second` run whole before its call number `pause` + 1. */
async function race(
  makeStore: () => Promise<ObjectStore>,
  pause: number,
  first: (log: SessionLog) => Promise<Outcome<unknown>>,
  second: (log: SessionLog) => Promise<Outcome<unknown>>,
  prepare?: (log: SessionLog) => Promise<unknown>,
) {
  const run = await start(makeStore);
  await prepare?.(run.log());
  run.spent = (await run.log().get(S)).usage.turns;
  let meanwhile = notRun;
  const store = new InterleavedStore(run.store, {
    pause: { at: pause, meanwhile: async () => (meanwhile = await second(run.log())) },
  });
  const outcome = await first(run.log(store));
  await store.finish();
  return { run, outcome, meanwhile };
}

export function defineRewindSimulation(name: string, makeStore: () => Promise<ObjectStore>): void {
  describe(`deletes of the newest turn racing turns and forks in every order: ${name}`, () => {
    // Claims refused by a fence back off on real timers (the protocol simulation fakes them).
    beforeEach(() => {
      vi.useRealTimers();
    });

    it('a delete crashed at each storage call, before it and after it landed, then retried', async () => {
      const calls = await callsOf(makeStore, rewind);
      for (let crash = 1; crash <= calls; crash++) {
        for (const after of [false, true]) {
          const run = await start(makeStore);
          await rewind(run.log(new InterleavedStore(run.store, { crash: { at: crash, after } })));
          const where = `delete crashed at call ${crash} ${after ? 'after' : 'before'} it`;
          // What it left is the session before or after; a retry ends with it after (or finds it gone).
          expect([BEFORE, AFTER], where).toContainEqual(await contents(run.log(), S));
          const retried = await rewind(run.log());
          if (!retried.ok) expect(retried.code, where).toBe('not_found');
          await check(run, { rewind: { ok: true, value: null } }, where);
        }
      }
    });

    it('a delete of a fork of an earlier incarnation (it sweeps the session) amid a delete', async () => {
      const calls = await callsOf(makeStore, rewind);
      for (let pause = 0; pause <= calls; pause++) {
        const { run, outcome, meanwhile } = await race(makeStore, pause, rewind, removeFork, forkEarlier);
        expect(meanwhile.ok, `fork delete after delete call ${pause}`).toBe(true);
        await check(run, { rewind: outcome }, `fork delete after delete call ${pause}`);
      }
    });

    for (const [label, other] of [
      ['turn', turn],
      ['fork at the deleted turn', fork],
    ] as const) {
      it(`a ${label} run whole between any two storage calls of a delete`, async () => {
        const calls = await callsOf(makeStore, rewind);
        for (let pause = 0; pause <= calls; pause++) {
          const { run, outcome, meanwhile } = await race(makeStore, pause, rewind, other);
          const key = label === 'turn' ? 'turn' : 'fork';
          await check(run, { rewind: outcome, [key]: meanwhile }, `${label} after delete call ${pause}`);
        }
      });

      it(`a delete run whole between any two storage calls of a ${label}`, async () => {
        const calls = await callsOf(makeStore, other);
        for (let pause = 0; pause <= calls; pause++) {
          const { run, outcome, meanwhile } = await race(makeStore, pause, other, rewind);
          const key = label === 'turn' ? 'turn' : 'fork';
          await check(run, { rewind: meanwhile, [key]: outcome }, `delete after ${label} call ${pause}`);
        }
      });
    }
  });
}

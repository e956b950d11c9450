import { describe, expect, it } from 'vitest';
import { StorageError } from '../../lib/errors.ts';
import type { Item } from '../../lib/items.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { attempt, LEASE_MS, type Outcome } from '../support/simulation.ts';
import { SessionLog } from '../support/session-log.ts';

/**
 * Forks and deletes of the forked session, racing in every order (test/session/
 * protocol-simulation-suite.ts runs this on each store): one runs whole between any two
 * storage calls of the other, both ways round, and a fork is crashed at each of its calls,
 * before the call and after it landed. After each run: no 5xx; an acknowledged fork holds the
 * parent's history up to its point and takes an append, whether or not the parent was
 * deleted; an acknowledged delete left no parent; and once both sessions are deleted and a
 * lease has passed, nothing is left under either id.
 */

const PARENT = 'p';
const CHILD = 'c';
const user = (content: string): Item => ({ type: 'message', role: 'user', content });

/** A store that runs `meanwhile` once, just before its call number `at` + 1, or crashes at call `crash.at`. */
export class InterleavedStore implements ObjectStore {
  calls = 0;
  readonly #inner: ObjectStore;
  readonly #pause: { at: number; meanwhile: () => Promise<unknown> } | undefined;
  readonly #crash: { at: number; after: boolean } | undefined;
  #dead = false;

  constructor(
    inner: ObjectStore,
    options: { pause?: { at: number; meanwhile: () => Promise<unknown> }; crash?: { at: number; after: boolean } },
  ) {
    this.#inner = inner;
    this.#pause = options.pause;
    this.#crash = options.crash;
  }

  #paused = false;

  /** Runs what was to run meanwhile if the work ended before that call (it then runs after it). */
  async finish(): Promise<void> {
    if (this.#pause && !this.#paused) {
      this.#paused = true;
      await this.#pause.meanwhile();
    }
  }

  async #call<T>(work: () => Promise<T>): Promise<T> {
    if (this.#dead) throw new StorageError('crashed');
    if (this.#pause && !this.#paused && this.calls === this.#pause.at) {
      this.#paused = true;
      await this.#pause.meanwhile();
    }
    this.calls += 1;
    if (this.#crash && this.calls === this.#crash.at) {
      if (this.#crash.after) await work().catch(() => undefined);
      this.#dead = true;
      throw new StorageError('crashed');
    }
    return work();
  }

  get: ObjectStore['get'] = (key, options) => this.#call(() => this.#inner.get(key, options));
  head: ObjectStore['head'] = (key) => this.#call(() => this.#inner.head(key));
  put: ObjectStore['put'] = (key, body, options) => this.#call(() => this.#inner.put(key, body, options));
  list: ObjectStore['list'] = (prefix, options) => this.#call(() => this.#inner.list(prefix, options));
  delete: ObjectStore['delete'] = (keys) => this.#call(() => this.#inner.delete(keys));
}

interface Run {
  store: ObjectStore;
  /** A process on the shared store (its clock shared, `late` moves it past a lease). */
  log: (store?: ObjectStore) => SessionLog;
  late: () => void;
  /** The parent's items before the race (the fork point is their last seq). */
  before: { seq: number; content: string }[];
}

const LOG_OPTIONS = { blobThreshold: 64, segmentTargetBytes: 2048, packMinRecords: 2, keepRecords: 1 };

async function start(makeStore: () => Promise<ObjectStore>): Promise<Run> {
  const store = await makeStore();
  let offset = 0;
  const clock = () => new Date(Date.now() + offset);
  const log = (on: ObjectStore = store) => new SessionLog(on, { clock, leaseMs: LEASE_MS, ...LOG_OPTIONS });
  const admin = log();
  await admin.create({ id: PARENT });
  for (let index = 0; index < 6; index++) {
    await admin.append(PARENT, [user(`a${index}`), user(`b${index}`.repeat(20))]);
    await admin.pack(PARENT);
  }
  return { store, log, late: () => (offset += LEASE_MS + 1), before: await contents(admin, PARENT) };
}

async function contents(log: SessionLog, id: string): Promise<{ seq: number; content: string }[]> {
  const { lines } = await log.export(id);
  const items: { seq: number; content: string }[] = [];
  for await (const chunk of lines)
    for (const line of chunk.split('\n').filter(Boolean)) {
      const value = JSON.parse(line);
      if (value.seq !== undefined) items.push({ seq: value.seq, content: value.content });
    }
  return items;
}

const fork = (log: SessionLog, at: number) => attempt(() => log.fork(PARENT, { at_seq: at, fields: { id: CHILD } }));
const remove = (log: SessionLog, id: string) => attempt(() => log.delete(id));

/**
 * The invariants after a race of a fork at seq `point` (by default the end) and a delete of its
 * parent (see the file's comment).
 */
async function check(
  run: Run,
  outcomes: { fork: Outcome<unknown>; delete?: Outcome<unknown> },
  where: string,
  point = run.before.length,
) {
  const before = run.before.filter((item) => item.seq <= point);
  for (const outcome of Object.values(outcomes))
    if (outcome && !outcome.ok) expect(outcome.status, `${where}: ${outcome.code}`).toBeLessThan(500);
  const log = run.log();
  if (outcomes.delete?.ok) await expect(log.get(PARENT), where).rejects.toMatchObject({ code: 'not_found' });
  if (outcomes.fork.ok) {
    expect(await contents(log, CHILD), where).toEqual(before);
    await remove(log, PARENT);
    expect(await contents(log, CHILD), where).toEqual(before);
    await log.append(CHILD, [user('after')]);
    expect(
      (await contents(log, CHILD)).map((item) => item.seq),
      where,
    ).toEqual([...before, { seq: point + 1 }].map((_, index) => index + 1));
  }
  // Both gone and a lease later (a fork that died before its commit point is not live then),
  // nothing of either is left.
  await remove(log, CHILD);
  await remove(log, PARENT);
  run.late();
  await remove(log, CHILD);
  await remove(log, PARENT);
  expect(
    (await run.store.list('sessions/', { limit: 1000 })).objects.map((object) => object.key),
    where,
  ).toEqual([]);
}

/** Storage calls of one uninterrupted run of `work` on a fresh world. */
async function callsOf(makeStore: () => Promise<ObjectStore>, work: (log: SessionLog, run: Run) => Promise<unknown>) {
  const run = await start(makeStore);
  const counted = new InterleavedStore(run.store, {});
  await work(run.log(counted), run);
  return counted.calls;
}

export function defineForkSimulation(name: string, makeStore: () => Promise<ObjectStore>): void {
  const at = (run: Run) => run.before.length;
  describe(`forks and deletes racing in every order: ${name}`, () => {
    it('a delete of the parent run whole between any two storage calls of a fork', async () => {
      const calls = await callsOf(makeStore, (log, run) => fork(log, at(run)));
      for (let pause = 0; pause <= calls; pause++) {
        const run = await start(makeStore);
        let deleted: Outcome<unknown> | undefined;
        const store = new InterleavedStore(run.store, {
          pause: { at: pause, meanwhile: async () => (deleted = await remove(run.log(), PARENT)) },
        });
        const forked = await fork(run.log(store), at(run));
        await store.finish();
        await check(run, { fork: forked, ...(deleted ? { delete: deleted } : {}) }, `delete after fork call ${pause}`);
      }
    });

    it('a fork run whole between any two storage calls of a delete of its parent', async () => {
      const calls = await callsOf(makeStore, (log) => remove(log, PARENT));
      for (let pause = 0; pause <= calls; pause++) {
        const run = await start(makeStore);
        let forked: Outcome<unknown> = { ok: false, status: 404, code: 'not_run', error: null };
        const store = new InterleavedStore(run.store, {
          pause: { at: pause, meanwhile: async () => (forked = await fork(run.log(), at(run))) },
        });
        const deleted = await remove(run.log(store), PARENT);
        await store.finish();
        await check(run, { fork: forked, delete: deleted }, `fork after delete call ${pause}`);
      }
    });

    it('a delete of a fork run whole between any two storage calls of a delete of its parent', async () => {
      const calls = await callsOf(makeStore, (log) => remove(log, PARENT));
      for (let pause = 0; pause <= calls; pause++) {
        const run = await start(makeStore);
        const setupFork = await fork(run.log(), at(run));
        expect(setupFork.ok).toBe(true);
        const store = new InterleavedStore(run.store, {
          pause: { at: pause, meanwhile: () => remove(run.log(), CHILD) },
        });
        const deleted = await remove(run.log(store), PARENT);
        await store.finish();
        expect(deleted.ok, `child delete after parent delete call ${pause}`).toBe(true);
        run.late();
        expect(
          (await run.store.list('sessions/', { limit: 1000 })).objects.map((object) => object.key),
          `after call ${pause}`,
        ).toEqual([]);
      }
    });

    it('a fork crashed at each storage call, before it and after it landed, then a delete of its parent', async () => {
      // At the end, and at a point packed into a segment (the second of six appends).
      for (const point of [at, (_run: Run) => PACKED_POINT]) await crashEach(makeStore, point);
    });
  });
}

/** A point inside the parent's packed history: the end of its second append. */
const PACKED_POINT = 4;

/** A fork at `point` crashed at each of its storage calls, before and after it; then a delete of its parent. */
async function crashEach(makeStore: () => Promise<ObjectStore>, point: (run: Run) => number) {
  const calls = await callsOf(makeStore, async (log, run) => {
    const whole = await fork(log, point(run));
    expect(whole.ok, `an uncrashed fork at ${point(run)}`).toBe(true);
  });
  for (let crash = 1; crash <= calls; crash++) {
    for (const after of [false, true]) {
      const run = await start(makeStore);
      const crashed = await fork(run.log(new InterleavedStore(run.store, { crash: { at: crash, after } })), point(run));
      const where = `fork at ${point(run)} crashed at call ${crash} ${after ? 'after' : 'before'} it`;
      // What a crashed fork left is either a whole fork or nothing a reader sees.
      const landed = await attempt(() => run.log().get(CHILD));
      const deleted = await remove(run.log(), PARENT);
      // The crashed process's own answer is not checked (it died); what it left is.
      const notRun: Outcome<unknown> = { ok: false, status: 404, code: 'crashed', error: crashed };
      await check(run, { fork: landed.ok ? landed : notRun, delete: deleted }, where, point(run));
    }
  }
}

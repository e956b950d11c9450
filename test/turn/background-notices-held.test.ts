import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseServiceConfig } from '../../lib/config.ts';
import { Inbox } from '../../lib/inbox/inbox.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { listAll, type ObjectStore } from '../../lib/store/object-store.ts';
import { claimBackgroundTurn, runBackgroundTurn, runInProcess, type TurnServices } from '../../lib/turn/index.ts';
import { SessionLog } from '../support/session-log.ts';
import { hookedEcho } from '../support/turn-world.ts';

/**
 * A background turn's notice, taken over by a later run of the turn, is given back by that run
 * only when no other run of the turn may still show it: a run that cannot read the completion
 * another run closed the turn with (the read fails, or finds the completion buried with no segment
 * line telling what it carries on, as for a line an older pack wrote), and a run whose lease a
 * third run took over, keep what they took over from an earlier run (the close showed it, or the
 * turn after it takes it over). A completion a pack buried is read from its segment line. A run
 * that closes the turn itself gives back what a run of it that died moved for it. Each run has its
 * own view of one store; time (the runners' timers, the clock) is the test's.
 */

const LEASE_MS = 30_000;
const NOTICE = 'the first notice';

/** A model that records each call and answers once `open` (or fails with `fail`). */
function gated() {
  const prompts: string[] = [];
  const signals: (AbortSignal | undefined)[] = [];
  let open!: () => void;
  let fail!: (error: Error) => void;
  const gate = new Promise<void>((resolve, reject) => {
    open = resolve;
    fail = reject;
  });
  gate.catch(() => undefined);
  const model = hookedEcho('echo', async (request) => {
    prompts.push(JSON.stringify({ ...request, signal: undefined }));
    signals.push(request.signal);
    await gate;
  });
  return { model, prompts, signals, open, fail };
}

/** A hold released once: `wait` resolves after `release`. */
function hold() {
  let release!: () => void;
  const wait = new Promise<void>((resolve) => (release = resolve));
  return { wait, release };
}

/**
 * One run's view of `store`: every call fails once `dead()` (its process died); its lease puts
 * wait for `leaseHold` once `stalled()`; its listings of
 * `inbox_removed/` wait for `listHold`, and its puts `putHold` chooses for it; its reads of the
 * turn's completion once it told its own completion refused fail or find it buried, no segment
 * keeping its line (`doneRead`).
 */
function runView(
  store: ObjectStore,
  hooks: {
    stalled?: () => boolean;
    leaseHold?: Promise<void>;
    listHold?: { wait: Promise<void>; reached: () => void };
    putHold?: { when: (key: string) => boolean; wait: Promise<void>; reached: () => void };
    doneRead?: 'fail' | 'buried';
    afterDelete?: (key: string) => void;
    dead?: () => boolean;
  },
): ObjectStore {
  let refused = false;
  let readsAfter = 0;
  return new Proxy(store, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property);
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        const key = typeof args[0] === 'string' ? args[0] : '';
        if (hooks.dead?.()) throw new Error('the process died');
        if (property === 'put' && key.endsWith('.lease') && hooks.stalled?.()) await hooks.leaseHold;
        if (property === 'list' && key.includes('/inbox_removed/') && hooks.listHold) {
          hooks.listHold.reached();
          await hooks.listHold.wait;
        }
        if (property === 'put' && hooks.putHold?.when(key)) {
          hooks.putHold.reached();
          await hooks.putHold.wait;
        }
        // Once its completion was refused, the read that tells it by whom is answered; those after are `doneRead`'s.
        const done =
          property === 'get' && key.endsWith('.done') && refused && readsAfter++ > 0 ? hooks.doneRead : undefined;
        if (done === 'fail') throw new Error('the store failed to read');
        const result: unknown = await value.apply(target, args);
        if (done === 'buried' && result) return { ...(result as object), body: new Uint8Array() };
        if (property === 'put' && key.endsWith('.done') && result === null) refused = true;
        if (property === 'delete') hooks.afterDelete?.(key);
        return result;
      };
    },
  });
}

async function world() {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
  const clock = () => new Date();
  const store = new MemoryStore({ clock });
  const tasks: Promise<unknown>[] = [];
  const sessions = new SessionLog(store, { clock, leaseMs: LEASE_MS });
  const inbox = new Inbox(store, { clock, log: () => {}, sessionExists: sessionExistsIn(store, '') });
  const next = gated();
  const services: TurnServices = {
    sessions,
    inbox,
    config: parseServiceConfig({ TURN_LEASE_MS: String(LEASE_MS) }),
    clock,
    env: { DEFAULT_MODEL: 'echo' },
    model: () => next.model,
    background: (task) => void tasks.push(task),
    startBackground: (run) => runInProcess(services, run),
    log: () => {},
    info: () => {},
  };
  await sessions.create({ id: 's' });
  const { run } = await claimBackgroundTurn(services, 's', { input: 'hello' });
  await inbox.post('s', { name: 'n1.md', content: NOTICE });
  const until = async (done: () => boolean) => {
    for (let step = 0; step < 1000 && !done(); step++) await vi.advanceTimersByTimeAsync(100);
  };
  /** Services of one run over `view` of the store, with `model`. */
  const runServices = (
    view: ObjectStore,
    model: ReturnType<typeof gated>,
    log: TurnServices['log'] = () => {},
  ): TurnServices => ({
    ...services,
    log,
    sessions: new SessionLog(view, { leaseMs: LEASE_MS }),
    inbox: new Inbox(view, { clock, log: () => {}, sessionExists: sessionExistsIn(view, '') }),
    model: () => model.model,
    // What a run leaves to do after its response may meet its view's failures.
    background: (task) => void tasks.push(task.catch(() => undefined)),
  });
  const outcome = async (runner: Promise<string>) => {
    let settled: string | undefined;
    void runner.then((value) => (settled = value));
    await until(() => settled !== undefined);
    return settled;
  };
  return {
    store,
    sessions,
    inbox,
    services,
    run: run!,
    next,
    until,
    outcome,
    runServices,
    advance: async (ms: number) => {
      await vi.advanceTimersByTimeAsync(ms);
      while (tasks.length > 0) await Promise.all(tasks.splice(0));
    },
  };
}

/** Run A moves the notice, then its lease renewals stop landing (until `resumeA`). */
async function firstRun(w: Awaited<ReturnType<typeof world>>) {
  const model = gated();
  const leaseHold = hold();
  let stalled = false;
  const view = runView(w.store, {
    stalled: () => stalled,
    leaseHold: leaseHold.wait,
    afterDelete: (key) => {
      if (key.endsWith('/inbox/n1.md')) stalled = true;
    },
  });
  const outcome = runBackgroundTurn(w.runServices(view, model), w.run);
  await w.until(() => stalled && model.prompts.length === 1);
  expect(model.prompts[0]).toContain(NOTICE);
  return { model, outcome, resume: leaseHold.release };
}

describe('a background run that took a notice over from an earlier run of its turn', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  for (const doneRead of ['fail', 'buried'] as const) {
    it(`cannot read the completion the earlier run closed the turn with (${doneRead}): keeps the notice`, async () => {
      const w = await world();
      const a = await firstRun(w);
      // Posted after A's move: B moves it itself, and gives it back (A's answer did not show it).
      await w.inbox.post('s', { name: 'n2.md', content: 'the second notice' });
      const b = gated();
      const view = runView(w.store, { doneRead });
      const bOutcome = runBackgroundTurn(w.runServices(view, b), w.run);
      await w.until(() => b.prompts.length === 1);
      expect(b.prompts[0]).toContain(NOTICE);
      expect(b.prompts[0]).toContain('the second notice');
      a.model.open();
      expect(await w.outcome(a.outcome)).toBe('done');
      expect((await w.sessions.getTurn('s', 1)).status).toBe('completed');
      b.open();
      expect(await w.outcome(bOutcome)).toBe('done');
      a.resume();
      await w.advance(LEASE_MS);
      const turn = await w.sessions.getTurn('s', 1);
      expect(turn.notices.map((notice) => notice.name)).toEqual(['n1.md']);
      // Delivered by turn 1 (run A's answer) only: not pending again for a later turn, unlike n2.
      expect((await w.inbox.peek('s')).map((notice) => notice.name)).toEqual(['n2.md']);
    });
  }

  it('cannot read the cancel that closed the turn: the next turn takes the notice it kept over, once', async () => {
    const w = await world();
    const a = await firstRun(w);
    const b = gated();
    const logged: string[] = [];
    const bServices = w.runServices(runView(w.store, { doneRead: 'fail' }), b, (line) => logged.push(String(line)));
    const bOutcome = runBackgroundTurn(bServices, w.run);
    await w.until(() => b.prompts.length === 1);
    expect(b.prompts[0]).toContain(NOTICE);
    await w.sessions.cancelTurn('s', 1);
    b.open();
    expect(await w.outcome(bOutcome)).toBe('done');
    expect(logged).toContain('tailgate: could not read the completion that closed a background turn');
    a.model.open();
    expect(await w.outcome(a.outcome)).toBe('done');
    a.resume();
    await w.advance(LEASE_MS);
    expect((await w.sessions.getTurn('s', 1)).status).toBe('cancelled');
    // The cancel names turn 1 among the turns whose notices the next turn takes over.
    const { run } = await claimBackgroundTurn(w.services, 's', { input: 'again' });
    const next = runBackgroundTurn(w.services, run!);
    await w.until(() => w.next.prompts.length === 1);
    expect(w.next.prompts[0]!.split(NOTICE)).toHaveLength(2);
    w.next.open();
    expect(await w.outcome(next)).toBe('done');
    await w.advance(0);
    expect((await w.sessions.getTurn('s', 2)).notices.map((notice) => notice.name)).toEqual(['n1.md']);
    expect(await w.inbox.peek('s')).toEqual([]);
  });

  /**
   * Run A moves the notice and stalls; run B takes its lease and the notice over and stalls too;
   * run C takes B's lease over (its look for the notices earlier runs took waits on `cList`); B
   * learns its lease is C's and stops.
   */
  async function stalledTwice(w: Awaited<ReturnType<typeof world>>) {
    const a = await firstRun(w);
    // Run B takes A's lease and notice over, then its own renewals stop landing.
    const b = gated();
    const bLease = hold();
    let bStalled = false;
    const bView = runView(w.store, { stalled: () => bStalled, leaseHold: bLease.wait });
    const bOutcome = runBackgroundTurn(w.runServices(bView, b), w.run);
    await w.until(() => b.prompts.length === 1);
    expect(b.prompts[0]).toContain(NOTICE);
    bStalled = true;
    // Run C takes B's lease over; its look for the notices earlier runs took waits.
    const c = gated();
    const cList = hold();
    let cListing = false;
    const cView = runView(w.store, { listHold: { wait: cList.wait, reached: () => (cListing = true) } });
    const cOutcome = runBackgroundTurn(w.runServices(cView, c), w.run);
    await w.until(() => cListing);
    expect(cListing).toBe(true);
    // B learns its lease is C's: it stops.
    bLease.release();
    await w.until(() => b.signals[0]?.aborted === true);
    expect(b.signals[0]?.aborted).toBe(true);
    b.open();
    expect(await w.outcome(bOutcome)).toBe('done');
    return { a, c, cList, cOutcome };
  }

  it('loses its lease to a third run, then the first run completes the turn: the notice reaches one turn', async () => {
    const w = await world();
    const { a, c, cList, cOutcome } = await stalledTwice(w);
    // A, stalled all along, completes the turn: its answer showed the notice.
    a.model.open();
    expect(await w.outcome(a.outcome)).toBe('done');
    const turn = await w.sessions.getTurn('s', 1);
    expect(turn.status).toBe('completed');
    expect(turn.notices.map((notice) => notice.name)).toEqual(['n1.md']);
    // Not pending again for a later turn.
    expect(await w.inbox.peek('s')).toEqual([]);
    cList.release();
    c.open();
    expect(await w.outcome(cOutcome)).toBe('done');
    a.resume();
    await w.advance(LEASE_MS);
    expect(await w.inbox.peek('s')).toEqual([]);
    // The next turn does not deliver it again.
    const { run } = await claimBackgroundTurn(w.services, 's', { input: 'again' });
    const next = runBackgroundTurn(w.services, run!);
    await w.until(() => w.next.prompts.length === 1);
    w.next.open();
    expect(await w.outcome(next)).toBe('done');
    await w.advance(0);
    expect((await w.sessions.getTurn('s', 2)).notices).toEqual([]);
  });

  it('loses its lease to a third run, which completes the turn: the notice B kept reaches that turn once', async () => {
    const w = await world();
    const { a, c, cList, cOutcome } = await stalledTwice(w);
    cList.release();
    await w.until(() => c.prompts.length === 1);
    expect(c.prompts[0]).toContain(NOTICE);
    c.open();
    expect(await w.outcome(cOutcome)).toBe('done');
    const turn = await w.sessions.getTurn('s', 1);
    expect(turn.status).toBe('completed');
    expect(turn.notices.map((notice) => notice.name)).toEqual(['n1.md']);
    // A's completion is refused: the notice it moved is C's now, and stays delivered.
    a.model.open();
    expect(await w.outcome(a.outcome)).toBe('done');
    a.resume();
    await w.advance(LEASE_MS);
    expect(await w.inbox.peek('s')).toEqual([]);
    const { run } = await claimBackgroundTurn(w.services, 's', { input: 'again' });
    const next = runBackgroundTurn(w.services, run!);
    await w.until(() => w.next.prompts.length === 1);
    w.next.open();
    expect(await w.outcome(next)).toBe('done');
    await w.advance(0);
    expect((await w.sessions.getTurn('s', 2)).notices).toEqual([]);
  });
});

describe('a background run that took a notice over from an earlier turn closed by someone else', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /** Turn 1 moves the notice and is cancelled (its close names it among the lost turns); turn 2 is claimed. */
  async function cancelledFirst(w: Awaited<ReturnType<typeof world>>) {
    await w.inbox.consume('s', { turn: 1, runner: 'turn-1-run' });
    await w.sessions.cancelTurn('s', 1);
    const { run } = await claimBackgroundTurn(w.services, 's', { input: 'again' });
    return run!;
  }

  /** Turn 3 runs: its receipt shows the notice `times` times, and nothing is left pending. */
  async function thirdTurn(w: Awaited<ReturnType<typeof world>>, times: 0 | 1) {
    const { run } = await claimBackgroundTurn(w.services, 's', { input: 'once more' });
    const next = runBackgroundTurn(w.services, run!);
    await w.until(() => w.next.prompts.length === 1);
    // Shown by turn 2 (its answer is history), or else delivered now.
    if (times === 1) expect(w.next.prompts[0]!.split(NOTICE)).toHaveLength(2);
    w.next.open();
    expect(await w.outcome(next)).toBe('done');
    await w.advance(0);
    const shown = (await w.sessions.getTurn('s', 3)).notices.map((notice) => notice.name);
    expect(shown).toEqual(times === 1 ? ['n1.md'] : []);
    expect(await w.inbox.peek('s')).toEqual([]);
  }

  /**
   * Run A of turn 2 takes the lease and stalls at `stallA` in its takeover of turn 1's notice (its
   * renewals too); run B takes A's lease over, and the notice from turn 1 (or from A); then A goes
   * on and completes turn 2, showing the notice or not (`aShows`); B, its completion refused,
   * cannot read A's (`doneRead`).
   */
  async function raced(
    w: Awaited<ReturnType<typeof world>>,
    stallA: 'list' | 'confirm' | 'prompt',
    doneRead: 'fail' | 'buried',
  ) {
    const run = await cancelledFirst(w);
    const a = gated();
    const aHold = hold();
    const aLease = hold();
    let aStalled = false;
    const reached = () => (aStalled = true);
    const aView = runView(w.store, {
      stalled: () => aStalled,
      leaseHold: aLease.wait,
      ...(stallA === 'list' ? { listHold: { wait: aHold.wait, reached } } : {}),
      ...(stallA === 'confirm'
        ? { putHold: { when: (key) => key.endsWith('-after-2'), wait: aHold.wait, reached } }
        : {}),
    });
    const aOutcome = runBackgroundTurn(w.runServices(aView, a), run);
    if (stallA === 'prompt') {
      await w.until(() => a.prompts.length === 1);
      expect(a.prompts[0]).toContain(NOTICE);
      aStalled = true;
    } else await w.until(() => aStalled);
    expect(aStalled).toBe(true);
    const b = gated();
    const bOutcome = runBackgroundTurn(w.runServices(runView(w.store, { doneRead }), b), run);
    await w.until(() => b.prompts.length === 1);
    aHold.release();
    await w.until(() => a.prompts.length === 1);
    a.open();
    expect(await w.outcome(aOutcome)).toBe('done');
    const turn = await w.sessions.getTurn('s', 2);
    expect(turn.status).toBe('completed');
    b.open();
    expect(await w.outcome(bOutcome)).toBe('done');
    aLease.release();
    await w.advance(LEASE_MS);
    return { a, b, shown: turn.notices.map((notice) => notice.name) };
  }

  for (const doneRead of ['fail', 'buried'] as const) {
    it(`found taken by the first run, which completes without it (${doneRead}): gives it back`, async () => {
      const w = await world();
      const { a, b, shown } = await raced(w, 'list', doneRead);
      expect(b.prompts[0]).toContain(NOTICE);
      expect(a.prompts[0]).not.toContain(NOTICE);
      expect(shown).toEqual([]);
      await thirdTurn(w, 1);
    });

    it(`taken from the first run before it confirmed, completing without it (${doneRead}): gives it back`, async () => {
      const w = await world();
      const { a, b, shown } = await raced(w, 'confirm', doneRead);
      expect(b.prompts[0]).toContain(NOTICE);
      expect(a.prompts[0]).not.toContain(NOTICE);
      expect(shown).toEqual([]);
      await thirdTurn(w, 1);
    });

    it(`taken too after the first run confirmed, which completes showing it (${doneRead}): keeps it`, async () => {
      const w = await world();
      const { a, b, shown } = await raced(w, 'prompt', doneRead);
      expect(a.prompts[0]).toContain(NOTICE);
      expect(b.prompts[0]).toContain(NOTICE);
      expect(shown).toEqual(['n1.md']);
      await thirdTurn(w, 0);
    });
  }
});

describe('a background run that moved a notice a later run of its turn took over', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  // C cannot read the close (`fail`); or a pack buries the close before B and C read it, and both
  // find it packed (`packed`, read from its segment line).
  const cases = [
    {
      close: 'fail',
      title: 'reads a close not showing it: gives it back, though the run that took it over cannot read it',
    },
    {
      close: 'packed',
      title: 'finds the close that did not show it packed, as the run that took it over does: gives it back',
    },
  ] as const;
  for (const { close, title } of cases) {
    it(title, async () => {
      const w = await world();
      // Run A moves the first notice and stalls; the second is posted after.
      const a = await firstRun(w);
      await w.inbox.post('s', { name: 'n2.md', content: 'the second notice' });
      // Run B takes A's lease over, takes the first notice over and moves the second itself; its renewals stall.
      const b = gated();
      const bLease = hold();
      let bStalled = false;
      const bOutcome = runBackgroundTurn(
        w.runServices(runView(w.store, { stalled: () => bStalled, leaseHold: bLease.wait }), b),
        w.run,
      );
      await w.until(() => b.prompts.length === 1);
      expect(b.prompts[0]).toContain('the second notice');
      bStalled = true;
      // Run C takes B's lease and both notices over.
      const c = gated();
      const cView = runView(w.store, close === 'fail' ? { doneRead: 'fail' } : {});
      const cOutcome = runBackgroundTurn(w.runServices(cView, c), w.run);
      await w.until(() => c.prompts.length === 1);
      expect(c.prompts[0]).toContain('the second notice');
      // A, stalled all along, completes the turn showing the first notice only.
      a.model.open();
      expect(await w.outcome(a.outcome)).toBe('done');
      expect((await w.sessions.getTurn('s', 1)).notices.map((notice) => notice.name)).toEqual(['n1.md']);
      if (close === 'packed') {
        for (const text of ['after', 'and after'])
          await w.sessions.append('s', [{ type: 'message', role: 'user', content: text }]);
        await w.sessions.pack('s', { refresh: true });
        const dones = (await listAll(w.store, '')).filter((info) => info.key.endsWith('.done'));
        expect(dones.map((info) => info.size)).toEqual([0]);
      }
      // B learns the turn is closed: the second notice is no close's.
      bLease.release();
      await w.until(() => b.signals[0]?.aborted === true);
      b.open();
      expect(await w.outcome(bOutcome)).toBe('done');
      c.open();
      expect(await w.outcome(cOutcome)).toBe('done');
      a.resume();
      await w.advance(LEASE_MS);
      // The next turn delivers the second notice, once.
      const { run } = await claimBackgroundTurn(w.services, 's', { input: 'again' });
      const next = runBackgroundTurn(w.services, run!);
      await w.until(() => w.next.prompts.length === 1);
      w.next.open();
      expect(await w.outcome(next)).toBe('done');
      await w.advance(0);
      expect((await w.sessions.getTurn('s', 2)).notices.map((notice) => notice.name)).toEqual(['n2.md']);
      expect(await w.inbox.peek('s')).toEqual([]);
    });
  }
});

describe('a background run that took a notice over from a run that took it from the run that moved it', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  for (const doneRead of ['fail', 'buried'] as const) {
    it(`before that run confirmed, then cannot read the close that showed it (${doneRead}): keeps it`, async () => {
      const w = await world();
      // Run A moves the notice and stalls.
      const a = await firstRun(w);
      // Run B takes A's lease and the notice over; its confirmation, and its renewals, wait.
      const b = gated();
      const bHold = hold();
      let bConfirming = false;
      const bView = runView(w.store, {
        stalled: () => bConfirming,
        leaseHold: bHold.wait,
        putHold: { when: (key) => key.endsWith('-after-1'), wait: bHold.wait, reached: () => (bConfirming = true) },
      });
      const bOutcome = runBackgroundTurn(w.runServices(bView, b), w.run);
      await w.until(() => bConfirming);
      expect(bConfirming).toBe(true);
      // Run C takes B's lease and the notice over, confirming first; it cannot read the close.
      const c = gated();
      const cOutcome = runBackgroundTurn(w.runServices(runView(w.store, { doneRead }), c), w.run);
      await w.until(() => c.prompts.length === 1);
      expect(c.prompts[0]).toContain(NOTICE);
      // A, stalled all along, completes the turn showing the notice.
      a.model.open();
      expect(await w.outcome(a.outcome)).toBe('done');
      expect((await w.sessions.getTurn('s', 1)).notices.map((notice) => notice.name)).toEqual(['n1.md']);
      c.open();
      expect(await w.outcome(cOutcome)).toBe('done');
      bHold.release();
      b.open();
      expect(await w.outcome(bOutcome)).toBe('done');
      a.resume();
      await w.advance(LEASE_MS);
      // Shown by turn 1 once: not pending again, and the next turn does not show it.
      expect(await w.inbox.peek('s')).toEqual([]);
      const { run } = await claimBackgroundTurn(w.services, 's', { input: 'again' });
      const next = runBackgroundTurn(w.services, run!);
      await w.until(() => w.next.prompts.length === 1);
      w.next.open();
      expect(await w.outcome(next)).toBe('done');
      await w.advance(0);
      expect((await w.sessions.getTurn('s', 2)).notices).toEqual([]);
    });
  }
});

describe('a background run that moved a notice and died before another run of its turn closed it', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('the earlier run completes the turn not showing it: the next turn delivers it, once', async () => {
    const w = await world();
    // Run A moves the first notice and stalls; the second is posted after.
    const a = await firstRun(w);
    await w.inbox.post('s', { name: 'n2.md', content: 'the second notice' });
    // Run B takes A's lease and the first notice over, moves the second itself, then its process dies.
    const b = gated();
    let dead = false;
    const bOutcome = runBackgroundTurn(w.runServices(runView(w.store, { dead: () => dead }), b), w.run);
    await w.until(() => b.prompts.length === 1);
    expect(b.prompts[0]).toContain(NOTICE);
    expect(b.prompts[0]).toContain('the second notice');
    dead = true;
    void bOutcome.catch(() => undefined);
    // A, stalled all along, completes the turn showing the first notice only: its close is the turn's own.
    a.model.open();
    expect(await w.outcome(a.outcome)).toBe('done');
    expect((await w.sessions.getTurn('s', 1)).notices.map((notice) => notice.name)).toEqual(['n1.md']);
    a.resume();
    await w.advance(LEASE_MS);
    // The second notice is no close's: the next turn delivers it, and the first not again.
    const { run } = await claimBackgroundTurn(w.services, 's', { input: 'again' });
    const next = runBackgroundTurn(w.services, run!);
    await w.until(() => w.next.prompts.length === 1);
    w.next.open();
    expect(await w.outcome(next)).toBe('done');
    await w.advance(0);
    expect((await w.sessions.getTurn('s', 2)).notices.map((notice) => notice.name)).toEqual(['n2.md']);
    expect(await w.inbox.peek('s')).toEqual([]);
  });

  it('the later run completes the turn after the move of the earlier one, dead, landed: it goes back', async () => {
    const w = await world();
    // Run A's move of the notice waits; its renewals stall.
    const a = gated();
    const aPut = hold();
    let aMoving = false;
    let aDead = false;
    let aAfter = false;
    const aView = runView(w.store, {
      stalled: () => aMoving,
      leaseHold: new Promise<void>(() => {}),
      putHold: {
        when: (key) => key.endsWith('/inbox_removed/n1.md'),
        wait: aPut.wait,
        reached: () => (aMoving = true),
      },
      dead: () => {
        if (aDead) aAfter = true;
        return aDead;
      },
    });
    void runBackgroundTurn(w.runServices(aView, a), w.run).catch(() => undefined);
    await w.until(() => aMoving);
    // Run B takes A's lease over and finds no record of A's; its own move waits.
    const b = gated();
    const bPut = hold();
    let bMoving = false;
    const bView = runView(w.store, {
      putHold: {
        when: (key) => key.endsWith('/inbox_removed/n1.md'),
        wait: bPut.wait,
        reached: () => (bMoving = true),
      },
    });
    const bOutcome = runBackgroundTurn(w.runServices(bView, b), w.run);
    await w.until(() => bMoving);
    expect(bMoving).toBe(true);
    // A's move lands, then its process dies (before its delete of the original).
    aDead = true;
    aPut.release();
    await w.until(() => aAfter);
    // B's move finds the notice claimed: it completes the turn showing nothing.
    bPut.release();
    await w.until(() => b.prompts.length === 1);
    expect(b.prompts[0]).not.toContain(NOTICE);
    b.open();
    expect(await w.outcome(bOutcome)).toBe('done');
    await w.advance(LEASE_MS);
    expect((await w.sessions.getTurn('s', 1)).notices).toEqual([]);
    // The notice went back: the next turn delivers it, once.
    const { run } = await claimBackgroundTurn(w.services, 's', { input: 'again' });
    const next = runBackgroundTurn(w.services, run!);
    await w.until(() => w.next.prompts.length === 1);
    expect(w.next.prompts[0]!.split(NOTICE)).toHaveLength(2);
    w.next.open();
    expect(await w.outcome(next)).toBe('done');
    await w.advance(0);
    expect((await w.sessions.getTurn('s', 2)).notices).toHaveLength(1);
    expect(await w.inbox.peek('s')).toEqual([]);
  });
});

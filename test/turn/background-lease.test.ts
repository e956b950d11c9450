import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseServiceConfig } from '../../lib/config.ts';
import { Inbox } from '../../lib/inbox/inbox.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import {
  claimBackgroundTurn,
  runBackgroundTurn,
  runInProcess,
  type BackgroundTurn,
  type TurnObservation,
  type TurnServices,
} from '../../lib/turn/index.ts';
import { journalEvents, type NumberedEvent } from '../../lib/turn/journal.ts';
import { SessionLog } from '../support/session-log.ts';
import { hookedEcho } from '../support/turn-world.ts';

/**
 * A background turn's lease, judged by others while its runner is alive: a second runner of
 * it (a queue message delivered twice) calls the model only when the first's lease misses its
 * renewal; a reader of its events that closes it once its lease ran out ends its journal for
 * everyone, the late owner's events after it being none. Time (the runners' timers: the
 * renewals, the second runner's wait; the clock) is the test's.
 */

const LEASE_MS = 30_000;

/** Session `s` with background turn 1 claimed; its model counts its calls and answers once released. */
async function world() {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
  const clock = () => new Date();
  const store = new MemoryStore({ clock });
  let calls = 0;
  // What each model call was asked to heed (the model below does not: it answers once released).
  const signals: (AbortSignal | undefined)[] = [];
  // What each model call was asked (its signal left out).
  const prompts: string[] = [];
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const model = hookedEcho('echo', async (request) => {
    calls++;
    signals.push(request.signal);
    prompts.push(JSON.stringify({ ...request, signal: undefined }));
    await released;
  });
  const tasks: Promise<unknown>[] = [];
  const observations: TurnObservation[] = [];
  const logged: string[] = [];
  const sessions = new SessionLog(store, { clock, leaseMs: LEASE_MS });
  const inbox = new Inbox(store, { clock, log: () => {}, sessionExists: sessionExistsIn(store, '') });
  const services: TurnServices = {
    sessions,
    inbox,
    config: parseServiceConfig({ TURN_LEASE_MS: String(LEASE_MS) }),
    clock,
    env: { DEFAULT_MODEL: 'echo' },
    model: () => model,
    background: (task) => void tasks.push(task),
    startBackground: (run) => runInProcess(services, run),
    // A line with details is logged with them (a stack on Workers' console), and a routine one
    // goes to the info channel: both kept apart here.
    log: (message, details) => void logged.push(details === undefined ? message : `${message} [with details]`),
    info: (message) => void logged.push(`${message} [info]`),
    observeTurn: (observation) => void observations.push(observation),
  };
  await sessions.create({ id: 's' });
  const { run } = await claimBackgroundTurn(services, 's', { input: 'hello' });
  const until = async (done: () => boolean) => {
    for (let step = 0; step < 1000 && !done(); step++) await vi.advanceTimersByTimeAsync(100);
  };
  return {
    store,
    sessions,
    inbox,
    services,
    run: run!,
    calls: () => calls,
    signals,
    prompts,
    /** What the runners logged. */
    logged,
    /** How each run was told (the log line, the metrics). */
    told: () => observations.map(({ turn, status, error_code }) => ({ turn, status, error_code })),
    release,
    /** Runs the runners' timers until `done` holds (or gives up). */
    until,
    /** What `runner` settles with, its timers run meanwhile. */
    outcome: async (runner: Promise<string>) => {
      let settled: string | undefined;
      void runner.then((outcome) => (settled = outcome));
      await until(() => settled !== undefined);
      return settled;
    },
    /** Lets the runners' timers run for `ms`, then runs what they left to do after their responses. */
    advance: async (ms: number) => {
      await vi.advanceTimersByTimeAsync(ms);
      while (tasks.length > 0) await Promise.all(tasks.splice(0));
    },
  };
}

/** A runner that took the lease of `run` and died (its consumer's isolate went away). */
async function diedHoldingLease(sessions: SessionLog, run: BackgroundTurn) {
  const attempt = await sessions.claimTurn(run.session_id, { input: [], writer: run.writer, adopt: run.turn }).next();
  if (attempt.kind !== 'claimed') throw new Error('expected the open turn');
  await sessions.takeLease(attempt.turn);
}

/** The names of the events the turn's journal holds, in order, its deltas left out. */
async function journaled(sessions: SessionLog, id: string) {
  const batches = await sessions.journal().read(await sessions.scope(id), 1, 0);
  return batches.flatMap((batch) => batch.events.map((event) => event.event)).filter((name) => !name.endsWith('delta'));
}

describe('a background turn delivered twice', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('is run once while its first runner renews its lease: the second calls no model and writes nothing', async () => {
    const { sessions, services, run, calls, told, release, until, outcome, advance, logged } = await world();
    const first = runBackgroundTurn(services, run);
    await until(() => calls() === 1);
    // The first renews its lease within a third of it; the second looks again a little later.
    expect(await outcome(runBackgroundTurn(services, run))).toBe('done');
    expect(calls()).toBe(1);
    // One line, no stack: a message delivered twice is the queue's at-least-once, not a failure.
    expect(logged).toEqual(['tailgate: background turn 1 of session s runs elsewhere [info]']);
    release();
    expect(await outcome(first)).toBe('done');
    await advance(0);
    expect((await sessions.getTurn('s', 1)).status).toBe('completed');
    expect(await journaled(sessions, 's')).toEqual(['turn.started', 'output_item.done', 'turn.completed']);
    // Told once, as the turn it was: the runner that found it running ran no turn.
    expect(told()).toEqual([{ turn: 1, status: 'completed', error_code: null }]);
  });

  it('is run once when its first runner completes it while the second waits a renewal for it', async () => {
    const { sessions, services, run, calls, told, release, until, outcome, advance, logged } = await world();
    const first = runBackgroundTurn(services, run);
    await until(() => calls() === 1);
    const second = runBackgroundTurn(services, run);
    // The first completes before its next renewal: the lease the second waits on is not renewed.
    release();
    expect(await outcome(first)).toBe('done');
    expect(await outcome(second)).toBe('done');
    expect(calls()).toBe(1);
    expect(logged).toEqual(['tailgate: background turn 1 of session s is closed already [info]']);
    await advance(100);
    expect((await sessions.getTurn('s', 1)).status).toBe('completed');
    expect(await journaled(sessions, 's')).toEqual(['turn.started', 'output_item.done', 'turn.completed']);
    expect(told()).toEqual([{ turn: 1, status: 'completed', error_code: null }]);
  });

  it('is taken over once the lease a dead runner left misses its renewal, long before it runs out', async () => {
    const { sessions, services, run, calls, release, until, outcome, advance } = await world();
    await diedHoldingLease(sessions, run);
    const second = runBackgroundTurn(services, run);
    await until(() => calls() === 1);
    release();
    expect(await outcome(second)).toBe('done');
    await advance(0);
    expect((await sessions.getTurn('s', 1)).status).toBe('completed');
  });

  it('by two late runners after a dead one is run by one of them', async () => {
    const { sessions, services, run, calls, release, until, advance } = await world();
    await diedHoldingLease(sessions, run);
    const outcomes: string[] = [];
    for (const runner of [runBackgroundTurn(services, run), runBackgroundTurn(services, run)])
      void runner.then((outcome) => void outcomes.push(outcome));
    // One of them takes the lease over and calls the model; the other stops.
    await until(() => calls() === 1 && outcomes.length === 1);
    await advance(LEASE_MS);
    expect(calls()).toBe(1);
    release();
    await until(() => outcomes.length === 2);
    expect(outcomes).toEqual(['done', 'done']);
    await advance(0);
    expect((await sessions.getTurn('s', 1)).status).toBe('completed');
    expect(await journaled(sessions, 's')).toEqual(['turn.started', 'output_item.done', 'turn.completed']);
  });
});

describe('a background runner alive but late on its renewals', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('stops once a second runner took its lease over, storing nothing, and leaves that lease alone', async () => {
    const { store, services, sessions, run, calls, signals, told, release, until, outcome, advance } = await world();
    // The first runner's process: its lease puts fail for a while (its store is slow to answer).
    let late = false;
    const its = new FaultyStore(store).failWhen(
      ({ operation, key }) => late && operation === 'put' && key.endsWith('.lease'),
    );
    const first = runBackgroundTurn({ ...services, sessions: new SessionLog(its, { leaseMs: LEASE_MS }) }, run);
    await until(() => calls() === 1);
    late = true;
    // Not renewed within a renewal and a tenth: the second takes the lease over and runs the turn.
    const second = runBackgroundTurn(services, run);
    await until(() => calls() === 2);
    /** The `writer` an object of the turn carries (a lease's in its metadata, a completion's in its body). */
    const writerOf = async (suffix: string) => {
      const key = (await store.list('')).objects.find((object) => object.key.endsWith(suffix))!.key;
      const object = (await store.get(key))!;
      return suffix === '.lease' ? object.metadata.writer : JSON.parse(new TextDecoder().decode(object.body)).writer;
    };
    const holder = await writerOf('.lease');
    // The first's next renewal lands: refused, it learns the lease is another's and stops its model call.
    late = false;
    await until(() => signals[0]?.aborted === true);
    expect(signals.map((signal) => signal?.aborted)).toEqual([true, false]);
    expect(await writerOf('.lease')).toBe(holder);
    // Its model answers after all (it did not heed the abort): it stores nothing, the second completes the turn.
    release();
    expect(await outcome(first)).toBe('done');
    expect(await outcome(second)).toBe('done');
    await advance(0);
    expect((await sessions.getTurn('s', 1)).status).toBe('completed');
    expect(await writerOf('.done')).toBe(holder);
    expect(told()).toEqual([{ turn: 1, status: 'completed', error_code: null }]);
  });

  it("stops as well when it cannot read the turn's completion then: the turn is the other runner's", async () => {
    const { store, services, sessions, run, calls, signals, release, until, outcome, advance } = await world();
    let late = false;
    let unreadable = false;
    const its = new FaultyStore(store)
      .failWhen(({ operation, key }) => late && operation === 'put' && key.endsWith('.lease'))
      .failWhen(({ operation, key }) => unreadable && operation === 'get' && key.endsWith('.done'));
    const first = runBackgroundTurn({ ...services, sessions: new SessionLog(its, { leaseMs: LEASE_MS }) }, run);
    await until(() => calls() === 1);
    late = true;
    const second = runBackgroundTurn(services, run);
    await until(() => calls() === 2);
    // Its next renewal is refused (the lease is the second's); its read of the turn's completion fails.
    late = false;
    unreadable = true;
    await until(() => signals[0]?.aborted === true);
    expect(signals.map((signal) => signal?.aborted)).toEqual([true, false]);
    unreadable = false;
    release();
    expect(await outcome(first)).toBe('done');
    expect(await outcome(second)).toBe('done');
    await advance(0);
    expect((await sessions.getTurn('s', 1)).status).toBe('completed');
  });
});

describe('a background runner whose renewal answers were lost', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('finds its own lease when it reads it back, and runs on', async () => {
    const { store, services, sessions, run, calls, signals, release, until, outcome, advance } = await world();
    // A renewal lands, its answer lost, and the read back fails too: the next renewal, on the etag
    // before it, is refused; the lease read back carries the runner's writer, so it renews on from there.
    let lost = false;
    const lease = (operation: string) => (call: { operation: string; key: string }) =>
      lost && call.operation === operation && call.key.endsWith('.lease');
    const its = new FaultyStore(store)
      .failWhen(lease('put'), { after: true, times: 1 })
      .failWhen(lease('head'), { times: 1 });
    const runner = runBackgroundTurn({ ...services, sessions: new SessionLog(its, { leaseMs: LEASE_MS }) }, run);
    await until(() => calls() === 1);
    lost = true;
    await vi.advanceTimersByTimeAsync(3 * LEASE_MS);
    expect(its.injected).toBe(2);
    expect(signals[0]?.aborted).toBe(false);
    release();
    expect(await outcome(runner)).toBe('done');
    await advance(0);
    expect((await sessions.getTurn('s', 1)).status).toBe('completed');
  });
});

describe('a reader closing a background turn whose lease ran out while its owner is late', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("ends the journal the same way for every reader: the owner writes nothing after the reader's end", async () => {
    const { store, sessions, services, run, calls, release, until, outcome, advance } = await world();
    const owner = runBackgroundTurn(services, run);
    await until(() => calls() === 1);
    // Its first batch (turn.started) is written a second later.
    await vi.advanceTimersByTimeAsync(1500);
    // The reader: a process of its own over the same store.
    const reading: TurnServices = { ...services, sessions: new SessionLog(store, { leaseMs: LEASE_MS }) };
    /** The rest of what `events` gives, its timers run meanwhile (a follower looks again every half second). */
    const rest = async (events: AsyncGenerator<NumberedEvent>) => {
      const got: NumberedEvent[] = [];
      let ended = false;
      void (async () => {
        for await (const event of events) got.push(event);
        ended = true;
      })();
      await until(() => ended);
      return got;
    };
    const all = (after: number) => rest(journalEvents(reading, 's', 1, after));
    const follower = journalEvents(reading, 's', 1, 0);
    const first = (await follower.next()).value as NumberedEvent;
    expect(first).toMatchObject({ n: 1, event: 'turn.started' });
    // The owner is alive but late: its lease ran out by the clock before its renewal came.
    vi.setSystemTime(Date.now() + 2 * LEASE_MS);
    const closing = await rest(follower);
    expect(closing).toEqual([
      // Numbered past what the owner, alive, may stream to a client of its own meanwhile.
      { n: 100_002, event: 'error', data: { error: expect.objectContaining({ code: 'lease_expired' }) } },
    ]);
    // The owner answers now: its completion is refused, and its events come after the reader's end.
    release();
    expect(await outcome(owner)).toBe('done');
    await advance(0);
    expect(await sessions.getTurn('s', 1)).toMatchObject({ status: 'failed', error: { code: 'lease_expired' } });
    expect(await all(0)).toEqual([first, ...closing]);
    expect(await all(1)).toEqual(closing);
    // Its refused batch found the reader's end there: it wrote no other.
    expect(await sessions.journal().read(await sessions.scope('s'), 1, 0)).toHaveLength(2);
  });
});

describe('a background runner that stops with its turn left open (the queue delivers it again)', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /**
   * Runs turn 1 to a retry in a process whose `.done` puts fail (its completion, then its close as
   * failed), and whose `.lease` puts fail from then on when `releaseFails` (its release with them).
   */
  async function leftOpen(opened: Awaited<ReturnType<typeof world>>, releaseFails = false) {
    const { store, services, run, release, outcome } = opened;
    let closing = false;
    const its = new FaultyStore(store).failWhen(({ operation, key }) => {
      if (operation === 'put' && key.endsWith('.done')) closing = true;
      return operation === 'put' && (key.endsWith('.done') || (releaseFails && closing && key.endsWith('.lease')));
    });
    release();
    return outcome(runBackgroundTurn({ ...services, sessions: new SessionLog(its, { leaseMs: LEASE_MS }) }, run));
  }

  /**
   * The next delivery's runner, given less time than the renewal it waits for a live lease (a
   * third of it and a tenth more): whether it called the model in that time.
   */
  async function redelivered(opened: Awaited<ReturnType<typeof world>>) {
    const { services, run, calls } = opened;
    const next = runBackgroundTurn(services, run);
    for (let step = 0; step < 10 && calls() < 2; step++) await vi.advanceTimersByTimeAsync(100);
    return { next, calledAtOnce: calls() === 2 };
  }

  it('gives its lease up: the next delivery takes the turn over at once, not a renewal later', async () => {
    const opened = await world();
    const { sessions, outcome, advance } = opened;
    expect(await leftOpen(opened)).toBe('retry');
    const { next, calledAtOnce } = await redelivered(opened);
    expect(calledAtOnce).toBe(true);
    expect(await outcome(next)).toBe('done');
    await advance(0);
    expect((await sessions.getTurn('s', 1)).status).toBe('completed');
  });

  it('whose release fails leaves its lease live: the next delivery takes it over a renewal later', async () => {
    const opened = await world();
    const { sessions, calls, outcome, advance } = opened;
    expect(await leftOpen(opened, true)).toBe('retry');
    const { next, calledAtOnce } = await redelivered(opened);
    expect(calledAtOnce).toBe(false);
    expect(await outcome(next)).toBe('done');
    expect(calls()).toBe(2);
    await advance(0);
    expect((await sessions.getTurn('s', 1)).status).toBe('completed');
  });

  it('in this process (nothing delivers it again) keeps its lease as its last renewal left it', async () => {
    const { store, services, run, release, advance } = await world();
    const leases = async () => {
      const { objects } = await store.list('');
      const lease = objects.find(({ key }) => key.endsWith('.lease'));
      return lease && (await store.get(lease.key));
    };
    const its = new FaultyStore(store).failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.done'));
    await runInProcess({ ...services, sessions: new SessionLog(its, { leaseMs: LEASE_MS }) }, run);
    await vi.advanceTimersByTimeAsync(1_000);
    const held = await leases();
    expect(held?.metadata.writer).toBeDefined();
    release();
    await advance(0);
    const left = await leases();
    // Not given up: a release would push its expiry a whole lease on, for no runner to take.
    expect(left?.etag).toBe(held?.etag);
    expect(left?.metadata.released).toBeUndefined();
  });

  it('that gives its lease up while a second delivery waits a renewal for it lets that one take it over', async () => {
    const { store, sessions, services, run, calls, release, until, outcome, advance } = await world();
    const its = new FaultyStore(store).failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.done'));
    const first = runBackgroundTurn({ ...services, sessions: new SessionLog(its, { leaseMs: LEASE_MS }) }, run);
    await until(() => calls() === 1);
    // The second finds the first's lease live and waits a renewal (a third of the lease and a tenth).
    const second = runBackgroundTurn(services, run);
    await vi.advanceTimersByTimeAsync(1_000);
    release();
    expect(await outcome(first)).toBe('retry');
    // Given up, not renewed: the second runs the turn instead of leaving it to a third delivery.
    expect(await outcome(second)).toBe('done');
    expect(calls()).toBe(2);
    await advance(0);
    expect((await sessions.getTurn('s', 1)).status).toBe('completed');
  });
});

describe('a background turn cancelled while queued', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('is not run: its runner calls no model and logs one line, no stack', async () => {
    const { sessions, services, run, calls, logged, outcome } = await world();
    await sessions.cancelTurn('s', 1);
    expect(await outcome(runBackgroundTurn(services, run))).toBe('done');
    expect(calls()).toBe(0);
    expect(logged).toEqual(['tailgate: background turn 1 of session s is closed already [info]']);
  });
});

describe('a background turn delivered again after it ended', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('is a duplicate: the late runner calls no model, writes nothing, and is not told as a turn', async () => {
    const { sessions, services, run, calls, told, logged, release, outcome, advance } = await world();
    release();
    expect(await outcome(runBackgroundTurn(services, run))).toBe('done');
    await advance(0);
    const journal = await journaled(sessions, 's');
    expect(await outcome(runBackgroundTurn(services, run))).toBe('done');
    await advance(0);
    expect(calls()).toBe(1);
    expect(await journaled(sessions, 's')).toEqual(journal);
    expect(told()).toEqual([{ turn: 1, status: 'completed', error_code: null }]);
    expect(logged).toEqual(['tailgate: background turn 1 of session s is closed already [info]']);
  });
});

describe('a lease given up', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('is taken over by one of two runners taking it in the millisecond it was given up in', async () => {
    // The clock stands still: each takeover would write the lease as the release wrote it.
    const { sessions, run } = await world();
    const attempt = await sessions.claimTurn(run.session_id, { input: [], writer: run.writer, adopt: run.turn }).next();
    if (attempt.kind !== 'claimed') throw new Error('expected the open turn');
    const { etag } = await sessions.takeLease(attempt.turn);
    expect(await sessions.releaseHeldLease(attempt.turn, etag)).toBe(true);
    const taken = await Promise.allSettled([sessions.takeLease(attempt.turn), sessions.takeLease(attempt.turn)]);
    expect(taken.map((outcome) => outcome.status).sort()).toEqual(['fulfilled', 'rejected']);
  });
});

/**
 * `store` as a runner's process sees it: once `holds()` says so, each call it makes waits until
 * `resume` is called (never: the process died mid-call), as a storage call that does not answer.
 */
function heldStore(store: MemoryStore, holds: (operation: string, key: unknown) => boolean) {
  let resume!: () => void;
  const resumed = new Promise<void>((resolve) => (resume = resolve));
  let held = false;
  const its = new Proxy(store, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property);
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        if (held) await resumed;
        const result: unknown = await value.apply(target, args);
        if (holds(String(property), args[0])) held = true;
        return result;
      };
    },
  });
  return { its, resume };
}

/** `w`'s services, its session log and inbox over `store` (a process's view of `w.store`). */
function servicesOver(w: Awaited<ReturnType<typeof world>>, store: MemoryStore): TurnServices {
  const options = { clock: () => new Date(), log: () => {}, sessionExists: sessionExistsIn(store, '') };
  return { ...w.services, sessions: new SessionLog(store, { leaseMs: LEASE_MS }), inbox: new Inbox(store, options) };
}

describe('a background runner that stops answering after it moved a notice', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /** Turn 1's first runner, in a process whose storage calls hold once it deleted notice `n1.md` from the inbox. */
  async function firstRunnerHeld(w: Awaited<ReturnType<typeof world>>) {
    const moved = (operation: string, key: unknown) => operation === 'delete' && String(key).endsWith('/inbox/n1.md');
    const { its, resume } = heldStore(w.store, moved);
    const services = servicesOver(w, its);
    const first = runBackgroundTurn(services, w.run);
    await w.until(() => w.calls() === 1);
    return { first, resume };
  }

  it('leaves the notice to the runner that takes its lease over: it reaches that run and no later turn', async () => {
    const w = await world();
    await w.inbox.post('s', { name: 'n1.md', content: 'the first notice' });
    await firstRunnerHeld(w);
    expect(w.prompts[0]).toContain('the first notice');
    // Its lease is not renewed: the second runner takes it over and runs turn 1.
    const second = runBackgroundTurn(w.services, w.run);
    await w.until(() => w.calls() === 2);
    expect(w.prompts[1]).toContain('the first notice');
    w.release();
    expect(await w.outcome(second)).toBe('done');
    await w.advance(0);
    expect((await w.sessions.getTurn('s', 1)).status).toBe('completed');
    expect(await w.inbox.peek('s')).toEqual([]);
  });

  it('that gives its notices back once it answers again leaves alone the one the second runner took over', async () => {
    const w = await world();
    await w.inbox.post('s', { name: 'n1.md', content: 'the first notice' });
    const { first, resume } = await firstRunnerHeld(w);
    const second = runBackgroundTurn(w.services, w.run);
    await w.until(() => w.calls() === 2);
    expect(w.prompts[1]).toContain('the first notice');
    // Its calls answer again: its next renewal is refused, and it stops, giving back what it took.
    resume();
    await w.until(() => w.signals[0]?.aborted === true);
    w.release();
    expect(await w.outcome(first)).toBe('done');
    expect(await w.outcome(second)).toBe('done');
    await w.advance(0);
    expect((await w.sessions.getTurn('s', 1)).status).toBe('completed');
    // Delivered by turn 1 (its second run) only: not posted again for a later turn.
    expect(await w.inbox.peek('s')).toEqual([]);
  });
});

describe("a background turn's delivery records", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /** `w`'s services over a store that records the prefix of each listing of `inbox_removed/`. */
  function listingRemoved(w: Awaited<ReturnType<typeof world>>) {
    const listed: string[] = [];
    // Never held: it only records what its calls list.
    const { its } = heldStore(w.store, (operation, key) => {
      if (operation === 'list' && String(key).includes('/inbox_removed/')) listed.push(String(key));
      return false;
    });
    return { services: servicesOver(w, its), listed };
  }

  it('are not read by its first run, which takes nothing over', async () => {
    const w = await world();
    await w.inbox.post('s', { name: 'n1.md', content: 'the first notice' });
    const { services, listed } = listingRemoved(w);
    const first = runBackgroundTurn(services, w.run);
    await w.until(() => w.calls() === 1);
    expect(w.prompts[0]).toContain('the first notice');
    w.release();
    expect(await w.outcome(first)).toBe('done');
    await w.advance(0);
    expect((await w.sessions.getTurn('s', 1)).status).toBe('completed');
    expect(listed).toEqual([]);
  });

  it('are read by a run that took the lease over from a dead one, and again after its close', async () => {
    const w = await world();
    await diedHoldingLease(w.sessions, w.run);
    const { services, listed } = listingRemoved(w);
    const second = runBackgroundTurn(services, w.run);
    await w.until(() => w.calls() === 1);
    w.release();
    expect(await w.outcome(second)).toBe('done');
    // Once before it moves a notice, and once after its close: a move of the dead run may land between.
    expect(listed).toEqual([expect.stringMatching(/\/inbox_removed\/$/), expect.stringMatching(/\/inbox_removed\/$/)]);
  });
});

import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseServiceConfig } from '../../lib/config.ts';
import { Inbox } from '../../lib/inbox/inbox.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { claimBackgroundTurn, runBackgroundTurn, runInProcess, type TurnServices } from '../../lib/turn/index.ts';
import { SessionLog } from '../support/session-log.ts';
import { hookedEcho } from '../support/turn-world.ts';

/**
 * A background turn's first run A moves a notice, then its lease renewals stop landing (its
 * store does not answer them): a second run B takes the lease over and the notice with it.
 * A then closes the turn (completed, or failed) before a renewal tells it the lease is B's, so
 * B's completion is refused. The notice reaches one turn: A's answer showed it, or A's failed
 * completion carries it on to the next turn; B keeps it (it gives back nothing the close
 * accounts for). Time (the runners' timers, the clock) is the test's.
 */

const LEASE_MS = 30_000;
const NOTICE = 'the first notice';

/** Session `s` with notice `n1.md` and background turn 1 claimed; each run's model answers once its gate opens. */
async function world() {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
  const clock = () => new Date();
  const store = new MemoryStore({ clock });
  const tasks: Promise<unknown>[] = [];
  const sessions = new SessionLog(store, { clock, leaseMs: LEASE_MS });
  const inbox = new Inbox(store, { clock, log: () => {}, sessionExists: sessionExistsIn(store, '') });
  /** A model that records each call and answers once `open` (or fails with `fail`). */
  const gated = () => {
    const prompts: string[] = [];
    // What each call was asked to heed (it does not: it answers once its gate opens).
    const signals: (AbortSignal | undefined)[] = [];
    let open!: () => void;
    let fail!: (error: Error) => void;
    const gate = new Promise<void>((resolve, reject) => {
      open = resolve;
      fail = reject;
    });
    const model = hookedEcho('echo', async (request) => {
      prompts.push(JSON.stringify({ ...request, signal: undefined }));
      signals.push(request.signal);
      await gate;
    });
    return { model, prompts, signals, open, fail };
  };
  const second = gated();
  const services: TurnServices = {
    sessions,
    inbox,
    config: parseServiceConfig({ TURN_LEASE_MS: String(LEASE_MS) }),
    clock,
    env: { DEFAULT_MODEL: 'echo' },
    model: () => second.model,
    background: (task) => void tasks.push(task),
    startBackground: (run) => runInProcess(services, run),
    log: () => {},
    info: () => {},
  };
  await sessions.create({ id: 's' });
  const { run } = await claimBackgroundTurn(services, 's', { input: 'hello' });
  await inbox.post('s', { name: 'n1.md', content: NOTICE });
  const until = async (done: () => boolean) => {
    for (let step = 0; step < 1000 && !done(); step++) {
      await vi.advanceTimersByTimeAsync(100);
    }
  };
  // Run A: over a store whose lease puts do not answer once it moved the notice out of the inbox.
  let stalled = false;
  // Run A's completion puts wait for `doneHeld.gate` while it is set; its webhook event fails once `eventFails` is set.
  const doneHeld: { gate?: Promise<void> } = {};
  const eventFails = { on: false };
  // Run A's completion put lands unanswered once `doneLost.on` is set, and its read of the key then fails once.
  const doneLost = { on: false, read: false };
  let resume!: () => void;
  const resumed = new Promise<void>((resolve) => (resume = resolve));
  const its = new Proxy(store, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property);
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        const key = typeof args[0] === 'string' ? args[0] : '';
        if (stalled && property === 'put' && key.endsWith('.lease')) await resumed;
        if (property === 'put' && key.endsWith('.done') && doneHeld.gate) await doneHeld.gate;
        if (property === 'get' && key.endsWith('.done') && doneLost.read) {
          doneLost.read = false;
          throw new Error('the read failed');
        }
        const result: unknown = await value.apply(target, args);
        if (property === 'put' && key.endsWith('.done') && doneLost.on) {
          doneLost.on = false;
          doneLost.read = true;
          throw new Error('the answer was lost');
        }
        if (property === 'delete' && key.endsWith('/inbox/n1.md')) stalled = true;
        return result;
      };
    },
  });
  const first = gated();

  const options = { clock, log: () => {}, sessionExists: sessionExistsIn(its, '') };
  const servicesA: TurnServices = {
    ...services,
    // Its turn's webhook event fails once `eventFails` is set (no intent stored: its close throws).
    sessions: new SessionLog(its, {
      leaseMs: LEASE_MS,
      onClosed: async () => {
        if (eventFails.on) throw new Error('the webhook event failed');
      },
    }),
    inbox: new Inbox(its, options),
    model: () => first.model,
  };
  return {
    store,
    sessions,
    inbox,
    services,
    run: run!,
    first,
    second,
    eventFails,
    doneHeld,
    doneLost,
    /** Starts run A and waits until it moved the notice and called its model (its outcome wrapped: not awaited). */
    startFirst: async () => {
      const outcome = runBackgroundTurn(servicesA, run!);
      await until(() => stalled && first.prompts.length === 1);
      return { outcome };
    },
    resume,
    until,
    outcome: async (runner: Promise<string>) => {
      let settled: string | undefined;
      void runner.then((outcome) => (settled = outcome));
      await until(() => settled !== undefined);
      return settled;
    },
    /** Lets the timers run for `ms`, then runs what the runs left to do after their responses. */
    advance: async (ms: number) => {
      await vi.advanceTimersByTimeAsync(ms);
      while (tasks.length > 0) await Promise.all(tasks.splice(0));
    },
  };
}

/**
 * The run refused at its end stored its model call's spend as a charge: the completion of the
 * other run names nothing unbilled, so no write would count it from `spent/` (docs/STORAGE.md,
 * "Stopped spend"). The session's totals count it beside the completed turn's usage, once: a
 * read shows it, the next write counts it, and the one after that deletes it.
 */
async function expectCharged(w: Awaited<ReturnType<typeof world>>) {
  expect((await w.store.list('sessions/s/spent/', { limit: 10 })).objects).toEqual([]);
  const charges = await chargesOf(w);
  expect(charges).toHaveLength(1);
  const charged = charges[0]!.usage.input_tokens;
  expect(charged).toBeGreaterThan(0);
  const turn = await w.sessions.getTurn('s', 1);
  const expected = turn.usage!.input_tokens + charged;
  expect((await w.sessions.get('s')).usage.input_tokens).toBe(expected);
  for (const content of ['one', 'two']) {
    await w.sessions.append('s', [{ type: 'message', role: 'user', content }]);
    expect((await w.sessions.get('s')).usage.input_tokens).toBe(expected);
  }
  expect(await chargesOf(w)).toEqual([]);
}

/** The charges stored for session `s` (log/charges.ts). */
async function chargesOf(w: Awaited<ReturnType<typeof world>>) {
  const listed = (await w.store.list('sessions/s/', { limit: 1000 })).objects.filter((object) =>
    /\/-charge-[0-9a-f]+$/.test(object.key),
  );
  return Promise.all(
    listed.map(async ({ key }) => JSON.parse(new TextDecoder().decode((await w.store.get(key))!.body))),
  );
}

/** How many times `text` occurs in `within`. */
function occurrences(within: string, text: string): number {
  return within.split(text).length - 1;
}

describe('a background run that stalled and closes its turn after another run took its lease over', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /** Runs A and B up to B's model call: B took A's lease and its notice over. */
  async function takenOver(w: Awaited<ReturnType<typeof world>>) {
    const { outcome: a } = await w.startFirst();
    expect(w.first.prompts[0]).toContain(NOTICE);
    const b = runBackgroundTurn(w.services, w.run);
    await w.until(() => w.second.prompts.length === 1);
    expect(w.second.prompts[0]).toContain(NOTICE);
    return { a, b };
  }

  it('completed it: the notice its answer showed is not given back by the run refused at its completion', async () => {
    const w = await world();
    const a = (await w.startFirst()).outcome;
    // A notice posted after A's move: B moves it itself, and gives it back (A's answer did not show it).
    await w.inbox.post('s', { name: 'n2.md', content: 'the second notice' });
    const b = runBackgroundTurn(w.services, w.run);
    await w.until(() => w.second.prompts.length === 1);
    expect(w.second.prompts[0]).toContain(NOTICE);
    expect(w.second.prompts[0]).toContain('the second notice');
    w.first.open();
    expect(await w.outcome(a)).toBe('done');
    expect((await w.sessions.getTurn('s', 1)).status).toBe('completed');
    w.second.open();
    expect(await w.outcome(b)).toBe('done');
    w.resume();
    await w.advance(LEASE_MS);
    const turn = await w.sessions.getTurn('s', 1);
    expect(turn.status).toBe('completed');
    expect(turn.notices.map((notice) => notice.name)).toEqual(['n1.md']);
    // Delivered by turn 1 (run A's answer) only: not pending again for a later turn, unlike n2.
    expect((await w.inbox.peek('s')).map((notice) => notice.name)).toEqual(['n2.md']);
    await expectCharged(w);
  });

  it('completed it, which the other run learns at its next renewal: that run keeps the notice as well', async () => {
    const w = await world();
    const { a, b } = await takenOver(w);
    w.first.open();
    expect(await w.outcome(a)).toBe('done');
    // B's next renewal finds the turn closed and stops its model call before it answers.
    await w.until(() => w.second.signals[0]?.aborted === true);
    expect(w.second.signals[0]?.aborted).toBe(true);
    w.second.open();
    expect(await w.outcome(b)).toBe('done');
    w.resume();
    await w.advance(LEASE_MS);
    expect((await w.sessions.getTurn('s', 1)).status).toBe('completed');
    expect(await w.inbox.peek('s')).toEqual([]);
    await expectCharged(w);
  });

  it('completed it, then the other run fails: the notice that run moved itself goes back to the inbox', async () => {
    const w = await world();
    const a = (await w.startFirst()).outcome;
    await w.inbox.post('s', { name: 'n2.md', content: 'the second notice' });
    const b = runBackgroundTurn(w.services, w.run);
    await w.until(() => w.second.prompts.length === 1);
    expect(w.second.prompts[0]).toContain('the second notice');
    w.first.open();
    expect(await w.outcome(a)).toBe('done');
    // B's model fails before a renewal tells it the turn is closed: its failed completion is refused.
    w.second.fail(new Error('the provider failed'));
    expect(await w.outcome(b)).toBe('done');
    w.resume();
    await w.advance(LEASE_MS);
    expect((await w.sessions.getTurn('s', 1)).status).toBe('completed');
    expect((await w.inbox.peek('s')).map((notice) => notice.name)).toEqual(['n2.md']);
    // Its provider failed the call outright, which bills nothing: nothing stored, nothing counted.
    expect((await w.store.list('sessions/s/spent/', { limit: 10 })).objects).toEqual([]);
    expect(await chargesOf(w)).toEqual([]);
    const turn = await w.sessions.getTurn('s', 1);
    expect((await w.sessions.get('s')).usage.input_tokens).toBe(turn.usage?.input_tokens);
  });

  it("cancelled while both runs called their models: each run's spend counts once (stored, charged)", async () => {
    const w = await world();
    const { a, b } = await takenOver(w);
    // The cancel's completion names the turn unbilled: the runs it refuses store what they spent,
    // the first at the turn's `spent/` key, the other (finding it taken) as a charge.
    await w.sessions.cancelTurn('s', 1);
    w.first.open();
    w.second.open();
    expect(await w.outcome(a)).toBe('done');
    expect(await w.outcome(b)).toBe('done');
    w.resume();
    await w.advance(LEASE_MS);
    expect((await w.sessions.getTurn('s', 1)).status).toBe('cancelled');
    const stored = (await w.store.list('sessions/s/spent/', { limit: 10 })).objects;
    expect(stored).toHaveLength(1);
    const spent = JSON.parse(new TextDecoder().decode((await w.store.get(stored[0]!.key))!.body));
    expect(spent.usage.input_tokens).toBeGreaterThan(0);
    const charges = await chargesOf(w);
    expect(charges).toHaveLength(1);
    const both = spent.usage.input_tokens + charges[0]!.usage.input_tokens;
    expect(charges[0]!.usage.input_tokens).toBeGreaterThan(0);
    const { run } = await claimBackgroundTurn(w.services, 's', { input: 'again' });
    const next = runBackgroundTurn(w.services, run!);
    await w.until(() => w.second.prompts.length === 2);
    expect(await w.outcome(next)).toBe('done');
    await w.advance(0);
    const turn = await w.sessions.getTurn('s', 2);
    await w.sessions.append('s', [{ type: 'message', role: 'user', content: 'after' }]);
    const session = await w.sessions.get('s');
    expect(session.usage.input_tokens).toBe(both + turn.usage!.input_tokens);
    expect(await chargesOf(w)).toEqual([]);
  });

  it('learns that its lease was taken over and stops: the next run completes it, its own spend charged', async () => {
    const w = await world();
    const { a, b } = await takenOver(w);
    // A's renewals land again: refused (the lease is B's, the turn still open), so A stops its call.
    w.resume();
    await w.until(() => w.first.signals[0]?.aborted === true);
    expect(w.first.signals[0]?.aborted).toBe(true);
    w.first.fail(new Error('aborted'));
    expect(await w.outcome(a)).toBe('done');
    w.second.open();
    expect(await w.outcome(b)).toBe('done');
    await w.advance(LEASE_MS);
    expect((await w.sessions.getTurn('s', 1)).status).toBe('completed');
    await expectCharged(w);
  });

  it('completes it as it learns its lease was taken over, its event failing: its call counted once', async () => {
    const w = await world();
    const { a, b } = await takenOver(w);
    // A's model answers, and its completion's put waits until its renewal found the lease B's.
    let release!: () => void;
    w.doneHeld.gate = new Promise<void>((resolve) => (release = resolve));
    w.eventFails.on = true;
    w.first.open();
    w.resume();
    await w.until(() => w.first.signals[0]?.aborted === true);
    expect(w.first.signals[0]?.aborted).toBe(true);
    release();
    // A's completion lands (it counts A's call), and only its webhook event fails.
    expect(await w.outcome(a)).toBe('done');
    expect((await w.sessions.getTurn('s', 1)).status).toBe('completed');
    w.second.open();
    expect(await w.outcome(b)).toBe('done');
    await w.advance(LEASE_MS);
    await expectCharged(w);
  });

  it('completes it unseen as it learns its lease was taken over (a lost answer): its call counted once', async () => {
    const w = await world();
    const { a, b } = await takenOver(w);
    // A's model answers, and its completion's put waits until its renewal found the lease B's;
    // it lands, its answer lost, and A's read of it fails: A takes it as not landed.
    let release!: () => void;
    w.doneHeld.gate = new Promise<void>((resolve) => (release = resolve));
    w.doneLost.on = true;
    w.first.open();
    w.resume();
    await w.until(() => w.first.signals[0]?.aborted === true);
    release();
    await w.outcome(a);
    expect((await w.sessions.getTurn('s', 1)).status).toBe('completed');
    w.second.open();
    expect(await w.outcome(b)).toBe('done');
    await w.advance(LEASE_MS);
    // A's completion counted A's call; only B's is a charge.
    await expectCharged(w);
  });

  it('failed it: its failed completion carries the notice on, which the next turn delivers once', async () => {
    const w = await world();
    const { a, b } = await takenOver(w);
    w.first.fail(new Error('the provider failed'));
    expect(await w.outcome(a)).toBe('done');
    expect((await w.sessions.getTurn('s', 1)).status).toBe('failed');
    w.second.open();
    expect(await w.outcome(b)).toBe('done');
    w.resume();
    await w.advance(LEASE_MS);
    expect((await w.sessions.getTurn('s', 1)).status).toBe('failed');
    expect(await w.inbox.peek('s')).toEqual([]);
    // The next turn delivers it, once.
    const { run } = await claimBackgroundTurn(w.services, 's', { input: 'again' });
    const next = runBackgroundTurn(w.services, run!);
    await w.until(() => w.second.prompts.length === 2);
    expect(occurrences(w.second.prompts[1]!, NOTICE)).toBe(1);
    expect(await w.outcome(next)).toBe('done');
    await w.advance(0);
    const turn = await w.sessions.getTurn('s', 2);
    expect(turn.status).toBe('completed');
    expect(turn.notices.map((notice) => notice.name)).toEqual(['n1.md']);
    expect(await w.inbox.peek('s')).toEqual([]);
  });
});

import { cp } from 'node:fs/promises';
import { vi } from 'vitest';
import { sessionCreatedIn } from '../../lib/session/log/config-object.ts';
import { errorBody } from '../../functions/error-handler.ts';
import { compactSession } from '../../lib/turn/compact-session.ts';
import { parseServiceConfig } from '../../lib/config.ts';
import { StorageError } from '../../lib/errors.ts';
import { Inbox } from '../../lib/inbox/inbox.ts';
import { echoModel } from '../../lib/models/echo.ts';
import { addToLedger, EMPTY_LEDGER, turnUsage, type Ledger } from '../../lib/ledger/usage.ts';
import { answeredCalls, type Item, type PromptItem } from '../../lib/items.ts';
import type { Model, ModelUsage } from '../../lib/models/model.ts';
import { copyObjects } from './copy-store.ts';
import { SessionLog } from './session-log.ts';
import { FileStore } from '../../lib/store/file.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { Body, GetOptions, ListOptions, ObjectStore, PutOptions } from '../../lib/store/object-store.ts';
import {
  appendItems,
  packOptions,
  runBackgroundTurn,
  runInProcess,
  runTurn,
  sessionStrategyPlan,
  sweepQueues,
  streamTurn,
  takeUnderPolicy,
  type TurnResponse,
  type TurnServices,
} from '../../lib/turn/index.ts';
import { claimBackgroundTurn, claimInput } from '../../lib/turn/background.ts';

/**
 * The model of the simulation's manual compactions: echo, reporting no usage. The usage totals
 * checked exact are the completed turns' sum; a compaction's charge rides in the record that
 * commits it (create-only), and test/http/usage-ledger.test.ts checks what it adds.
 */
const FREE_SUMMARY_MODEL = 'openai:echo-free';
const freeSummaries: typeof echoModel = {
  ...echoModel,
  id: FREE_SUMMARY_MODEL,
  generate: async (request) => ({
    ...(await echoModel.generate(request)),
    usage: { input_tokens: 0, output_tokens: 0 },
  }),
};

const ECHO_PRICE = { input: 1.25, cached_input: 0.125, output: 10 };
const ECHO_PRICES = JSON.stringify({ echo: ECHO_PRICE, [FREE_SUMMARY_MODEL]: ECHO_PRICE });

/**
 * A deterministic simulation of several service processes ("actors") sharing one store, for
 * the session protocol's crash and race tests:
 *
 * - every storage call of every actor waits at a gate, and the `Scheduler` releases one
 *   waiting call at a time, chosen by `pick` (a seeded choice: fast-check drives it), after
 *   letting all other work run until it waits again; timers are vitest's fake timers,
 *   advanced only when no call is waiting, so backoffs and lease renewals cost no real time;
 * - an actor may crash at its n-th storage call, before the call or after it landed (the
 *   answer lost); from then on every call it makes fails, as if its process had died;
 * - the service clock is shared and moves only when a test advances it (leases).
 */

export const LEASE_MS = 30_000;

/** Thrown by a crashed actor's store: the process is gone. */
export class CrashError extends StorageError {
  constructor() {
    super('simulated crash');
    this.name = 'CrashError';
  }
}

/** Fake timers a run moves in a row, with no storage call, before it gives up (see `run`). */
const MAX_TIMERS_WITHOUT_A_CALL = 10_000;

/**
 * Turns of the event loop in a row that the work queues of its own, with no storage call, before
 * a run gives up: a bound far past any work's (a receipt's hashing gives way every 8 ms), met
 * only by a loop of turns that never ends.
 */
const MAX_BUSY_TURNS = 10_000_000;

/** The timer functions as loaded, before a test fakes them: real time for calls in flight. */
const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;

export class Scheduler {
  readonly #waiting: { release: () => void }[] = [];
  readonly #pick: (choices: number) => number;
  /** Released calls still running (real I/O: the file store), and who to wake when one ends. */
  #inFlight = 0;
  #wake: (() => void) | undefined;
  /** Storage calls released so far. */
  steps = 0;
  /** Release a call only when none is in flight. */
  serial = false;

  constructor(pick: (choices: number) => number = () => 0) {
    this.#pick = pick;
  }

  gate(): Promise<void> {
    return new Promise((resolve) => {
      this.#waiting.push({ release: resolve });
      this.#wake?.();
    });
  }

  /** Runs a released call, counted in flight until it settles. */
  track<T>(call: Promise<T>): Promise<T> {
    this.#inFlight += 1;
    return call.finally(() => {
      this.#inFlight -= 1;
      this.#wake?.();
    });
  }

  /**
   * Until a call settles or another waits, or a while: only how soon `run` looks again, never
   * what it does then (that is `pendingRealWork`'s answer).
   */
  #settleOrPause(): Promise<void> {
    return new Promise((resolve) => {
      const timer = realSetTimeout(() => finish(), 1);
      const finish = () => {
        realClearTimeout(timer);
        this.#wake = undefined;
        resolve();
      };
      this.#wake = finish;
    });
  }

  /**
   * Runs until `work` has settled and nothing is waiting, releasing one call at a time. With
   * a store whose calls do real I/O (the file store), a serial scheduler waits for each call
   * to end before it releases the next (the order of calls is then the seed's alone); any
   * other lets released calls run on while it releases more, so they overlap, and moves fake
   * timers only when no call is waiting and no real work is pending (pendingRealWork): a call
   * in flight then waits on a fake timer. What it does next never depends on how long real
   * work takes (a loaded machine), only on whether some is pending.
   */
  async run<T>(work: Promise<T>): Promise<T> {
    let settled = false;
    const done = work.finally(() => {
      settled = true;
    });
    done.catch(() => undefined);
    // Timers moved since a call was released or settled: the work's own backoffs and leases make
    // a storage call within a few of them; a loop outside the simulation never does.
    let timers = 0;
    let inFlight = this.#inFlight;
    // Turns in a row with turns of the work's own queued and nothing else changing.
    let busyTurns = 0;
    for (let idle = 0; ; ) {
      await new Promise((resolve) => setImmediate(resolve));
      if (this.#inFlight !== inFlight) {
        inFlight = this.#inFlight;
        timers = 0;
      }
      const pending = pendingRealWork();
      // Work still running on turns of its own (a receipt's hashing gives way between slices)
      // runs on until it waits again, as long as it takes: only then is a call chosen, or a timer moved.
      if (pending.turns) {
        idle = 0;
        if (++busyTurns > MAX_BUSY_TURNS)
          throw new Error('simulation stalled: turns of the event loop keep coming without a storage call');
        continue;
      }
      busyTurns = 0;
      if (this.#waiting.length > 0 && !(this.serial && this.#inFlight > 0)) {
        idle = 0;
        timers = 0;
        const [next] = this.#waiting.splice(this.#pick(this.#waiting.length) % this.#waiting.length, 1);
        this.steps += 1;
        next!.release();
        continue;
      }
      // Real I/O under way (a released call's, on the file store) ends in its own time; a serial
      // scheduler's call in flight is waited for whatever it waits on.
      if (pending.io || (this.serial && this.#inFlight > 0)) {
        idle = 0;
        await this.#settleOrPause();
        continue;
      }
      if (vi.getTimerCount() > 0) {
        idle = 0;
        if (++timers > MAX_TIMERS_WITHOUT_A_CALL)
          throw new Error(
            'simulation stalled: timers keep firing without a storage call (a timer loop outside the ' +
              'simulation, such as a library left running by an earlier file in this worker?)',
          );
        vi.advanceTimersToNextTimer();
      } else if (settled && this.#inFlight === 0) {
        return done;
      } else if (this.#inFlight === 0 && ++idle > 50) {
        throw new Error('simulation stalled: work is waiting on something that is not a storage call or a timer');
      }
    }
  }
}

/**
 * The real work pending in this process (process.getActiveResourcesInfo): turns of the event
 * loop queued (setImmediate), and file I/O under way. Fake timers are no resource of its.
 */
function pendingRealWork(): { turns: boolean; io: boolean } {
  let turns = false;
  let io = false;
  for (const resource of process.getActiveResourcesInfo()) {
    if (resource === 'Immediate') turns = true;
    else if (resource.startsWith('FSReq')) io = true;
  }
  return { turns, io };
}

/** One actor's view of the shared store: gated calls, and an optional crash. */
export class ActorStore implements ObjectStore {
  /** Storage calls made (the one that crashed included). */
  calls = 0;
  dead = false;
  readonly #inner: ObjectStore;
  readonly #scheduler: Scheduler;
  readonly #crash: { at: number; after: boolean } | undefined;

  constructor(inner: ObjectStore, scheduler: Scheduler, crash?: { at: number; after: boolean }) {
    this.#inner = inner;
    this.#scheduler = scheduler;
    this.#crash = crash;
  }

  async #call<T>(work: () => Promise<T>): Promise<T> {
    if (this.dead) throw new CrashError();
    await this.#scheduler.gate();
    if (this.dead) throw new CrashError();
    this.calls += 1;
    if (this.#crash && this.calls === this.#crash.at) {
      if (this.#crash.after) await this.#scheduler.track(work()).catch(() => undefined);
      this.dead = true;
      throw new CrashError();
    }
    return this.#scheduler.track(work());
  }

  get(key: string, options?: GetOptions) {
    return this.#call(() => this.#inner.get(key, options));
  }
  head(key: string) {
    return this.#call(() => this.#inner.head(key));
  }
  put(key: string, body: Body, options?: PutOptions) {
    return this.#call(() => this.#inner.put(key, body, options));
  }
  list(prefix: string, options?: ListOptions) {
    return this.#call(() => this.#inner.list(prefix, options));
  }
  delete(keys: string | string[]) {
    return this.#call(() => this.#inner.delete(keys));
  }
}

export interface Actor {
  store: ActorStore;
  services: TurnServices & { sessions: SessionLog; inbox: Inbox };
  /** Work started after a response (packing), run by the scheduler like the rest. */
  background: Promise<unknown>[];
}

/**
 * What is wrong with a prompt sent to the model, if anything: its stored items out of order or
 * twice (a seq, or a user message's text: the simulation's inputs are unique), a call with no
 * output after it, an output with no call before it.
 */
export function promptFault(prompt: readonly PromptItem[]): string | undefined {
  const answers = answeredCalls(prompt);
  const answered = new Set(answers.values());
  const texts = new Set<string>();
  let last = 0;
  for (const [index, item] of prompt.entries()) {
    if (item.synthetic !== undefined || item.pending) continue;
    if (item.seq !== undefined) {
      if (item.seq <= last) return `seq ${item.seq} after seq ${last}`;
      last = item.seq;
    }
    if (item.type === 'function_call' && !answered.has(index)) return `call ${item.call_id} without its output`;
    if (item.type === 'function_call_output' && !answers.has(index)) return `output ${item.call_id} without its call`;
    if (item.type === 'message' && item.role === 'user' && typeof item.content === 'string' && !item.compacted) {
      if (texts.has(item.content)) return `user message ${JSON.stringify(item.content)} twice`;
      texts.add(item.content);
    }
  }
  return undefined;
}

/**
 * A model call made to the simulation's provider, and the usage it billed: a provider bills a
 * call it answered whatever becomes of the turn that made it (closed, taken over, its answer
 * dropped). `usage` is undefined for a call that did not answer (it failed, was aborted, or its
 * stream was not read to its end): what the service counts for it is an estimate.
 */
export interface BilledCall {
  /** The store of the actor whose process made the call. */
  by: ActorStore;
  usage: ModelUsage | undefined;
}

/** The totals of `calls` as the service counts them (the echo price), no turn counted. */
export function billedLedger(calls: readonly BilledCall[]): Ledger {
  return calls.reduce(
    (ledger, call) => (call.usage ? addToLedger(ledger, turnUsage(call.usage, ECHO_PRICE), 0) : ledger),
    EMPTY_LEDGER,
  );
}

/**
 * `model`, recording in `faults` what is wrong with each prompt it is sent (promptFault), and in
 * `billed` each call made.
 */
function checkedModel(model: Model, faults: string[], billed: BilledCall[], by: ActorStore): Model {
  const check = (prompt: readonly PromptItem[]) => {
    const fault = promptFault(prompt);
    const shown = prompt.map((item) => [item.seq, item.type, item.type === 'message' ? item.content : item.call_id]);
    if (fault) faults.push(`${fault} in ${JSON.stringify(shown)}`);
  };
  return {
    ...model,
    generate: async (request) => {
      check(request.prompt);
      const result = await model.generate(request).catch((error: unknown) => {
        billed.push({ by, usage: undefined });
        throw error;
      });
      billed.push({ by, usage: result.usage });
      return result;
    },
    stream: async function* (request) {
      check(request.prompt);
      let ended = false;
      try {
        for await (const event of model.stream(request)) {
          if (event.type === 'done') {
            ended = true;
            billed.push({ by, usage: event.result.usage });
          }
          yield event;
        }
      } finally {
        if (!ended) billed.push({ by, usage: undefined });
      }
    },
  };
}

export class World {
  /** The shared store: memory, or the file store in `directory`. */
  readonly store: ObjectStore;
  /** What was wrong with the prompts the actors' turns and compactions sent (promptFault). */
  readonly promptFaults: string[] = [];
  /** Every model call made, in order (BilledCall). */
  readonly billed: BilledCall[] = [];
  readonly scheduler: Scheduler;
  readonly #directory: string | undefined;
  now = Date.parse('2026-01-01T00:00:00Z');

  /**
   * With `directory`, the actors share a file store there, each through a FileStore of its own
   * that contends with the others' through the lock files, as separate processes' would. Its
   * calls do real I/O, so an interleaving is not replayed exactly by its seed.
   */
  constructor(pick?: (choices: number) => number, directory?: string) {
    this.scheduler = new Scheduler(pick);
    this.#directory = directory;
    // The memory store stamps each put a millisecond after the last at least: no two queued inputs
    // tie on their upload times (the service clock, frozen between leases, would tie them again).
    let stamped = 0;
    const clock = () => {
      stamped = Math.max(Date.now(), stamped + 1);
      return new Date(stamped);
    };
    this.store = directory === undefined ? new MemoryStore({ clock }) : new FileStore(directory);
  }

  actor(crash?: { at: number; after: boolean }): Actor {
    const inner = this.#directory === undefined ? this.store : new FileStore(this.#directory, { separateQueue: true });
    const store = new ActorStore(inner, this.scheduler, crash);
    const clock = () => new Date(this.now);
    const background: Promise<unknown>[] = [];
    const checkedEcho = checkedModel(echoModel, this.promptFaults, this.billed, store);
    const checkedSummaries = checkedModel(freeSummaries, this.promptFaults, this.billed, store);
    const services: Actor['services'] = {
      // With a view cache, as the service runs: what an actor parsed before must stay exact. A
      // repeat-index delta bound of 3, so that views both carry a delta and write their shards;
      // views in chunks of a few items.
      sessions: new SessionLog(store, {
        clock,
        leaseMs: LEASE_MS,
        viewCacheBytes: 1 << 20,
        indexDeltaKeys: 3,
        viewChunkBytes: 200,
      }),
      // As the service wires it (functions/services.ts): a notice names the incarnation it was
      // posted to, so a session deleted and created again does not deliver the old one's.
      inbox: new Inbox(store, { clock, log: () => {}, sessionExists: sessionCreatedIn(store, '') }),
      // Echo with a price, so the usage totals carry a cost to check too.
      config: parseServiceConfig({ TURN_LEASE_MS: String(LEASE_MS), MODEL_PRICES: ECHO_PRICES }),
      clock,
      env: {},
      model: (id: string) => (id === FREE_SUMMARY_MODEL ? checkedSummaries : checkedEcho),
      background: (task: Promise<unknown>) => {
        background.push(task.catch(() => undefined));
      },
      startBackground: (run) => runInProcess(services, run),
      log: () => {},
      info: () => {},
    };
    return { store, services, background };
  }

  /**
   * Copies this world's store into `target`'s (fresh and empty), so that a state set up once
   * can start many runs: the file store's directory as it is, the memory store object by
   * object (new etags: no actor of `target` has read the old ones). The model calls that made
   * the state stay billed in `target`, and what was wrong with their prompts stays wrong.
   */
  async copyTo(target: World): Promise<void> {
    target.billed.push(...this.billed);
    target.promptFaults.push(...this.promptFaults);
    if (this.#directory !== undefined && target.#directory !== undefined) {
      await cp(this.#directory, target.#directory, { recursive: true });
      return;
    }
    await copyObjects(this.store, target.store);
  }

  /** Runs `work` to the end under the scheduler, with the actors' background work. */
  async run<T>(work: Promise<T>, actors: Actor[] = []): Promise<T> {
    const result = await this.scheduler.run(work.finally(() => undefined));
    await this.scheduler.run(settleAll(actors));
    return result;
  }
}

async function settleAll(actors: Actor[]): Promise<void> {
  for (let seen = -1; ; ) {
    const all = actors.flatMap((actor) => actor.background);
    if (all.length === seen) return;
    seen = all.length;
    await Promise.all(all);
  }
}

/** What a client saw: a success with its value, or an error with its HTTP status. */
export type Outcome<T> = { ok: true; value: T } | { ok: false; status: number; code: string; error: unknown };

export async function attempt<T>(work: () => Promise<T>): Promise<Outcome<T>> {
  try {
    return { ok: true, value: await work() };
  } catch (error) {
    const { status, body } = errorBody(error, () => {});
    return { ok: false, status, code: body.error.code, error };
  }
}

/** Client operations, as the routes run them. */
export const ops = {
  turn: (actor: Actor, id: string, input: string, key?: string) =>
    attempt(() => runTurn(actor.services, id, { input }, key === undefined ? {} : { idempotencyKey: key })),
  streamTurn: (actor: Actor, id: string, input: string) =>
    attempt(async () => {
      const stream = streamTurn(actor.services, id, { input });
      let response: TurnResponse | undefined;
      for await (const event of stream.events) {
        if (event.event === 'turn.completed') response = event.data;
        if (event.event === 'error') throw event.cause;
      }
      if (!response) throw new Error('the stream ended without turn.completed');
      return response;
    }),
  /** Appends a call repeated across appends, a call of its own (so views index keys) and `content`. */
  append: (actor: Actor, id: string, content: string) =>
    attempt(() =>
      appendItems(actor.services, id, [
        ...callPair(`r_${content}`, { shared: true }),
        ...callPair(`o_${content}`, { content }),
        { type: 'message', role: 'user', content },
      ]),
    ),
  post: (actor: Actor, id: string, name: string) =>
    attempt(() => actor.services.inbox.post(id, { name, content: `notice ${name}` })),
  pack: (actor: Actor, id: string) =>
    attempt(async () =>
      actor.services.sessions.pack(
        id,
        packOptions(sessionStrategyPlan(actor.services.env, await actor.services.sessions.get(id))),
      ),
    ),
  compact: (actor: Actor, id: string) =>
    attempt(() => compactSession(actor.services, id, { keep_tokens: 40, model: FREE_SUMMARY_MODEL })),
  /** A turn under a busy policy: a busy session queues its input (enqueue) or is interrupted. */
  policyTurn: (actor: Actor, id: string, input: string, onBusy: 'enqueue' | 'interrupt', key?: string) =>
    attempt(() =>
      takeUnderPolicy(
        actor.services,
        id,
        { input },
        { onBusy, ...(key === undefined ? {} : { idempotencyKey: key }) },
        () => runTurn(actor.services, id, { input }, key === undefined ? {} : { idempotencyKey: key }),
      ),
    ),
  /**
   * Queues `input` behind a turn this actor holds: claims a background turn (`B <input>`),
   * queues the input while it is open (acknowledged by the answer), then runs the held turn
   * after the answer, whose completion takes the queued input up and runs it.
   */
  enqueueBehind: (actor: Actor, id: string, input: string) =>
    attempt(async () => {
      const held = await claimInput(actor.services, id, {
        input: [{ type: 'message', role: 'user', content: `B ${input}` }],
        request: {},
      });
      const queued = await takeUnderPolicy(actor.services, id, { input }, { onBusy: 'enqueue' }, () =>
        runTurn(actor.services, id, { input }),
      );
      if (held.run) actor.services.background(runBackgroundTurn(actor.services, held.run));
      return queued;
    }),
  /**
   * A background turn of `input`: claimed (acknowledged by the answer), then its run delivered
   * to each of `runners` after the answer (a queue delivers at least once: the same run twice,
   * in two processes), each run as a queue consumer runs it, again on 'retry'.
   */
  background: (actor: Actor, id: string, input: string, runners: Actor[]) =>
    attempt(async () => {
      const claimed = await claimBackgroundTurn(actor.services, id, { input });
      const run = claimed.run;
      if (run)
        for (const runner of runners)
          runner.services.background(
            (async () => {
              for (let delivery = 0; delivery < 3; delivery++)
                if ((await runBackgroundTurn(runner.services, run)) === 'done') return;
            })(),
          );
      return claimed;
    }),
  /** The periodic sweep of queued inputs, run by `actor`'s process. */
  sweep: (actor: Actor) =>
    attempt(async () => {
      const sweep = await sweepQueues(actor.services);
      const [failed] = sweep.failed;
      if (failed) throw failed.error;
      return sweep;
    }),
  /** A fork of the session as it stands, as `child`. */
  fork: (actor: Actor, id: string, child: string) =>
    attempt(async () => {
      const turns = (await actor.services.sessions.get(id)).counts.turns;
      return actor.services.sessions.fork(id, { at_turn: turns, fields: { id: child } });
    }),
  cancelNewest: (actor: Actor, id: string) =>
    attempt(async () => actor.services.sessions.cancelTurn(id, (await actor.services.sessions.get(id)).counts.turns)),
  delete: (actor: Actor, id: string) => attempt(() => actor.services.sessions.delete(id)),
};

/** A call and its output. */
function callPair(id: string, args: object): Item[] {
  return [
    { type: 'function_call', call_id: id, name: 'read', arguments: JSON.stringify(args) },
    { type: 'function_call_output', call_id: id, output: 'ok' },
  ];
}

/** Every stored item of a session, oldest first, read page by page (and checked dense). */
export async function history(
  actor: Actor,
  id: string,
): Promise<{ seq: number; type: string; role?: string; content?: string }[]> {
  const items: { seq: number; type: string; role?: string; content?: string }[] = [];
  let before: number | undefined;
  for (;;) {
    const page = await actor.services.sessions.listItems(id, { limit: 7, ...(before === undefined ? {} : { before }) });
    items.unshift(...([...page.items].reverse() as typeof items));
    if (!page.has_more || page.next_before === null) break;
    before = page.next_before;
  }
  return items;
}

/** A small deterministic random source for choices fast-check seeds. */
export function seeded(seed: number): (choices: number) => number {
  let state = seed >>> 0 || 1;
  return (choices) => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) % Math.max(1, choices);
  };
}

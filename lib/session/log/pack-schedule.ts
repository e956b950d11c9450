import { NotFoundError } from '../../errors.ts';
import { backendOf, type ObjectStore } from '../../store/object-store.ts';
import type { LogScope } from '../keys.ts';
import type { LogItem, LogRecord } from '../records.ts';
import { carried } from './record-cache.ts';
import type { PackOptions, PackResult } from './types.ts';

/**
 * When a process packs a session appended to (docs/STORAGE.md, **Pack debt**): one pack of a
 * session at a time (a request while one runs runs once more after it, never alongside it),
 * an append that leaves more than MAX_PACK_DEBT_RECORDS records outside segments, or more than
 * MAX_RECORDS_AFTER_VIEW (or afterViewBytes of items) after the newest view, packs before it
 * answers, and a failed pack backs off exponentially and says so in the log. Kept for the life
 * of the process (the isolate on Workers), one per store backend as the view cache is.
 */

/** Records past the newest segment an append may leave before it packs itself. */
export const MAX_PACK_DEBT_RECORDS = 32;
/**
 * Records after the newest view an append may leave before it packs itself with a view of its
 * record (docs/STORAGE.md, **What a cold turn reads**): a process new to the session reads the
 * records after the view, so an append also packs first when its record does not carry them all
 * (a record carries at most `recentRecords` and `recentBytes` of them): then the newest record
 * is all a cold turn reads of them. 8 is the default `viewEveryRecords`: an append packs itself
 * only when the background packs fall behind. Whatever writes views less often must keep both.
 */
export const MAX_RECORDS_AFTER_VIEW = 8;

/**
 * The bytes of items the records after a view of `viewBytes` may hold before an append packs
 * (docs/STORAGE.md, **What a cold turn reads**): a cold turn reads the view (about as large as
 * its prompt) and the newest record, which carries those records, and the read budget leaves
 * them a tenth of the prompt and 64 KiB.
 */
export function afterViewBytes(viewBytes: number): number {
  return Math.floor(viewBytes / 10) + 64 * 1024;
}

/** The records after the newest view listed, a commit's written one included, and what it holds of them. */
interface AfterView {
  records: number;
  /** Those the written record holds: the records it carries and itself. */
  carried: number;
  /** The bytes of their items (JSON, as the carry's budget counts them). */
  bytes: number;
}

/** The AfterView of record `number` holding `items` and carrying `after`, its carried records after `listed`. */
function afterViewOf(
  number: number,
  listed: { record: number } | undefined,
  after: NonNullable<LogRecord['recent']>,
  items: readonly LogItem[],
): AfterView {
  return {
    records: number - (listed?.record ?? 0),
    carried: after.length + 1,
    bytes: after.reduce((sum, group) => sum + carried(group.items).length, carried(items).length),
  };
}

/**
 * Whether an append that leaves `afterView` must write a view before it answers: more records
 * after the view than MAX_RECORDS_AFTER_VIEW or than its record carries, or more bytes of their
 * items than afterViewBytes of the view (`viewBytes`: its stored bytes; none without a view).
 */
function viewOverdue(afterView: AfterView, viewBytes: number | undefined): boolean {
  if (afterView.records > MAX_RECORDS_AFTER_VIEW || afterView.records > afterView.carried) return true;
  return viewBytes !== undefined && afterView.bytes > afterViewBytes(viewBytes);
}

/**
 * An append's view due before it answers: `held`, the items after the newest view its record
 * does not carry, of the incarnation `generation` (the one the append wrote to).
 */
export interface OverdueView {
  held: LogItem[];
  generation: string;
}

/** An overdue append as its commit returns it: with its record and the incarnation it went to. */
export interface OverdueAppend extends OverdueView {
  record: LogRecord;
  scope: LogScope;
}

/**
 * For the append of record `number` (holding `items`, `recent` the records it would carry,
 * `listed` the newest view listed before it) to session `id`, incarnation `generation`: the
 * view it must write before it answers (viewOverdue), or undefined. Its record then carries none of the records after
 * `listed` (the view covers them), and its pack takes their items from `held`.
 */
export function overdueView(
  schedule: PackSchedule,
  { id, generation }: { id: string; generation: string },
  listed: { record: number; key: string; size: number } | undefined,
  number: number,
  { recent }: { recent: NonNullable<LogRecord['recent']> },
  items: readonly LogItem[],
): OverdueView | undefined {
  const after = recent.filter((group) => group.record > (listed?.record ?? 0));
  if (!viewOverdue(afterViewOf(number, listed, after, items), listed && schedule.viewBytes(id, listed)))
    return undefined;
  return { held: after.flatMap((group) => group.items), generation };
}
/** The wait after a first failed pack, doubled after each further one up to MAX_BACKOFF_MS. */
export const FIRST_BACKOFF_MS = 1_000;
export const MAX_BACKOFF_MS = 5 * 60_000;
/** Sessions whose packing state a process keeps (the oldest goes first). */
const MAX_SESSIONS = 10_000;

interface SessionPacking {
  /** The pack running, with the reruns asked for meanwhile. */
  running: Promise<void> | null;
  /** A pack asked for while one ran: run once after it. */
  next: Pack | null;
  /** The callers of `run` waiting for `next` to run (or be skipped). */
  waiting: (() => void)[];
  /** The newest record of incarnation `generation` a segment covers, as far as this process knows (0: none known). */
  through: number;
  generation?: string;
  failures: number;
  /** No pack starts before this time (ms) after a failure. */
  retryAt: number;
  /** The incarnation whose pack failed (a pack of another one does not wait out its backoff). */
  failedGeneration?: string | undefined;
  /** The incarnation of `next`, when its caller named it. */
  nextGeneration?: string | undefined;
  /** The view of the session this process wrote last, and its stored bytes (its chunk's included). */
  view?: { key: string; bytes: number };
  /** A pack wrote its view only (PackResult.unswept): the next one is given `sweep`. */
  sweep: boolean;
}

export type PackLog = (message: string, details?: unknown) => void;

/**
 * A pack of one session, given the view the pack of it before wrote (see run), to take instead of
 * reading it again, and whether a pack before it left its sweep (PackOptions.sweep).
 */
export type Pack = (lastView: PackOptions['lastView'], sweep: boolean) => Promise<PackResult>;

export class PackSchedule {
  readonly #sessions = new Map<string, SessionPacking>();
  readonly #now: () => number;
  /** The view the newest pack that wrote one wrote, and its session's id (one view, whatever its size). */
  #lastView: { id: string; view: NonNullable<PackOptions['lastView']> } | null = null;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /**
   * The stored bytes of the view `listed` of `id`: as this process wrote it, its chunk's included,
   * or else as listed (a view in a chunk is listed without it).
   */
  viewBytes(id: string, listed: { key: string; size: number }): number {
    const view = this.#sessions.get(id)?.view;
    return view?.key === listed.key ? view.bytes : listed.size;
  }

  /** The view of `id` this process wrote last (its key, and its stored bytes with its chunk's), if any. */
  writtenView(id: string): { key: string; bytes: number } | undefined {
    return this.#sessions.get(id)?.view;
  }

  /**
   * Whether packs of `id` wait out a failure's backoff now (a pack asked for would not run): of
   * incarnation `generation`, when given, only if a pack of that one failed.
   */
  backingOff(id: string, generation?: string): boolean {
    const state = this.#sessions.get(id);
    return !!state && this.#now() < state.retryAt && !this.#otherIncarnation(state, generation);
  }

  /** Whether `generation` is known to be another incarnation than the one whose pack failed. */
  #otherIncarnation(state: SessionPacking, generation: string | undefined): boolean {
    return generation !== undefined && state.failedGeneration !== undefined && generation !== state.failedGeneration;
  }

  /**
   * The records of `id` (incarnation `generation`) up to `record` that no segment covers, as far
   * as this process knows (at least): what it knows of another incarnation counts for nothing.
   */
  debt({ id, generation }: { id: string; generation: string }, record: number): number {
    const state = this.#sessions.get(id);
    return record - (state?.generation === generation ? state.through : 0);
  }

  /**
   * Runs `pack` for `id`, or after the pack running (once, however often it is asked for
   * meanwhile); skipped while a failure's backoff lasts. Resolves when it ran or was skipped;
   * never rejects: a failure is logged through `log`. The view the last pack that wrote one
   * wrote is handed to the session's next pack (kept for one session at a time, the one packed
   * last): a fast load's packs follow one another, and each would otherwise read and parse the
   * view before (as large as the prompt) whenever the view cache cannot hold it.
   */
  run(id: string, pack: Pack, log: PackLog, generation?: string): Promise<void> {
    const state = this.#state(id);
    state.next = pack;
    state.nextGeneration = generation;
    const ran = new Promise<void>((resolve) => state.waiting.push(resolve));
    this.#start(id, state, log);
    return ran;
  }

  /** Starts draining the packs asked for, unless a drain runs (it takes them). */
  #start(id: string, state: SessionPacking, log: PackLog): void {
    state.running ??= this.#drain(id, state, log).finally(() => {
      state.running = null;
      // Asked for after the drain's last look.
      if (state.next) this.#start(id, state, log);
    });
  }

  async #drain(id: string, state: SessionPacking, log: PackLog): Promise<void> {
    for (let pack = state.next; pack; pack = state.next) {
      const generation = state.nextGeneration;
      const waiting = state.waiting;
      state.next = null;
      state.waiting = [];
      try {
        if (this.#now() < state.retryAt && !this.#otherIncarnation(state, generation)) return;
        await this.#pack(id, state, pack, generation, log);
      } finally {
        for (const resolve of waiting) resolve();
      }
    }
  }

  /** Runs one pack of `id`, and keeps what it learned (or its failure's backoff). */
  async #pack(id: string, state: SessionPacking, pack: Pack, generation: string | undefined, log: PackLog) {
    try {
      const sweep = state.sweep;
      const result = await pack(this.#lastView?.id === id ? this.#lastView.view : undefined, sweep);
      // Owed until a pack given it succeeds; a pack that writes its view only owes it again.
      if (result.unswept) state.sweep = true;
      else if (sweep) state.sweep = false;
      if (result.written) {
        this.#lastView = { id, view: { key: result.view!, view: result.written } };
        state.view = { key: result.view!, bytes: result.writtenBytes! };
      } else if (result.view && this.#lastView?.id === id) this.#lastView = null;
      // A pack of another incarnation than the one known (deleted and created again since).
      if (result.generation !== undefined && result.generation !== state.generation) {
        state.generation = result.generation;
        state.through = 0;
      }
      state.through = Math.max(state.through, result.through ?? 0);
      state.failures = 0;
      state.retryAt = 0;
    } catch (error) {
      // A session deleted meanwhile is no failure: nothing is owed, nothing logged, no backoff.
      if (error instanceof NotFoundError) return;
      // Failures of another incarnation do not count toward this one's backoff.
      if (this.#otherIncarnation(state, generation)) state.failures = 0;
      state.failedGeneration = generation;
      state.failures += 1;
      const delay = Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** (state.failures - 1));
      state.retryAt = this.#now() + delay;
      log('tailgate: packing failed; next attempt after a backoff', {
        session_id: id,
        failures: state.failures,
        backoff_ms: delay,
        error: error instanceof Error ? error.message : String(error),
      });
    }
  }

  #state(id: string): SessionPacking {
    let state = this.#sessions.get(id);
    if (state) {
      // Most recently used last, so the oldest goes first when the map is full.
      this.#sessions.delete(id);
    } else {
      state = { running: null, next: null, waiting: [], through: 0, failures: 0, retryAt: 0, sweep: false };
      if (this.#sessions.size >= MAX_SESSIONS) this.#evictIdle();
    }
    this.#sessions.set(id, state);
    return state;
  }

  /** Forgets the session used longest ago whose packs are not running (one running is never forgotten). */
  #evictIdle(): void {
    for (const [id, state] of this.#sessions) {
      if (state.running) continue;
      this.#sessions.delete(id);
      return;
    }
  }
}

const schedules = new WeakMap<ObjectStore, PackSchedule>();

/** The schedule of `store`'s backend (two wrappers of one store share it). */
export function packScheduleOf(store: ObjectStore): PackSchedule {
  const backend = backendOf(store);
  let schedule = schedules.get(backend);
  if (!schedule) {
    schedule = new PackSchedule();
    schedules.set(backend, schedule);
  }
  return schedule;
}

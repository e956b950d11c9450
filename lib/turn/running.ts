import { LEASE_EXPIRED, SESSION_DELETED, TurnClosedError } from '../errors.ts';
import { SessionDeletedError } from '../session-deleted.ts';
import type { LogScope } from '../session/keys.ts';
import type { OpenTurn } from '../session/log/types.ts';

/**
 * How often a registered attempt looks whether a close written here stopped it (ms): the close
 * only marks it, and the attempt's own timer aborts it. On Workers, what an abort sets off (the
 * model call's rejection, the turn's answer, the storage calls of its close) runs in the I/O
 * context of whoever calls `abort`: from the request that served the close, the stopped turn's
 * answer would be an object of that request, which the turn's own request cannot send.
 */
export const STOP_CHECK_MS = 100;

/** Which turn a close names: all a registered attempt keeps of its claim. */
type TurnName = { scope: Pick<LogScope, 'id'>; turn: number };

interface Registered {
  /**
   * Not the claim itself: on Workers an attempt the runtime cancelled (a client gone past
   * `waitUntil`'s limit) never removes its entry, which keeps no more than this.
   */
  turn: TurnName;
  /** The error it is to be stopped with, once a close marked it. */
  closed?: Error;
}

/**
 * The turn attempts this process runs (foreground and background), so that a close written here
 * (a cancel, an `interrupt`, a delete of the session once it ended, a close of a lapsed lease)
 * stops one within STOP_CHECK_MS instead of at its next lease renewal (lib/turn/renewal.ts,
 * which stays the way another process's close is found). One registry per app
 * (functions/service-inputs.ts): what it holds is only ever aborted, with the error the renewal's check
 * would have aborted it with, never read from storage.
 */
export class RunningTurns {
  readonly #attempts = new Map<string, Set<Registered>>();

  /**
   * Registers an attempt of `turn` (its claim may not have landed yet), stopped through `stop`
   * by a timer of its own (STOP_CHECK_MS); returns what removes it, which its attempt calls once
   * it ended, however it ended.
   */
  add(turn: OpenTurn, stop: AbortController): () => void {
    return this.#register(turnKey(turn.scope, turn.turn), { scope: { id: turn.scope.id }, turn: turn.turn }, stop);
  }

  /**
   * Registers a manual compaction that holds its claim under `scope` (lib/turn/compact-session.ts):
   * a delete of that session ended here (`deleted`) stops it through `stop` as a close stops an
   * attempt; returns what removes it, which the compaction calls once its summary call ended.
   */
  addCompaction(scope: LogScope, stop: AbortController): () => void {
    return this.#register(compactionKey(scope), { scope: { id: scope.id }, turn: 0 }, stop);
  }

  /**
   * A delete of the session under `scope` ended here: every compaction of it running here is
   * marked to be aborted with not_found (its claim's renewal finds the delete too, a third of a
   * lease later at most: the way another process's delete is found). One of the id created
   * again since the delete took the config is under another generation: it goes on.
   */
  deleted(scope: LogScope): void {
    const { id } = scope;
    for (const entry of this.#attempts.get(compactionKey(scope)) ?? [])
      entry.closed ??= new SessionDeletedError(id, 'its compaction');
  }

  #register(key: string, turn: TurnName, stop: AbortController): () => void {
    const entry: Registered = { turn };
    let attempts = this.#attempts.get(key);
    if (!attempts) {
      attempts = new Set();
      this.#attempts.set(key, attempts);
    }
    attempts.add(entry);
    // Set up by the attempt itself, so the abort runs in its own context (see STOP_CHECK_MS).
    const check = setInterval(() => {
      if (!entry.closed) return;
      clearInterval(check);
      if (!stop.signal.aborted) stop.abort(entry.closed);
    }, STOP_CHECK_MS);
    return () => {
      clearInterval(check);
      const left = this.#attempts.get(key);
      left?.delete(entry);
      if (left?.size === 0) this.#attempts.delete(key);
    };
  }

  /**
   * Someone else's completion of `turn` (under `scope`) landed with its `error`: every
   * attempt of it running here is marked to be aborted, as its next renewal would abort it
   * (closedError), which its own timer does. Whether any runs here: its attempt tells how the
   * turn ended (its log line), else nobody in this process does.
   */
  stop(closed: { scope: LogScope; turn: number; error?: { code: string; details?: unknown } | undefined }): boolean {
    const attempts = this.#attempts.get(turnKey(closed.scope, closed.turn)) ?? new Set<Registered>();
    const { code, details } = closed.error ?? { code: LEASE_EXPIRED };
    for (const entry of attempts) entry.closed ??= closedError(entry.turn, code, details);
    return attempts.size > 0;
  }

  /** How many attempts are registered (none once every attempt ended). */
  get size(): number {
    let count = 0;
    for (const attempts of this.#attempts.values()) count += attempts.size;
    return count;
  }
}

function turnKey(scope: LogScope, turn: number): string {
  return JSON.stringify([scope.id, scope.generation, turn]);
}

function compactionKey(scope: LogScope): string {
  return JSON.stringify([scope.id, scope.generation, 'compaction']);
}

/**
 * What the owner of a turn closed by someone else (with the error `code`, and its `details`)
 * answers, as lib/session/log/claim.ts's completion would: the renewal's check
 * (lib/turn/renewal.ts) and RunningTurns stop a turn with it.
 */
export function closedError(turn: TurnName, code: string, details?: unknown): Error {
  if (code === SESSION_DELETED) return new SessionDeletedError(turn.scope.id, turn.turn);
  return new TurnClosedError(turn.scope.id, turn.turn, code, details);
}

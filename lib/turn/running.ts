import { LEASE_EXPIRED, NotFoundError, SESSION_DELETED, TURN_CANCELLED, TurnClosedError } from '../errors.ts';
import type { LogScope } from '../session/keys.ts';
import type { OpenTurn } from '../session/log/types.ts';

/**
 * The turn attempts this process runs (foreground and background), so that a close written here
 * (a cancel, an `interrupt`, a delete of the session once it ended, a close of a lapsed lease)
 * stops one at once instead of at its next lease renewal (lib/turn/renewal.ts, which stays the way another
 * process's close is found). One registry per app (functions/app.ts): what it holds is only
 * ever aborted, with the error the renewal's check would have aborted it with, never read from
 * storage.
 */
export class RunningTurns {
  readonly #attempts = new Map<string, Set<{ turn: OpenTurn; stop: AbortController }>>();

  /**
   * Registers an attempt of `turn` (its claim may not have landed yet), stopped through `stop`;
   * returns what removes it, which its attempt calls once it ended, however it ended.
   */
  add(turn: OpenTurn, stop: AbortController): () => void {
    const key = turnKey(turn.scope, turn.turn);
    const entry = { turn, stop };
    let attempts = this.#attempts.get(key);
    if (!attempts) {
      attempts = new Set();
      this.#attempts.set(key, attempts);
    }
    attempts.add(entry);
    return () => {
      const left = this.#attempts.get(key);
      left?.delete(entry);
      if (left?.size === 0) this.#attempts.delete(key);
    };
  }

  /**
   * Someone else's completion of `turn` (under `scope`) landed with the error `code`: every
   * attempt of it running here is aborted as its next renewal would abort it
   * (closedError).
   */
  stop(closed: { scope: LogScope; turn: number; error?: { code: string } | undefined }): void {
    for (const { turn, stop } of this.#attempts.get(turnKey(closed.scope, closed.turn)) ?? []) {
      if (!stop.signal.aborted) stop.abort(closedError(turn, closed.error?.code ?? LEASE_EXPIRED));
    }
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

/**
 * What the owner of a turn closed by someone else (with the error `code`) answers, as
 * lib/session/log/claim.ts's completion would: the renewal's check (lib/turn/renewal.ts) and
 * RunningTurns stop a turn with it.
 */
export function closedError(turn: OpenTurn, code: string): Error {
  if (code === SESSION_DELETED)
    return new NotFoundError(`session ${turn.scope.id} was deleted during turn ${turn.turn}`, { id: turn.scope.id });
  return new TurnClosedError(turn.scope.id, turn.turn, code === TURN_CANCELLED ? TURN_CANCELLED : LEASE_EXPIRED);
}

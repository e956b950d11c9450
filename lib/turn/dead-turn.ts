import { LEASE_EXPIRED, NotFoundError, StorageError, TurnInProgressError } from '../errors.ts';
import { LapsedTurnRefused } from '../session/log/claim.ts';
import { idGeneration } from '../session/log/rewind.ts';
import type { SessionLog } from '../session/session-log.ts';
import { deleteNewestTurn, type RewindServices } from './fork.ts';
import type { TurnServices } from './types.ts';

/**
 * The dead turn of a turn answered only once it ended (TurnOptions.answeredAtEnd: a stored
 * response neither streamed nor in the background), whose process died: its client never got its
 * id, and retries it (the `openai` client retries a dropped connection by itself). Such a turn,
 * failed `lease_expired` with no output (or open, its lease run out: closed so first), is taken
 * out of its session, its newest turn, before anything is stored after it: by the next request on
 * its conversation (lib/openai/dead-turn.ts), a native turn, the pickup of an input queued
 * behind it (./pickup.ts), an append (./append.ts), a manual compaction's claim
 * (./compact-session.ts), or an `interrupt` that cancelled it while its lease ran
 * (takeOutInterrupted), so that the retry, coming after any of them, stores its input once. So is
 * one an `interrupt` cancelled, dead or not (failed `turn_cancelled`, `details.interrupted`, with
 * no output): its client got 409 `turn_cancelled`, which it retries. The interrupt takes it out
 * itself; when it could not (its process died or its store failed after the cancel, or the retry
 * claimed first), whatever comes next does, the retry among them. One that took inbox notices
 * stays (deleteNewestTurn): the claim then follows it. (One whose session
 * would read more generations than a config names is taken out too: the delete flattens the
 * history, lib/session/log/flatten.ts.) A store failing meanwhile is no such
 * refusal: the request (or the pickup) fails with it, and the next one takes the turn out.
 */

/**
 * Thrown by a claim (TurnOptions.onLapsed) that found such a dead turn the session's newest, open
 * with its lease run out or closed so, or closed by an `interrupt`: its caller takes that turn out
 * first (takeOutDead), then claims again, instead of storing its input after it.
 */
export class LapsedDeadTurn extends LapsedTurnRefused {}

/** TurnOptions.onLapsed refusing to close, or to follow, the dead turn of a turn answered at its end. */
export function refuseLapsedDead(lapsed: { turn: number; request: unknown }): void {
  if ((lapsed.request as { answered_at_end?: unknown } | undefined)?.answered_at_end === true)
    throw new LapsedDeadTurn(`turn ${lapsed.turn}, whose process died, is taken out first`);
}

/**
 * Runs `write` (a commit after the session's newest turn: an append, a compaction's claim) refusing
 * the dead turn of a turn answered at its end (refuseLapsedDead); refused, takes that turn out of
 * session `sessionId` and writes again, or, the turn staying, writes after it (`onLapsed` not given).
 */
export async function writeWithoutDead<T>(
  services: DeadTurnServices,
  sessionId: string,
  write: (lapsed: { onLapsed?: typeof refuseLapsedDead }) => Promise<T>,
): Promise<T> {
  for (let refused = true; ; ) {
    try {
      return await write(refused ? { onLapsed: refuseLapsedDead } : {});
    } catch (error) {
      if (!refused || !(error instanceof LapsedDeadTurn)) throw error;
      if (!(await takeOutDead(services, sessionId))) refused = false;
    }
  }
}

/** What taking a dead turn out works with. */
export type DeadTurnServices = RewindServices &
  Pick<TurnServices, 'log'> & { sessions: Pick<SessionLog, 'getWithNewestTurn' | 'closeIfExpired'> };

type NewestRead = Awaited<ReturnType<SessionLog['getWithNewestTurn']>>;

/**
 * Takes `read`'s newest turn (read now when not given) out of session `sessionId` when it is the
 * dead turn of a turn answered at its end, or one an `interrupt` cancelled (above): whether it
 * did, or found it taken out by another since that read (a delete of the newest turn answering
 * not_found: its generation was left).
 */
export async function takeOutDead(services: DeadTurnServices, sessionId: string, read?: NewestRead): Promise<boolean> {
  const { sessions } = services;
  const { newestTurn: turn, scope } = read ?? (await sessions.getWithNewestTurn(sessionId));
  if (!turn?.answered_at_end || turn.output !== null) return false;
  if (turn.status === null) {
    // Open: closed failed when its lease ran out; while the lease runs its claim answers 409.
    const closed = await sessions.closeIfExpired(sessionId, turn.turn).catch((error: unknown) => {
      if (error instanceof TurnInProgressError) return null;
      throw error;
    });
    if (closed?.status !== 'failed' || closed.error?.code !== LEASE_EXPIRED) return false;
  } else if (turn.status !== 'failed' || (turn.error !== LEASE_EXPIRED && !turn.interrupted)) return false;
  return (await takeOut(services, sessionId, turn, scope)) === 'gone';
}

/**
 * Takes turn `cancelled`, which an `interrupt` just cancelled (./busy.ts), out of session
 * `sessionId` when it is still the newest, a turn answered at its end with no output: dead or
 * not (within its lease nothing tells), its client never got its id (a dropped connection, or
 * 409 `turn_cancelled`, which the `openai` client retries), so the interrupting turn takes its
 * place, as a dead turn's, and the retry stores its input once, after it. `gone`: it did (or found
 * it taken out by another); `stays`: its delete was refused (it took notices), logged, so the
 * interrupting turn follows it rather than try again; `passed`: it is no longer the session's
 * newest such turn (left so, a claim refuses it all the same, as a dead turn, and it is taken
 * out then).
 */
export async function takeOutInterrupted(
  services: DeadTurnServices,
  sessionId: string,
  cancelled: number,
): Promise<'gone' | 'stays' | 'passed'> {
  const { newestTurn: turn, scope } = await services.sessions.getWithNewestTurn(sessionId);
  if (!turn?.answered_at_end || turn.output !== null || turn.turn !== cancelled) return 'passed';
  if (turn.status !== 'failed' || !turn.interrupted) return 'passed';
  return takeOut(services, sessionId, turn, scope);
}

/**
 * Deletes `turn`, the newest of session `sessionId` in `scope` (takeOutDead): `gone`, or `stays`
 * (its delete refused, logged once here).
 */
async function takeOut(
  services: DeadTurnServices,
  sessionId: string,
  turn: NonNullable<NewestRead['newestTurn']>,
  scope: NewestRead['scope'],
): Promise<'gone' | 'stays'> {
  const { log } = services;
  const names = { seq: turn.first_seq, generation: idGeneration(scope, turn.first_seq) };
  return deleteNewestTurn(services, sessionId, turn.turn, { names }).then(
    () => 'gone' as const,
    (error: unknown) => {
      // Gone: taken out by another meanwhile (the pickup that closing it started, ./busy.ts,
      // whose claim it refused), the session moved to the generation before it.
      if (error instanceof NotFoundError) return 'gone' as const;
      // A store failing is no refusal: the request fails, and its retry takes the turn out.
      if (error instanceof StorageError) throw error;
      // An interrupted turn's process may be alive: only a dead turn is told as one.
      const what = turn.interrupted ? 'interrupted' : 'whose process died';
      log(`tailgate: turn ${turn.turn} of ${sessionId}, ${what}, stays in its session`, error);
      return 'stays' as const;
    },
  );
}

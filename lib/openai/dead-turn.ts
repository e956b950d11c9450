import { TurnInProgressError } from '../errors.ts';
import type { SessionLog } from '../session/session-log.ts';
import { takeOutDead } from '../turn/dead-turn.ts';
import { renewedWhenAnswered } from '../session/log/busy-lease.ts';
import type { IndexFacade } from './facade.ts';

/**
 * A stored response that is neither streamed nor in the background is answered once its turn
 * ended, and a failed one is taken out of its conversation by its own process (./stored-turn.ts),
 * so a retry continues from the response before it. A process killed mid-turn takes nothing out:
 * its turn stays open until its lease lapses, then is closed failed `lease_expired` (by the next
 * claim, or here), its input stored though its client never got its id, and the client's retry
 * (the `openai` client retries a dropped connection by itself) would store that input twice
 * under `conversation`, branch under `previous_response_id` and start a new conversation as a
 * resent history. The next request on the conversation (or a native turn, the pickup of an input
 * queued behind it, an append or a manual compaction: lib/turn/dead-turn.ts; responses.compact
 * naming the response before it: newestPastDead) takes such a turn out
 * instead: its newest turn, its record saying `answered_at_end`, failed `lease_expired` with no
 * output (or open, its lease run out: closed so first); so is one an `interrupt` cancelled and
 * could not take out itself (failed `turn_cancelled`, `details.interrupted`), whose client retries
 * the 409. One that took inbox notices stays
 * (deleteNewestTurn): the retry then goes on after it, as after a streamed response's dead turn. (A
 * conversation that would read more generations than a config names is flattened by the delete,
 * lib/session/log/flatten.ts, so no depth keeps a dead turn in.)
 */

type NewestRead = Awaited<ReturnType<SessionLog['getWithNewestTurn']>>;

/**
 * The session and its newest turn (SessionLog.getWithNewestTurn), read again when a dead turn was
 * closed or taken out. A newest turn left open whose lease ran out is closed first (failed
 * `lease_expired`, as the claim would close it), whatever answered it: so a retry of a streamed or
 * background step under `conversation` sees the attempt failed, and the outputs it stored are not
 * stored again (./failed-steps.ts). One whose lease still runs is named as `running` (the 409 its
 * claim answers).
 */
export async function readWithoutDeadTurn(
  facade: IndexFacade,
  sessionId: string,
): Promise<NewestRead & { running?: TurnInProgressError }> {
  const { sessions } = facade.services;
  let read = await sessions.getWithNewestTurn(sessionId);
  const open = read.newestTurn;
  const running = runningIn(facade, sessionId, read);
  if (running) return { ...read, running };
  if (open?.status === null && open.output === null) {
    const closed = await sessions.closeIfExpired(sessionId, open.turn).catch((error: unknown) => {
      if (error instanceof TurnInProgressError) return error;
      throw error;
    });
    if (closed instanceof TurnInProgressError) return { ...read, running: closed };
    // Closed now, by this read or by someone else since: read again.
    read = await sessions.getWithNewestTurn(sessionId);
  }
  return (await withdrawDead(facade, sessionId, read)) ? sessions.getWithNewestTurn(sessionId) : read;
}

/**
 * The 409 a claim answers while `read`'s newest turn runs, within the lease its claim took
 * (whatever was renewed beside it); undefined when it does not. Nothing is written.
 */
export function runningIn(facade: IndexFacade, sessionId: string, read: NewestRead): TurnInProgressError | undefined {
  const { sessions, clock } = facade.services;
  const open = read.newestTurn;
  const claimed = open?.status === null ? open.lease_expires_at : undefined;
  if (!open || !claimed || Date.parse(claimed) <= clock().getTime()) return undefined;
  // Answered, it names the lease renewed beside the turn's record, which holds the session.
  const running = new TurnInProgressError(sessionId, open.turn, claimed);
  renewedWhenAnswered(running, () => sessions.leaseUntil(sessionId, open.turn));
  return running;
}

/**
 * Takes `read`'s newest turn out of session `sessionId` when it is the dead turn of a response
 * answered at its end (above, lib/turn/dead-turn.ts): whether it did.
 */
export async function withdrawDead(facade: IndexFacade, sessionId: string, read?: NewestRead): Promise<boolean> {
  return takeOutDead(facade.services, sessionId, read);
}

/**
 * The number of session `sessionId`'s newest turn once a dead turn of a response answered at its
 * end was taken out (readWithoutDeadTurn): a request naming the response before it goes on after
 * that response. Such a turn whose lease still runs is answered as its claim would be (409
 * turn_in_progress): the request passes once the lease ran out.
 */
export async function newestPastDead(facade: IndexFacade, sessionId: string): Promise<number> {
  const read = await readWithoutDeadTurn(facade, sessionId);
  if (read.running && read.newestTurn?.answered_at_end && read.newestTurn.output === null) throw read.running;
  return read.session.counts.turns;
}

import { ReplayedError } from '../errors.ts';
import type { ClientItem } from '../items.ts';
import type { SessionRecord } from '../session/fields.ts';
import type { Facade } from './facade.ts';
import { retriedSince } from './history-index.ts';

/**
 * An `abort` notice stops an agent: the turn it meets is refused (409 `aborted`) and stays in
 * its conversation, its input stored. A client that retries the refused request by itself (the
 * official clients retry a 409; the AI SDK ignores `x-should-retry: false`) would find the notice
 * consumed and run the step after all, in a branch (previous_response_id no longer names the
 * newest response) or a new conversation (a resent history no longer matches the newest turn).
 * A request without an Idempotency-Key (a keyed retry gets its turn's stored answer anyway) that
 * continues the same point with the same input as the aborted turn is that retry: it is refused
 * again with the aborted turn's error, nothing run. Any other input goes on as before.
 */

/** The refusal of the aborted turn `turn` of `sessionId`, answered again. */
export async function refusedAgain(facade: Facade, sessionId: string, turn: number): Promise<ReplayedError> {
  const aborted = await facade.services.sessions.getTurn(sessionId, turn);
  return new ReplayedError(aborted.error ?? { code: 'aborted', message: 'the turn was aborted' });
}

/**
 * The refusal to answer again when a request adding `items` after turn `afterTurn` of
 * `sessionId` (previous_response_id's; undefined: after the conversation's newest turn but one,
 * a request naming the conversation) retries the turn an `abort` notice refused: the newest
 * turn, aborted, stored exactly `items` (after failed attempts of them), nothing else since. A
 * request naming the conversation calls it only when the session, read with its newest turn
 * (SessionLog.getWithNewestTurn), says that turn was aborted: the usual next turn reads nothing more.
 */
export async function abortedRetry(
  facade: Facade,
  sessionId: string,
  afterTurn: number | undefined,
  items: readonly ClientItem[],
  /** The session as just read (else read here). */
  read?: SessionRecord,
): Promise<ReplayedError | undefined> {
  const { sessions } = facade.services;
  const session = read ?? (await sessions.get(sessionId));
  const newest = session.counts.turns;
  if (newest === 0 || (afterTurn !== undefined && afterTurn >= newest)) return undefined;
  const since =
    afterTurn === undefined
      ? { turn: newest - 1 }
      : { turn: afterTurn, items: await sessions.getTurn(sessionId, afterTurn).then(lastSeq) };
  const retried = await retriedSince(facade, session, since, items);
  return retried?.aborted ? refusedAgain(facade, sessionId, newest) : undefined;
}

function lastSeq(turn: { input: { last_seq: number } | null; output: { last_seq: number } | null }) {
  return turn.output?.last_seq ?? turn.input?.last_seq;
}

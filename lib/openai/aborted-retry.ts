import { z } from 'zod';
import { ReplayedError, TURN_CANCELLED } from '../errors.ts';
import type { NewestTurn } from '../session/log/newest-turn.ts';
import type { ClientItem, Item } from '../items.ts';
import type { SessionRecord } from '../session/fields.ts';
import { parseStoredOrUndefined } from '../session/records.ts';
import { errorRecord } from '../turn/index.ts';
import type { Facade } from './facade.ts';
import { chatAbortKey } from '../session/keys.ts';
import { retriedSince, type RetriedSteps } from './failed-steps.ts';
import { historyDigest } from './history-index.ts';

/**
 * An `abort` notice stops an agent: the turn it meets is refused (409 `aborted`) and stays in
 * its conversation, its input stored. So does a cancel (`POST .../turns/{turn}/cancel`) stop a
 * running step: its request is answered 409 `turn_cancelled`, the turn stays. A client that
 * retries the refused request by itself (the official clients retry a 409 unless told
 * `x-should-retry: false`; the AI SDK reads no such header) would find the notice consumed, or
 * the turn closed, and run the step after all: under `conversation` as the next turn, in a
 * branch (previous_response_id no longer names the newest response) or a new conversation (a
 * resent history no longer matches the newest turn). A request without an Idempotency-Key (a
 * keyed retry gets its turn's stored answer anyway) that continues the same point with the same
 * input as the refused turn is that retry: it is refused again with that turn's error, nothing
 * run. Any other input goes on as before. Not so after an `interrupt`'s cancel, whose retry is
 * wanted (./failed-steps.ts refusedForGood), nor after a background turn's: its create was answered
 * at once (`queued`), and no client sends it again by itself, so the same input sent again is run.
 */

/**
 * Whether a conversation's newest turn, as its head tells it (SessionLog.getWithNewestTurn),
 * refused its request for good: aborted, or failed by a cancel not an `interrupt`'s, and not in
 * the background (./failed-steps.ts refusedForGood).
 */
export function refusedNewest(turn: NewestTurn | null | undefined): boolean {
  const cancelled = turn?.status === 'failed' && turn.error === TURN_CANCELLED && !turn.interrupted;
  return !turn?.background && (turn?.status === 'aborted' || cancelled);
}

/** The refusal of the refused turn `turn` of `sessionId` (aborted or cancelled), answered again. */
export async function refusedAgain(facade: Facade, sessionId: string, turn: number): Promise<ReplayedError> {
  const refused = await facade.services.sessions.getTurn(sessionId, turn);
  return new ReplayedError(refused.error ?? { code: 'aborted', message: 'the turn was aborted' });
}

/**
 * The refusal to answer again when a request adding `items` after turn `afterTurn` of
 * `sessionId` (previous_response_id's; undefined: after the conversation's newest turn but one,
 * a request naming the conversation) retries the turn refused for good: the newest turn,
 * aborted or cancelled, stored exactly `items` (after failed attempts of them), nothing else
 * since. A request naming the conversation calls it only when the session, read with its newest
 * turn, says so (refusedNewest): the usual next turn reads nothing more.
 */
export async function refusedRetry(
  facade: Facade,
  sessionId: string,
  afterTurn: number | undefined,
  items: readonly ClientItem[],
  /** The session as just read (else read here). */
  read?: SessionRecord,
): Promise<ReplayedError | undefined> {
  const retried = await retriedAfter(facade, sessionId, afterTurn, items, read);
  return retried?.refused ? refusedAgain(facade, sessionId, retried.newest) : undefined;
}

/**
 * What retriedSince finds of the turns after `afterTurn` (as refusedRetry takes it) when the
 * request adding `items` retries them, with the session's newest turn; undefined when it does not.
 */
export async function retriedAfter(
  facade: Facade,
  sessionId: string,
  afterTurn: number | undefined,
  items: readonly ClientItem[],
  read?: SessionRecord,
): Promise<(RetriedSteps & { newest: number }) | undefined> {
  const { sessions } = facade.services;
  const session = read ?? (await sessions.get(sessionId));
  const newest = session.counts.turns;
  if (newest === 0 || (afterTurn !== undefined && afterTurn >= newest)) return undefined;
  const since =
    afterTurn === undefined
      ? { turn: newest - 1 }
      : { turn: afterTurn, items: await sessions.getTurn(sessionId, afterTurn).then(lastSeq) };
  const retried = await retriedSince(facade, session, since, items);
  return retried ? { ...retried, newest } : undefined;
}

function lastSeq(turn: { input: { last_seq: number } | null; output: { last_seq: number } | null }) {
  return turn.output?.last_seq ?? turn.input?.last_seq;
}

/**
 * A chat completion stores no turn: the refusal of one an `abort` notice of its session
 * (`x-tailgate-session`) refused is kept beside the session (keys.ts chatAbortKey: one object
 * per session, the latest abort's, deleted with the session), with the keyed hash of its
 * messages (as the history index keys a history: lib/openai/history-index.ts) and the session
 * as it stood. A request with the same messages while the session stands so (no turn or item
 * since, nor a turn taken and deleted: the same generation) is its retry, and is refused again
 * with that error, nothing run. A later abort of the session's chat completions takes its place.
 */
const chatAbortSchema = z
  .object({
    /** The keyed hash of the caller, the instructions and the messages. */
    messages: z.string(),
    session_id: z.string(),
    created_at: z.string(),
    /** The session's generation: a delete of its newest turn moves it on, though the counts go back. */
    generation: z.string(),
    turns: z.number().int(),
    items: z.number().int(),
    error: z.object({ code: z.string(), message: z.string(), details: z.unknown().optional() }),
  })
  .strict();

/** The request of a chat completion under a session: its messages as instructions and items. */
interface ChatRequest {
  sessionId: string;
  instructions: string | null;
  items: readonly Item[];
}

function messagesDigest(facade: Facade, request: ChatRequest): Promise<string> {
  const scope = JSON.stringify([facade.caller ?? '', 'chat', request.sessionId, request.instructions]);
  return historyDigest(facade, scope, request.items);
}

/** Keeps `refusal`, an abort of the chat completion `request` with `session` as read for it (a failure is logged). */
export async function keepChatAbort(
  facade: Facade,
  request: ChatRequest,
  session: SessionRecord,
  refusal: unknown,
): Promise<void> {
  const { counts } = session;
  const kept = { session_id: session.id, created_at: session.created_at, turns: counts.turns, items: counts.items };
  try {
    const [messages, { generation }] = await Promise.all([
      messagesDigest(facade, request),
      facade.services.sessions.scope(session.id),
    ]);
    const body = JSON.stringify({ messages, ...kept, generation, error: errorRecord(refusal) });
    const key = chatAbortKey(facade.config.keyPrefix, session.id);
    await facade.services.store.put(key, body, { contentType: 'application/json' });
  } catch (error) {
    facade.services.log('tailgate: could not keep the abort of a chat completion', error);
  }
}

/**
 * The refusal to answer again when the chat completion `request` retries one an abort refused
 * (keepChatAbort), once its session is read (`session`): one get, alongside that read (and
 * one of the session's config, for its generation, when the kept refusal's counts still hold).
 */
export async function chatAbortRetry(
  facade: Facade,
  request: ChatRequest,
): Promise<(session: SessionRecord) => Promise<ReplayedError | undefined>> {
  const [stored, messages] = await Promise.all([
    facade.services.store.get(chatAbortKey(facade.config.keyPrefix, request.sessionId)),
    messagesDigest(facade, request),
  ]);
  const kept = stored ? parseStoredOrUndefined(stored.body, chatAbortSchema) : undefined;
  return async (session) => {
    const holds =
      kept &&
      kept.messages === messages &&
      kept.session_id === session.id &&
      kept.created_at === session.created_at &&
      kept.turns === session.counts.turns &&
      kept.items === session.counts.items;
    if (!holds) return undefined;
    const { generation } = await facade.services.sessions.scope(session.id);
    return generation === kept.generation ? new ReplayedError(kept.error) : undefined;
  };
}

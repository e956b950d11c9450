import { LEASE_EXPIRED, NotFoundError } from '../errors.ts';
import { journalEvents, type TurnEvent } from '../turn/index.ts';
import { OpenAIApiError } from './errors.ts';
import type { Facade } from './facade.ts';
import { parseResponseId } from './ids.ts';
import { journaledResponseEvents } from './journaled-response.ts';
import type { ResponseEventWriter } from './response-events.ts';
import type { TailgateResponse } from './responses.ts';
import { getResponse, keptObject } from './stored-responses.ts';

/**
 * `GET /v1/responses/{id}?stream=true` of a foreground response that was streamed: every
 * streamed turn journals its events (lib/turn/stream-turn.ts), so a client that lost its stream
 * follows the rest from any process, as a background response's (./background-response.ts).
 * The journal goes through the writer its stream had (./stored-turn.ts, streamStoredTurn), so the
 * events and their sequence numbers are that stream's, and it ends as that stream ended: with
 * the object the response's create kept once its turn ended.
 */

/** How often a resumed stream looks for the object its response's owner keeps once its turn ended. */
const KEPT_POLL_MS = 250;

/**
 * How long after its turn ended a resumed stream looks for that object (at most a lease): its
 * owner puts it a few storage calls after the turn's completion (the read of a compaction's
 * summary, then the put), so one not there by then is not coming (its process died, or its
 * write failed), and a stream resumed later does not wait for it at all.
 */
const KEPT_WAIT_MS = 5_000;

/**
 * The events after `after` of the streamed foreground response `response` (as GET answers it).
 * `signal`: the request's; once it aborted (the client went away) while the turn runs without a
 * journal yet, the wait for it stops and the answer is a 499 that nobody reads.
 */
export async function streamedForeground(
  facade: Facade,
  response: TailgateResponse,
  after: number,
  signal?: AbortSignal,
): Promise<Response> {
  const found = await journaled(facade, response.id, signal);
  if (found === 'gone') return new Response(null, { status: 499 });
  if (!found)
    throw new OpenAIApiError(
      400,
      'invalid_request',
      'stream: this response was neither streamed nor created with background: true; only those can be streamed again.',
      'stream',
    );
  const scope = await facade.services.sessions.scope(parseResponseId(response.id)!.sessionId);
  return journaledResponseEvents(facade, runningForm(response), scope, after, (writer, last, unkept) =>
    ended(facade, response.id, writer, last, unkept),
  );
}

/**
 * Whether the response's turn has an event journal: its first event is awaited, as
 * `GET .../turns/{turn}/events` awaits it (a streamed turn's first batch lands within a second of
 * its `turn.started`, which came before its stream's first event; a turn that was not streamed
 * is known once it has ended; one whose owner died before its first batch has its journal ended
 * by the reader, its record saying it was streamed: at once after a close of its lease, a lease
 * after any other), or until `signal`
 * aborts: `gone`.
 */
async function journaled(facade: Facade, id: string, signal: AbortSignal | undefined): Promise<boolean | 'gone'> {
  const ref = parseResponseId(id)!;
  const events = journalEvents(facade.services, ref.sessionId, ref.turn, 0, signal);
  try {
    const first = await events.next();
    return first.done && signal?.aborted ? 'gone' : true;
  } catch (error) {
    if (error instanceof NotFoundError) return false;
    throw error;
  } finally {
    await events.return(undefined);
  }
}

/**
 * The object a foreground stream opened with (response.created, response.in_progress): the
 * response as its create answered it, running. Until the response ended nothing of its request
 * is kept but its turn: it is then the response rebuilt from its conversation (as GET answers it).
 */
function runningForm(response: TailgateResponse): TailgateResponse {
  // `usage` is null while a response runs (the specification's; the SDK types it optional).
  const running = {
    ...response,
    status: 'in_progress',
    completed_at: null,
    output: [],
    output_text: '',
    usage: null,
    error: null,
    incomplete_details: null,
  } as unknown as TailgateResponse;
  delete running.tailgate;
  return running;
}

/**
 * The stream's terminal event, once the journal ended: the compaction item and
 * response.completed (or response.incomplete), or response.failed, with the object the
 * response's owner kept. An owner keeps it right after the turn ended, about when it writes the
 * journal's last batch, so it is looked for until KEPT_WAIT_MS (at most a lease) after the turn
 * ended by its completion's time; one that died never keeps it (nor does one whose write
 * failed), and a turn its lease ended has none: the response is then answered as GET answers it.
 */
async function ended(
  facade: Facade,
  id: string,
  writer: ResponseEventWriter,
  last: TurnEvent | undefined,
  unkept: () => void,
): Promise<void> {
  const expired = last === undefined || (last.event === 'error' && last.data.error.code === LEASE_EXPIRED);
  let response = await keptObject(facade, id);
  if (!response) {
    const rebuilt = await getResponse(facade, id);
    const until = Date.now() + (expired ? 0 : keptWait(facade, rebuilt));
    while (!response && Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, KEPT_POLL_MS));
      response = await keptObject(facade, id);
    }
    // Its owner sends the end live only after its put of the object: with none kept, a client
    // past every event the journal gives (its owner streamed more live, then died) has not had it.
    // An owner whose put failed sent it all the same: its client, resumed at it, gets it again.
    if (!response) unkept();
    response ??= rebuilt;
  }
  if (response.status === 'completed' || response.status === 'incomplete') {
    writer.completed(response);
  } else if (response.status !== 'queued' && response.status !== 'in_progress') writer.failed(response);
}

/**
 * How much longer the owner's object of `rebuilt` (the response as GET answers it without it) is
 * looked for: what is left of KEPT_WAIT_MS (at most a lease) since its turn ended, by the
 * completion's time and this process's clock; all of it when the turn reads as still running.
 */
function keptWait(facade: Facade, rebuilt: TailgateResponse): number {
  const { services } = facade;
  const wait = Math.min(KEPT_WAIT_MS, services.config.turnLeaseMs);
  const completedAt = rebuilt.completed_at;
  if (completedAt === null || completedAt === undefined) return wait;
  return Math.max(0, Math.min(wait, wait - (services.clock().getTime() - completedAt * 1000)));
}

import type { ResponseOutputItem } from 'openai/resources/responses/responses';
import { TurnNotOpenError } from '../errors.ts';
import type { TurnSummary } from '../session/log/turns.ts';
import {
  cancelOpenTurn,
  claimBackgroundTurn,
  turnAsItStands,
  type TurnOptions,
  type TurnRequest,
  type TurnResponse,
} from '../turn/index.ts';
import { turnCompactionOutput } from './compaction.ts';
import { OpenAIApiError } from './errors.ts';
import type { Facade } from './facade.ts';
import { parseResponseId, responseId, type ResponseRef } from './ids.ts';
import { storedItemId } from './listed-items.ts';
import type { LogScope } from '../session/keys.ts';
import { idGeneration } from '../session/log/rewind.ts';
import { buildResponse, turnCost, usageOf, type StoredContext, type TailgateResponse } from './responses.ts';
import { outputItems } from './output-items.ts';
import { journaledResponseEvents } from './journaled-response.ts';
import { streamedForeground } from './resumed-response.ts';
import { endedResponse, settledAs, withStoppedUsage } from './settled-response.ts';
import { getResponse, readResponse, saveResponse } from './stored-responses.ts';

/**
 * Background responses (`background: true`): the native background turn (lib/turn/background.ts)
 * under a response id. The create claims the turn, keeps the response object as it stands then
 * (status `queued`, create-only beside the session, as every stored response is kept) and hands
 * the turn to its runner. GET reads the turn's receipt while that object says it runs; cancel
 * is the native cancel; `GET ...?stream=true` maps the turn's event journal onto the Responses
 * events, numbered the same on every replay, so `starting_after` resumes from any process.
 */

/**
 * POST /v1/responses with `background: true`: the queued response, or with `stream` its events
 * (`stream`: how a foreground response's are, which its key sent again with `background` streams
 * as its retry without `background` does: replayed from its stored answer, not its journal).
 */
export async function createBackgroundResponse(
  facade: Facade,
  context: StoredContext,
  request: TurnRequest,
  options: TurnOptions,
  stream: false | (() => Promise<Response>),
): Promise<TailgateResponse | Response> {
  const { services } = facade;
  const sessionId = context.session.id;
  // A retry under the key of a response still running is answered as it stands, as a later one.
  const claimed = await claimBackgroundTurn(services, sessionId, request, { ...options, answerRunning: true });
  const [{ input }, scope] = await Promise.all([
    services.sessions.getTurn(sessionId, claimed.turn),
    services.sessions.scope(sessionId),
  ]);
  const outputSeq = (input?.last_seq ?? 0) + 1;
  const inputSeq = input?.first_seq ?? outputSeq - context.inputCount;
  const generation = idGeneration(scope, inputSeq);
  const ref: ResponseRef = {
    sessionId,
    turn: claimed.turn,
    inputSeq,
    outputSeq,
    ...(generation ? { generation } : {}),
  };
  const queued = buildResponse({
    ...context.fields,
    id: responseId(ref),
    status: 'queued',
    output: [],
    background: true,
    tailgate: { session_id: sessionId, turn: claimed.turn },
  });
  // Kept before the runner starts, so GET finds it; a keyed retry keeps the first, and streams it.
  const kept = await saveResponse(facade, context.session, claimed.turn, queued, context.loop);
  if (claimed.run) await services.startBackground(claimed.run);
  if (stream) return kept.background ? responseEvents(facade, kept, -1) : stream();
  return claimed.run ? queued : currentResponse(facade, queued.id);
}

/** The background response `kept` as its turn's receipt says it stands. */
async function settled(facade: Facade, kept: TailgateResponse, ref: ResponseRef): Promise<TailgateResponse> {
  // A turn whose runner died is failed once its lease ran out, as GET .../turns/{turn} answers it.
  const summary = await turnAsItStands(facade.services, ref.sessionId, ref.turn);
  return settledAs(facade, kept, ref, summary, () => readResponse(facade, kept.id));
}

/** GET /v1/responses/{id}: the kept object; a background one that was running, as it stands now. */
export async function currentResponse(facade: Facade, id: string): Promise<TailgateResponse> {
  const kept = await getResponse(facade, id);
  const ref = parseResponseId(id);
  if (!ref) return kept;
  // A streamed response whose turn someone else stopped was kept before its spend was stored.
  if (!kept.background) return withStoppedUsage(facade, kept, ref);
  if (kept.status !== 'queued' && kept.status !== 'in_progress') return kept;
  return settled(facade, kept, ref);
}

/**
 * POST /v1/responses/{id}/cancel: the native cancel of a background response's turn (its runner
 * stops within a third of the lease, gives its notices back and stores nothing of its answer;
 * lib/turn/busy.ts, cancelOpenTurn).
 * A response that already ended is answered as it stands; a foreground one is OpenAI's 400.
 */
export async function cancelResponse(facade: Facade, id: string): Promise<TailgateResponse> {
  const current = await currentResponse(facade, id);
  if (!current.background)
    throw new OpenAIApiError(400, 'invalid_request', 'Cannot cancel a synchronous response.', null);
  if (current.status !== 'queued' && current.status !== 'in_progress') return current;
  const { services } = facade;
  const ref = parseResponseId(id)!;
  try {
    await cancelOpenTurn(services, ref.sessionId, ref.turn);
  } catch (error) {
    if (!(error instanceof TurnNotOpenError)) throw error;
  }
  return currentResponse(facade, id);
}

/**
 * GET /v1/responses/{id}?stream=true: the events of a background response, or of a streamed
 * foreground one (./resumed-response.ts), after `after`; `signal` is the request's.
 */
export async function streamResponse(
  facade: Facade,
  id: string,
  after: number,
  signal?: AbortSignal,
): Promise<Response> {
  const kept = await getResponse(facade, id);
  return kept.background ? responseEvents(facade, kept, after) : streamedForeground(facade, kept, after, signal);
}

/**
 * The Responses events of a background response after `after` (./journaled-response.ts), ending
 * as its turn ended: response.completed built from the journal's turn.completed, else as its
 * receipt says it stands.
 */
async function responseEvents(facade: Facade, kept: TailgateResponse, after: number): Promise<Response> {
  const ref = parseResponseId(kept.id)!;
  const scope = await facade.services.sessions.scope(ref.sessionId);
  return journaledResponseEvents(facade, kept, scope, after, async (writer, last) => {
    if (last?.event === 'turn.completed') {
      const [compacted, { completed_at }] = await Promise.all([
        turnCompactionOutput(facade, ref.sessionId, ref.turn, last.data.context),
        facade.services.sessions.getTurn(ref.sessionId, ref.turn),
      ]);
      writer.completed(completedResponse(kept, scope, { ...last.data, completed_at }, compacted));
    } else {
      const ended = await settled(facade, kept, ref);
      if (ended.status === 'completed' || ended.status === 'incomplete') writer.completed(ended);
      else writer.failed(ended);
    }
  });
}

function completedResponse(
  kept: TailgateResponse,
  scope: LogScope,
  turn: TurnResponse & Pick<TurnSummary, 'completed_at'>,
  compacted: ResponseOutputItem[],
): TailgateResponse {
  const output = turn.output.flatMap((item) => outputItems(item, (type) => storedItemId(scope, type, item.seq)));
  return endedResponse(
    kept,
    turn.incomplete ? 'incomplete' : 'completed',
    {
      completedAt: turn.completed_at,
      output: [...output, ...compacted],
      usage: usageOf(turn.usage),
      incomplete: turn.incomplete,
    },
    { context: turn.context, ...turnCost(turn) },
  );
}

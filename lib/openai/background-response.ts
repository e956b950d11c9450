import type { ResponseOutputItem } from 'openai/resources/responses/responses';
import { NotFoundError, TurnNotOpenError } from '../errors.ts';
import type { TurnSummary } from '../session/log/turns.ts';
import {
  cancelOpenTurn,
  claimBackgroundTurn,
  journalEvents,
  turnAsItStands,
  type TurnEvent,
  type TurnOptions,
  type TurnRequest,
  type TurnResponse,
} from '../turn/index.ts';
import { turnCompactionOutput } from './compaction.ts';
import { OpenAIApiError } from './errors.ts';
import type { Facade } from './facade.ts';
import { itemId, parseResponseId, responseId, type ResponseRef } from './ids.ts';
import { idGeneration } from '../session/log/rewind.ts';
import {
  buildResponse,
  outputItem,
  turnCost,
  usageOf,
  type StoredContext,
  type TailgateResponse,
} from './responses.ts';
import { responseEventStream } from './sse.ts';
import { endedResponse, settledAs } from './settled-response.ts';
import { getResponse, readResponse, saveResponse } from './stored-responses.ts';

/**
 * Background responses (`background: true`): the native background turn (lib/turn/background.ts)
 * under a response id. The create claims the turn, keeps the response object as it stands then
 * (status `queued`, create-only beside the session, as every stored response is kept) and hands
 * the turn to its runner. GET reads the turn's receipt while that object says it runs; cancel
 * is the native cancel; `GET ...?stream=true` maps the turn's event journal onto the Responses
 * events, numbered the same on every replay, so `starting_after` resumes from any process.
 */

/** POST /v1/responses with `background: true`: the queued response, or with `stream` its events. */
export async function createBackgroundResponse(
  facade: Facade,
  context: StoredContext,
  request: TurnRequest,
  options: TurnOptions,
  stream: boolean,
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
  const kept = await saveResponse(facade, context.session, claimed.turn, queued);
  if (claimed.run) await services.startBackground(claimed.run);
  if (stream) return responseEvents(facade, kept, -1);
  return claimed.run ? queued : currentResponse(facade, queued.id);
}

/** The background response `kept` as its turn's receipt says it stands. */
async function settled(facade: Facade, kept: TailgateResponse, ref: ResponseRef): Promise<TailgateResponse> {
  // A turn whose runner died is failed once its lease ran out, as GET .../turns/{turn} answers it.
  const summary = await turnAsItStands(facade.services, ref.sessionId, ref.turn);
  return settledAs(facade, kept, ref, summary, async () => (await readResponse(facade, kept.id)).output);
}

/** GET /v1/responses/{id}: the kept object; a background one that was running, as it stands now. */
export async function currentResponse(facade: Facade, id: string): Promise<TailgateResponse> {
  const kept = await getResponse(facade, id);
  const ref = parseResponseId(id);
  if (!kept.background || !ref || (kept.status !== 'queued' && kept.status !== 'in_progress')) return kept;
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

/** GET /v1/responses/{id}?stream=true: the events of a background response after `after`. */
export async function streamResponse(facade: Facade, id: string, after: number): Promise<Response> {
  const kept = await getResponse(facade, id);
  if (!kept.background)
    throw new OpenAIApiError(
      400,
      'invalid_request',
      'This response was not created with background: true; only background responses can be streamed again.',
      'stream',
    );
  return responseEvents(facade, kept, after);
}

/**
 * The Responses events of a background response: its journal replayed from the start through
 * the one event writer, so each event has the same sequence_number on every replay, and only
 * those after `after` are sent. Followed live to the end; a client that goes away stops it.
 * A turn the queue delivered again has a run after another in its journal (each from its
 * `turn.started`): the output of a run that a later one the journal holds did again is numbered
 * but not sent, and a later run's items start from the response's first again, so the stream
 * carries each item once, as response.completed does (a reader that followed the earlier run
 * live has seen it, and gets the item again from the later run).
 * A storage error while reading it is read past once (from the last event read); a second, or
 * one reading how the turn ended, ends the stream without a terminal event (the client resumes
 * with `starting_after`): the response did not fail.
 */
function responseEvents(facade: Facade, kept: TailgateResponse, after: number): Response {
  const ref = parseResponseId(kept.id)!;
  const stop = new AbortController();
  const stream = responseEventStream((index, item) => itemId(item.type, ref.sessionId, ref.outputSeq + index), {
    after,
    onCancel: () => stop.abort(),
  });
  const { writer } = stream;
  writer.started(kept);
  let read = 0;
  let last: TurnEvent | undefined;
  // The number of the last run's turn.started the journal held when the stream began.
  let lastRun: number | undefined;
  const write = ({ n, event, data }: { n: number; event: string; data: unknown }) => {
    const first = read === 0;
    read = n;
    last = { event, data } as TurnEvent;
    stream.mute(n < lastRun!);
    if (last.event === 'turn.started' && !first) writer.restart();
    else writer.turnOutput(last);
  };
  const readJournal = async () => {
    const { services } = facade;
    if (lastRun === undefined) {
      // What the journal holds now (an aborted reader reads it once), to know its last run.
      const held: { n: number; event: string; data: unknown }[] = [];
      for await (const event of journalEvents(services, ref.sessionId, ref.turn, read, AbortSignal.abort()))
        held.push(event);
      lastRun = held.findLast((event) => event.event === 'turn.started')?.n ?? 0;
      for (const event of held) write(event);
      if (last?.event === 'turn.completed') return;
    }
    for await (const event of journalEvents(services, ref.sessionId, ref.turn, read, stop.signal)) write(event);
  };
  const follow = async () => {
    try {
      await readJournal().catch((error: unknown) => {
        if (error instanceof NotFoundError) throw error;
        facade.services.log("tailgate: could not read a background response's journal; reading on", error);
        return readJournal();
      });
    } catch (error) {
      // A turn closed before it started (cancelled while queued) has no journal.
      if (!(error instanceof NotFoundError)) throw error;
    }
    if (stop.signal.aborted) return;
    if (last?.event === 'turn.completed') {
      const [compacted, { completed_at }] = await Promise.all([
        turnCompactionOutput(facade, ref.sessionId, ref.turn, last.data.context),
        facade.services.sessions.getTurn(ref.sessionId, ref.turn),
      ]);
      for (const item of compacted) writer.wholeItem(item);
      writer.completed(completedResponse(kept, ref, { ...last.data, completed_at }, compacted));
    } else {
      const ended = await settled(facade, kept, ref);
      if (ended.status === 'completed' || ended.status === 'incomplete') writer.completed(ended);
      else writer.failed(ended);
    }
  };
  facade.services.background(
    follow()
      .catch((error: unknown) =>
        facade.services.log('tailgate: could not stream a background response; its stream ends unfinished', error),
      )
      .finally(stream.close),
  );
  return stream.response();
}

function completedResponse(
  kept: TailgateResponse,
  ref: ResponseRef,
  turn: TurnResponse & Pick<TurnSummary, 'completed_at'>,
  compacted: ResponseOutputItem[],
): TailgateResponse {
  const output = turn.output.map((item) => outputItem(item, itemId(item.type, ref.sessionId, item.seq)));
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

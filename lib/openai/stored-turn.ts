import type { ResponseOutputItem } from 'openai/resources/responses/responses';
import { TURN_CANCELLED } from '../errors.ts';
import { currentResponse } from './background-response.ts';
import { openaiFailure } from './errors.ts';
import type { ClientItem } from '../items.ts';
import { runTurn, streamTurn, type TurnOptions, type TurnRequest, type TurnResponse } from '../turn/index.ts';
import type { Facade } from './facade.ts';
import { compactionOutput } from './compaction.ts';
import { indexCompaction } from './compaction-index.ts';
import { indexHistory } from './history-index.ts';
import { responseId, type ResponseRef } from './ids.ts';
import { storedItemId } from './listed-items.ts';
import { idGeneration } from '../session/log/rewind.ts';
import { deleteNewestTurn } from '../turn/fork.ts';
import type { LogScope } from '../session/keys.ts';
import { buildResponse, turnCost, usageOf, type StoredContext, type TailgateResponse } from './responses.ts';
import { keptLogprobs } from './logprobs.ts';
import { outputItems } from './output-items.ts';
import type { TokenLogprob } from '../models/model.ts';
import { responseEventStream } from './sse.ts';
import { getResponse, saveResponse } from './stored-responses.ts';

/**
 * A stored response's turn once its conversation and input are settled (./create-response.ts):
 * its answer built, kept for GET and indexed for the client's next step, streamed as the
 * Responses events, or, failed before it answered, taken out of its conversation again.
 */

/**
 * Keeps the response for GET, and indexes the conversation's history for the client's next step
 * (and, when the response compacted, the conversation under its compaction item).
 * Answers the response kept: a replayed turn's is its first response (a background one's, as it
 * stands now: its kept object is the `queued` one its create answered).
 */
async function ended(
  facade: Facade,
  context: StoredContext,
  turn: TurnResponse,
  answer: TailgateResponse,
  scope: LogScope,
): Promise<TailgateResponse> {
  const kept = await saveResponse(facade, context.session, turn.turn, answer, context.loop);
  const state = { generation: scope.generation, turn: turn.turn, items: turn.output.at(-1)?.seq };
  const compaction = answer.output.find((item) => item.type === 'compaction');
  await Promise.all([
    context.history &&
      indexHistory(
        facade,
        context.session,
        { ...state, scope: context.history.scope },
        [...context.history.before, ...(turn.output as ClientItem[])],
        context.history.replaced,
      ),
    // A client may go on from the compaction item, dropping what came before it (OpenAI's advice).
    compaction &&
      indexCompaction(facade, context.session, state, { id: compaction.id, summary: compaction.encrypted_content }),
  ]);
  return kept.background ? currentResponse(facade, kept.id) : kept;
}

function refOf(context: StoredContext, turn: number, firstSeq: number, scope: LogScope): ResponseRef {
  const inputSeq = firstSeq - context.inputCount;
  const generation = idGeneration(scope, inputSeq);
  return { sessionId: context.session.id, turn, inputSeq, outputSeq: firstSeq, ...(generation ? { generation } : {}) };
}

function storedResponse(
  context: StoredContext,
  response: TurnResponse,
  firstSeq: number,
  compacted: ResponseOutputItem[],
  scope: LogScope,
  completedAt: Date,
  /** The model's log probabilities of each output item's tokens, when it gave them (TurnOptions.onLogprobs). */
  logprobs: readonly TokenLogprob[][] | undefined,
): TailgateResponse {
  return buildResponse({
    ...context.fields,
    completedAt,
    id: responseId(refOf(context, response.turn, firstSeq, scope)),
    status: response.incomplete ? 'incomplete' : 'completed',
    ...(response.incomplete ? { incomplete: response.incomplete } : {}),
    output: [
      ...response.output.flatMap((item, index) =>
        outputItems(item, (type) => storedItemId(scope, type, item.seq), false, logprobs?.[index]),
      ),
      ...compacted,
    ],
    usage: usageOf(response.usage),
    tailgate: {
      session_id: response.session_id,
      turn: response.turn,
      context: response.context,
      ...turnCost(response),
      ...(context.resent ? { resent: context.resent } : {}),
    },
  });
}

/**
 * A turn that is not streamed, answered once it ended. A failed response leaves nothing in its
 * conversation, as OpenAI's: its turn goes again, so a retry (the official client retries a 5xx)
 * or a resend of the history continues from the response before it. What refused or failed the
 * turn is answered by `refused` (the caller may take the request elsewhere: a branch).
 */
export async function runStoredTurn(
  facade: Facade,
  context: StoredContext,
  request: TurnRequest,
  options: TurnOptions,
  refused: (error: unknown) => Promise<TailgateResponse | Response>,
): Promise<TailgateResponse | Response> {
  const { services } = facade;
  const sessionId = context.session.id;
  let failed: Parameters<NonNullable<TurnOptions['onFailed']>>[0] | undefined;
  let logprobs: TokenLogprob[][] | undefined;
  // Its record says so: a request that finds it left by a dead process takes it out (./dead-turn.ts).
  const answered = {
    ...options,
    answeredAtEnd: true,
    onFailed: (turn: NonNullable<typeof failed>) => (failed = turn),
    onLogprobs: (got: TokenLogprob[][]) => (logprobs = got),
  };
  const pending = runTurn(services, sessionId, request, answered);
  services.background(
    pending.then(
      () => undefined,
      () => undefined,
    ),
  );
  let response: TurnResponse;
  try {
    response = await pending;
  } catch (error) {
    if (failed) await withdrawFailed(facade, sessionId, failed);
    return refused(error);
  }
  // An empty output has no seq: it would have started right after the turn's input (not after the
  // session's newest item, which a later turn moves on, when this is a keyed retry).
  const firstSeq =
    response.output[0]?.seq ?? ((await services.sessions.getTurn(sessionId, response.turn)).input?.last_seq ?? 0) + 1;
  const scope = await services.sessions.scope(sessionId);
  const compacted = await compactionOutput(facade, response);
  const answer = storedResponse(context, response, firstSeq, compacted, scope, services.clock(), logprobs);
  return ended(facade, context, response, answer, scope);
}

/**
 * A streamed turn as Responses events. An error before the first event (404, 409, an abort,
 * a prompt over the context window) is thrown, so it is answered with its status, its failed
 * turn taken out as a response that is not streamed has it; after that it ends the stream as
 * response.failed, and the failed turn stays (its id was given out). Its turn journals the
 * events, so a client that lost the stream resumes it (./resumed-response.ts).
 */
export async function streamStoredTurn(
  facade: Facade,
  context: StoredContext,
  request: TurnRequest,
  options: TurnOptions,
): Promise<Response> {
  const { services } = facade;
  let failed: Parameters<NonNullable<TurnOptions['onFailed']>>[0] | undefined;
  let logprobs: TokenLogprob[][] | undefined;
  const turn = streamTurn(services, context.session.id, request, {
    ...options,
    onFailed: (turn) => (failed = turn),
    onLogprobs: (got) => (logprobs = got),
  });
  services.background(turn.done);
  const iterator = turn.events[Symbol.asyncIterator]();
  const first = await iterator.next();
  if (first.done) throw new Error('the turn ended without events');
  if (first.value.event === 'error') {
    if (failed) await withdrawFailed(facade, context.session.id, failed);
    throw first.value.cause;
  }
  if (first.value.event !== 'turn.started') throw new Error(`unexpected first turn event ${first.value.event}`);
  const { turn: number, first_seq: firstSeq } = first.value.data;
  // The generation the turn is in (a delete of the newest turn may have written it): its id names it.
  // Unread, the turn's events are drained, so the turn runs to its end whatever this answers.
  const scope = await services.sessions.scope(context.session.id).catch(async (error: unknown) => {
    services.background(drain(iterator));
    throw error;
  });
  const id = responseId(refOf(context, number, firstSeq, scope));
  // A replayed turn is answered as its first response was: created when that one was, its text
  // events carrying the tokens' log probabilities that response's object keeps (none when rebuilt).
  const kept = first.value.replay ? await getResponse(facade, id).catch(() => undefined) : undefined;
  const createdAt = kept ? new Date(kept.created_at * 1000) : context.fields.createdAt;
  const replayed = kept && keptLogprobs(kept);
  if (replayed) logprobs = replayed;
  let replayedItem = 0;
  const answered = { ...context, fields: { ...context.fields, createdAt } };
  const base = { ...answered.fields, id, output: [] as ResponseOutputItem[] };
  const stream = responseEventStream((index, item) => storedItemId(scope, item.type, firstSeq + index));
  const { writer } = stream;
  writer.started(buildResponse({ ...base, status: 'in_progress' }));
  const finished = (async () => {
    for (;;) {
      const next = await iterator.next();
      if (next.done) break;
      const event = next.value;
      if (replayed && event.event === 'output_text.delta') {
        writer.delta(event.data.delta, replayed[replayedItem] ?? []);
        continue;
      }
      if (replayed && event.event === 'output_item.done') replayedItem += 1;
      if (writer.turnOutput(event)) continue;
      if (event.event === 'turn.completed') {
        const compacted = await compactionOutput(facade, event.data).catch((error: unknown) => {
          services.log('tailgate: could not read the summary of a compacted response', error);
          return [];
        });
        const answer = storedResponse(answered, event.data, firstSeq, compacted, scope, services.clock(), logprobs);
        writer.completed(await ended(facade, context, event.data, answer, scope));
      } else if (event.event === 'error') {
        const error = openaiFailure(event.data.error);
        // A turn someone else cancelled (a native cancel, an `interrupt`) is `cancelled`, as its receipt reads.
        const status = error.code === TURN_CANCELLED ? 'cancelled' : 'failed';
        const failed = buildResponse({ ...base, completedAt: services.clock(), status, error });
        await saveResponse(facade, context.session, number, failed, context.loop);
        writer.failed(failed);
      }
    }
  })();
  services.background(finished.finally(stream.close));
  return stream.response();
}

/**
 * Takes a failed turn out of its conversation (lib/session/log/rewind.ts); one that took inbox
 * notices, or that a later turn follows already, stays (logged).
 */
async function withdrawFailed(
  facade: Facade,
  sessionId: string,
  failed: { turn: number; seq: number; generation: string | undefined },
): Promise<void> {
  await deleteNewestTurn(facade.services, sessionId, failed.turn, {
    names: { seq: failed.seq, generation: failed.generation },
  }).catch((error: unknown) =>
    facade.services.log(`tailgate: failed turn ${failed.turn} of ${sessionId} stays in its conversation`, error),
  );
}

async function drain(iterator: AsyncIterator<unknown>): Promise<void> {
  while (!(await iterator.next()).done);
}

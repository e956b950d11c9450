import { z } from 'zod';
import { parseStoredOrUndefined } from '../session/records.ts';
import type { Tool as OpenAITool } from 'openai/resources/responses/responses';
import { NotFoundError } from '../errors.ts';
import type { StoredItem, Tool } from '../items.ts';
import { responseObjectKey, type LogScope } from '../session/keys.ts';
import { scopeOf } from '../session/log/head.ts';
import { idGeneration } from '../session/log/rewind.ts';
import { OpenAIApiError } from './errors.ts';
import type { Facade } from './facade.ts';
import { parseResponseId, responseId, type ResponseRef } from './ids.ts';
import { modelName } from './models.ts';
import { buildResponse, DEFAULT_SETTINGS, type TailgateResponse } from './responses.ts';
import { settledAs } from './settled-response.ts';
import { isOutput, itemsBetween } from './sessions.ts';
import { deleteNewestTurn } from '../turn/fork.ts';
import { turnAsItStands } from '../turn/journal.ts';

/**
 * Stored responses. A response's items are its session's (read back by seq, lib/openai/ids.ts);
 * what else its create answered (previous_response_id, temperature, a compaction item...) is
 * kept beside the session as the response object itself, written once when the response
 * ends: `<keyPrefix>sessions/<id>/openai/<created ms>/<turn>.json`. The session's creation
 * time names its incarnation, so a session created again under the same id never reads the
 * objects of the one deleted (whose sweep removes them, docs/STORAGE.md).
 */

/**
 * Keeps `response` for GET /v1/responses/{id} (create-only: a replayed turn keeps the first),
 * and answers the response kept: for a replayed turn the first one, its created_at and
 * completed_at included. An object of another response under its key is of a deleted turn
 * whose number this one took (a delete that stopped before removing it): it is replaced. A
 * failed write is logged: GET then rebuilds the response from the session. `loop`, the tag of
 * the loop its request was a step of (./sessions.ts loopTag, or under `conversation` its input's:
 * ./conversation-resend.ts), is kept with it, never answered.
 */
export async function saveResponse(
  facade: Facade,
  session: { id: string; created_at: string },
  turn: number,
  response: TailgateResponse,
  loop?: string,
): Promise<TailgateResponse> {
  const { store } = facade.services;
  const key = responseObjectKey(facade.config.keyPrefix, session, turn);
  const body = JSON.stringify(loop !== undefined ? { ...response, [LOOP_FIELD]: loop } : response);
  const options = { contentType: 'application/json' };
  try {
    if (await store.put(key, body, { ...options, onlyIfAbsent: true })) return response;
    const kept = await store.get(key);
    const first = kept && keptResponse(kept.body)?.response;
    if (first?.id === response.id) return first;
    if (kept) await store.put(key, body, { ...options, ifMatch: kept.etag });
  } catch (error) {
    facade.services.log('tailgate: could not keep a response object', error);
  }
  return response;
}

/**
 * What every kept response object has (buildResponse writes them whole): one without it, edited
 * or cut short, is not answered, but rebuilt from the session.
 */
const keptResponseSchema = z.looseObject({
  id: z.string(),
  object: z.literal('response'),
  created_at: z.number(),
  status: z.string(),
  model: z.string(),
  output: z.array(z.looseObject({ type: z.string() })),
});

/** The field of a kept object that holds its loop's tag (saveResponse), taken off what is answered. */
const LOOP_FIELD = 'tailgate_loop';

/** A kept response object and its loop's tag, or null when it is not one (GET then rebuilds it). */
function keptResponse(body: Uint8Array): { response: TailgateResponse; loop: string | undefined } | null {
  const parsed = parseStoredOrUndefined(body, keptResponseSchema);
  if (!parsed) return null;
  const { [LOOP_FIELD]: loop, ...response } = parsed;
  return { response: response as unknown as TailgateResponse, loop: typeof loop === 'string' ? loop : undefined };
}

/** The function tools of a session in OpenAI's shape. */
export function openaiTools(tools: readonly Tool[]): OpenAITool[] {
  return tools.map((tool) => ({
    type: 'function',
    name: tool.name,
    description: tool.description ?? null,
    parameters: tool.parameters ?? null,
    strict: tool.strict ?? false,
  }));
}

/** Model outputs past the newest that a turn may hold, read back for GET. */
const OUTPUT_WINDOW = 64;

/** A stored response and its items, read back from its session (404 when it is not there). */
export async function readResponse(facade: Facade, id: string) {
  const ref = parseResponseId(id);
  const missing = () => responseNotFound(id);
  if (!ref) throw missing();
  const { services } = facade;
  const [session, scope] = await Promise.all([
    services.sessions.get(ref.sessionId),
    services.sessions.scope(ref.sessionId),
  ]).catch((error: unknown) => {
    throw error instanceof NotFoundError ? missing() : error;
  });
  // Another turn took the number and seqs of the one the id names (it was deleted): 404.
  if (idGeneration(scope, ref.inputSeq) !== ref.generation) throw missing();
  if (ref.turn > session.counts.turns || ref.outputSeq > session.counts.items + 1) throw missing();
  const items = await itemsBetween(
    facade,
    ref.sessionId,
    ref.inputSeq,
    Math.min(ref.outputSeq + OUTPUT_WINDOW, session.counts.items + 1),
  );
  const input = items.filter((item) => item.seq < ref.outputSeq);
  const output: StoredItem[] = [];
  for (const item of items) {
    if (item.seq < ref.outputSeq) continue;
    if (
      !isOutput(item) ||
      (output[0] && item.created_at !== output[0].created_at) ||
      item.seq !== ref.outputSeq + output.length
    )
      break;
    output.push(item);
  }
  if (input.length !== ref.outputSeq - ref.inputSeq) throw missing();
  return { ref, session, scope, input, output };
}

/**
 * GET /v1/responses/{id}: the response as its create answered it (two reads: the session
 * config and the response object), or, for a response without one, rebuilt from the session.
 */
export async function getResponse(facade: Facade, id: string): Promise<TailgateResponse> {
  return (await keptObject(facade, id)) ?? rebuiltResponse(facade, id);
}

/** The object kept for response `id` (a foreground one's is written once it ended), or undefined. */
export async function keptObject(facade: Facade, id: string): Promise<TailgateResponse | undefined> {
  const ref = parseResponseId(id);
  const kept = ref && (await keptOfTurn(facade, ref.sessionId, ref.turn));
  return kept?.response.id === id ? kept.response : undefined;
}

/**
 * The object kept for turn `turn` of `sessionId` (two reads: the session config and the object;
 * one with `head`, the session and where its incarnation keeps its objects, read already), with
 * its id's parts and its loop's tag (saveResponse); undefined when there is none, or when the
 * turn no longer holds the seqs its id names (a deleted turn's object a delete left).
 */
export async function keptOfTurn(
  facade: Facade,
  sessionId: string,
  turn: number,
  head?: { session: { id: string; created_at: string }; scope: LogScope },
): Promise<{ response: TailgateResponse; ref: ResponseRef; loop: string | undefined } | undefined> {
  const { keyPrefix } = facade.config;
  const config = head ? undefined : await facade.services.sessions.config(sessionId).catch(() => undefined);
  const where = head ?? (config && { session: config, scope: scopeOf(keyPrefix, config) });
  const object = where && (await facade.services.store.get(responseObjectKey(keyPrefix, where.session, turn)));
  const kept = object && keptResponse(object.body);
  const ref = kept && parseResponseId(kept.response.id);
  if (
    !where ||
    !kept ||
    !ref ||
    ref.sessionId !== sessionId ||
    ref.turn !== turn ||
    idGeneration(where.scope, ref.inputSeq) !== ref.generation
  )
    return undefined;
  return { ...kept, ref };
}

/**
 * A response without a kept object (a foreground one still running, or one whose object could
 * not be kept), from its conversation and its turn's receipt: running while its turn is open
 * (a turn whose lease ran out is closed first, as GET .../turns/{turn} closes it), else as its
 * turn ended. Its model is the name the turn's model answers to (lib/openai/models.ts).
 */
async function rebuiltResponse(facade: Facade, id: string): Promise<TailgateResponse> {
  const { ref, session, scope, input, output } = await readResponse(facade, id);
  const summary = await turnAsItStands(facade.services, ref.sessionId, ref.turn).catch((error: unknown) => {
    throw error instanceof NotFoundError ? responseNotFound(id) : error;
  });
  const running = buildResponse({
    id: responseId(ref),
    createdAt: new Date((output[0] ?? input[0])!.created_at),
    status: 'in_progress',
    model: modelName(facade.config, summary.model ?? session.model ?? facade.config.defaultModel),
    output: [],
    instructions: session.instructions,
    tools: openaiTools(session.tools),
    settings: DEFAULT_SETTINGS,
    previousResponseId: null,
    conversationId: ref.sessionId,
    store: true,
    tailgate: { session_id: ref.sessionId, turn: ref.turn },
  });
  return settledAs(facade, running, ref, summary, async () => ({ output, scope }));
}

/**
 * DELETE /v1/responses/{id}: takes the newest response out of its conversation, which goes
 * back to the response before it (lib/session/log/rewind.ts); its kept object goes once the
 * session has fenced the turn. Another response came after it: 409 delete_refused; gone
 * already, or another response took its place: 404 (the delete checks the id's generation
 * against the head it fences).
 */
export async function deleteResponse(facade: Facade, id: string): Promise<void> {
  const { ref } = await readResponse(facade, id);
  await deleteNewestTurn(facade.services, ref.sessionId, ref.turn, {
    names: { seq: ref.inputSeq, generation: ref.generation },
  }).catch((error: unknown) => {
    throw error instanceof NotFoundError ? responseNotFound(id) : error;
  });
}

function responseNotFound(id: string): OpenAIApiError {
  return new OpenAIApiError(404, 'not_found', `Response with id '${id}' not found.`, 'response_id');
}

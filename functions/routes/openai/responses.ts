import { createRoute } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type {
  ResponseItem,
  ResponseOutputItem,
  ResponseStreamEvent,
  Tool as OpenAITool,
} from 'openai/resources/responses/responses';
import { z } from 'zod';
import {
  clientError,
  NotFoundError,
  NotNewestTurnError,
  UnknownModelError,
  SessionExistsError,
} from '../../../lib/errors.ts';
import { sha256Hex } from '../../../lib/hash.ts';
import type { Item, StoredItem, Tool } from '../../../lib/items.ts';
import { compactionItem } from '../../../lib/openai/compaction.ts';
import {
  compactionId,
  itemId,
  parseResponseId,
  randomId,
  responseId,
  type ResponseRef,
} from '../../../lib/openai/ids.ts';
import {
  buildResponse,
  inputToItems,
  outputItem,
  ResponseEventWriter,
  storedItem,
  usageOf,
  type ResponseFields,
  type TailgateResponse,
} from '../../../lib/openai/responses.ts';
import { runStateless } from '../../../lib/openai/stateless.ts';
import {
  errorRecord,
  runTurn,
  streamTurn,
  type TurnOptions,
  type TurnRequest,
  type TurnResponse,
} from '../../../lib/turn.ts';
import { authorizeSession } from '../../auth.ts';
import { checkItemSizes } from '../../item-size.ts';
import { jsonBody } from '../../openapi-helpers.ts';
import { createRouter, type AppEnv } from '../../router.ts';
import type { AppServices } from '../../services.ts';
import { requires } from '../../tokens.ts';
import { OpenAIApiError } from './errors.ts';
import { withinPageBytes } from './item-pages.ts';
import {
  inputItemsQuerySchema,
  openaiErrorSchema,
  openaiObjectSchema,
  openaiObject,
  responseCreateSchema,
  responseIdParamsSchema,
  type ResponseCreateBody,
} from './schemas.ts';

/**
 * The Responses API (POST/GET/DELETE /v1/responses...) over sessions: a conversation is a
 * session and a response is one of its turns (lib/openai/ids.ts has the ids). A request with
 * `previous_response_id` continues that response's session (409 when it is not the newest
 * turn), one with `conversation` continues that session, and one with neither starts a new
 * session, unless `store: false`, which runs the strategies and the model on the input alone
 * and stores nothing.
 */

export function openaiErrors(...statuses: number[]) {
  return Object.fromEntries(
    statuses.map((status) => [
      status,
      { description: "An error in OpenAI's shape", content: { 'application/json': { schema: openaiErrorSchema } } },
    ]),
  );
}

const createResponseRoute = createRoute({
  method: 'post',
  path: '/v1/responses',
  tags: ['openai'],
  summary: "Create a model response (OpenAI Responses API): a turn of the conversation's session",
  description:
    'Needs session:turn. A token bound to a session may continue that session only; starting a new one (no ' +
    'previous_response_id or conversation, store true) needs a token bound to no session.',
  security: requires('session:turn'),
  request: {
    body: jsonBody(responseCreateSchema),
    headers: z.object({ 'idempotency-key': z.string().min(1).max(256).optional() }),
  },
  responses: {
    200: {
      description: 'The response object, or with `stream: true` the Responses server-sent events',
      content: { 'application/json': { schema: openaiObjectSchema }, 'text/event-stream': { schema: z.string() } },
    },
    ...openaiErrors(400, 401, 402, 403, 404, 409, 413, 502, 503, 504),
  },
});

const getResponseRoute = createRoute({
  method: 'get',
  path: '/v1/responses/{id}',
  tags: ['openai'],
  summary: "Read a stored response (its turn's output, read back from the session)",
  security: requires('session:read'),
  request: { params: responseIdParamsSchema },
  responses: {
    200: { description: 'The response object', content: { 'application/json': { schema: openaiObjectSchema } } },
    ...openaiErrors(400, 401, 403, 404),
  },
});

const inputItemsRoute = createRoute({
  method: 'get',
  path: '/v1/responses/{id}/input_items',
  tags: ['openai'],
  summary: 'The input items of a stored response',
  security: requires('session:read'),
  request: { params: responseIdParamsSchema, query: inputItemsQuerySchema },
  responses: {
    200: { description: 'A list of items', content: { 'application/json': { schema: openaiObjectSchema } } },
    ...openaiErrors(400, 401, 403, 404),
  },
});

const deleteResponseRoute = createRoute({
  method: 'delete',
  path: '/v1/responses/{id}',
  tags: ['openai'],
  summary: 'Delete a response: a turn cannot be taken out of a session, so its whole conversation (session) is deleted',
  security: requires('admin'),
  request: { params: responseIdParamsSchema },
  responses: {
    200: { description: 'Deleted', content: { 'application/json': { schema: openaiObjectSchema } } },
    ...openaiErrors(400, 401, 403, 404),
  },
});

/**
 * The tailgate model id a request names: itself, or what MODEL_ALIASES maps it to. 404
 * model_not_found when no model has that name.
 */
export function resolveFacadeModel(c: Context<AppEnv>, name: string): string {
  const id = c.var.config.modelAliases[name] ?? name;
  try {
    c.var.services.model(id);
  } catch (error) {
    if (error instanceof UnknownModelError)
      throw new OpenAIApiError(
        404,
        'model_not_found',
        `The model \`${name}\` does not exist (use a tailgate model id such as echo or openai:gpt-4.1-mini, or a ` +
          `MODEL_ALIASES name)`,
        'model',
      );
    throw error;
  }
  return id;
}

function toTools(tools: ResponseCreateBody['tools']): Tool[] | undefined {
  return tools?.map((tool) => ({
    type: 'function' as const,
    name: tool.name,
    ...(tool.description ? { description: tool.description } : {}),
    ...(tool.parameters ? { parameters: tool.parameters } : {}),
  }));
}

function openaiTools(tools: readonly Tool[]): OpenAITool[] {
  return tools.map((tool) => ({
    type: 'function',
    name: tool.name,
    description: tool.description ?? null,
    parameters: tool.parameters ?? null,
    strict: false,
  }));
}

/** How a stored turn is answered: the ids of its response and items, and the fixed fields. */
interface StoredContext {
  sessionId: string;
  inputCount: number;
  body: ResponseCreateBody;
  fields: Omit<ResponseFields, 'id' | 'status' | 'output' | 'createdAt'>;
  clock: () => Date;
}

function refOf(context: StoredContext, turn: number, firstSeq: number): ResponseRef {
  return { sessionId: context.sessionId, turn, inputSeq: firstSeq - context.inputCount, outputSeq: firstSeq };
}

function storedResponse(
  context: StoredContext,
  response: TurnResponse,
  firstSeq: number,
  compacted: ResponseOutputItem[] = [],
): TailgateResponse {
  return buildResponse({
    ...context.fields,
    id: responseId(refOf(context, response.turn, firstSeq)),
    createdAt: context.clock(),
    status: 'completed',
    output: [
      ...response.output.map((item) => outputItem(item, itemId(item.type, context.sessionId, item.seq))),
      ...compacted,
    ],
    usage: usageOf(response.usage),
    tailgate: { session_id: response.session_id, turn: response.turn, context: response.context },
  });
}

/**
 * The compaction item of a turn that compacted (its summary is read back from the session,
 * one get); none for other turns, or when a later compaction has moved the context since.
 */
async function compactionOutput(services: AppServices, response: TurnResponse): Promise<ResponseOutputItem[]> {
  const moved = response.context.compaction;
  if (!moved) return [];
  const current = await services.sessions.currentContext(response.session_id);
  if (current?.start_seq !== moved.start_seq) return [];
  return [compactionItem(compactionId(response.session_id, current.start_seq), current.summary)];
}

const encoder = new TextEncoder();

function sse(events: AsyncIterable<ResponseStreamEvent>): Response {
  const iterator = events[Symbol.asyncIterator]();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = await iterator.next();
      if (next.done) controller.close();
      else controller.enqueue(encoder.encode(`event: ${next.value.type}\ndata: ${JSON.stringify(next.value)}\n\n`));
    },
  });
  return new Response(body, {
    status: 200,
    headers: { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache' },
  });
}

/** An async queue of stream events fed by a writer. */
export function eventQueue<Event = ResponseStreamEvent>() {
  const buffer: Event[] = [];
  let wake: (() => void) | undefined;
  let closed = false;
  return {
    push(event: Event) {
      buffer.push(event);
      wake?.();
    },
    close() {
      closed = true;
      wake?.();
    },
    async *[Symbol.asyncIterator](): AsyncIterator<Event> {
      for (;;) {
        const next = buffer.shift();
        if (next !== undefined) yield next;
        else if (closed) return;
        else await new Promise<void>((resolve) => (wake = resolve));
      }
    },
  };
}

/**
 * A streamed turn as Responses events. An error before the model is called (404, 409, an
 * abort) is thrown, so it is answered with its status; after that it ends the stream as
 * response.failed.
 */
async function streamStoredTurn(
  services: AppServices,
  context: StoredContext,
  request: TurnRequest,
  options: TurnOptions,
): Promise<Response> {
  const turn = streamTurn(services, context.sessionId, request, options);
  services.background(turn.done);
  const iterator = turn.events[Symbol.asyncIterator]();
  const first = await iterator.next();
  if (first.done) throw new Error('the turn ended without events');
  if (first.value.event === 'error') throw first.value.cause;
  if (first.value.event !== 'turn.started') throw new Error(`unexpected first turn event ${first.value.event}`);
  const { turn: number, first_seq: firstSeq } = first.value.data;
  const id = responseId(refOf(context, number, firstSeq));
  const base = { ...context.fields, id, createdAt: context.clock(), output: [] as ResponseOutputItem[] };
  const queue = eventQueue();
  const writer = new ResponseEventWriter(
    (index, item) => itemId(item.type, context.sessionId, firstSeq + index),
    (event) => queue.push(event),
  );
  writer.started(buildResponse({ ...base, status: 'in_progress' }));
  void (async () => {
    for (;;) {
      const next = await iterator.next();
      if (next.done) break;
      const event = next.value;
      if (event.event === 'output_text.delta') writer.delta(event.data.delta);
      else if (event.event === 'output_item.done') writer.itemDone(event.data.item);
      else if (event.event === 'turn.completed') {
        const compacted = await compactionOutput(services, event.data).catch((error: unknown) => {
          services.log('tailgate: could not read the summary of a compacted response', error);
          return [];
        });
        for (const item of compacted) writer.wholeItem(item);
        writer.completed(storedResponse(context, event.data, firstSeq, compacted));
      } else if (event.event === 'error')
        writer.failed(buildResponse({ ...base, status: 'failed', error: clientError(event.data.error) }));
    }
    queue.close();
  })();
  return sse(queue);
}

async function createResponse(
  c: Context<AppEnv>,
  body: ResponseCreateBody,
  idempotencyKey: string | undefined,
): Promise<Response> {
  const services = c.var.services;
  const model = resolveFacadeModel(c, body.model);
  const { instructions: inputInstructions, items } = inputToItems(body.input);
  const instructions =
    [body.instructions ?? '', ...inputInstructions].filter((text) => text !== '').join('\n\n') || null;
  checkItemSizes(items, c.var.config.maxItemBytes);
  if (items.length === 0)
    throw new OpenAIApiError(400, 'invalid_request', 'input holds no user, assistant or tool items', 'input');
  const tools = toTools(body.tools);
  const turnTools = body.tool_choice === 'none' ? [] : tools;
  const clock = () => new Date();
  const common = {
    model: body.model,
    instructions,
    toolChoice: body.tool_choice ?? 'auto',
    temperature: body.temperature ?? null,
    maxOutputTokens: body.max_output_tokens ?? null,
    metadata: body.metadata ?? null,
    previousResponseId: body.previous_response_id ?? null,
    truncation: body.truncation ?? 'disabled',
  } as const;

  const compaction = body.context_management?.[0];
  if (body.store === false) {
    if (compaction) {
      throw new OpenAIApiError(
        400,
        'invalid_request',
        'context_management compacts a stored conversation; ' +
          'with store: false, call POST /v1/responses/compact and send its output as input',
        'context_management',
      );
    }
    if (body.previous_response_id || body.conversation) {
      throw new OpenAIApiError(
        400,
        'invalid_request',
        'store: false runs on the input alone; it cannot continue a stored response or conversation',
        'store',
      );
    }
    authorizeSession(c, null);
    const request = {
      items,
      instructions,
      tools: turnTools ?? [],
      model,
      ...(body.max_output_tokens ? { maxOutputTokens: body.max_output_tokens } : {}),
      ...(body.temperature !== undefined && body.temperature !== null ? { temperature: body.temperature } : {}),
      ...(body.prompt_cache_key ? { promptCacheKey: body.prompt_cache_key } : {}),
      ...(body.truncation ? { truncation: body.truncation } : {}),
    };
    const fields = { ...common, tools: openaiTools(tools ?? []), conversationId: null, store: false };
    const ids = new Map<number, string>();
    const idAt = (index: number, item: { type: Item['type'] }) => {
      if (!ids.has(index)) ids.set(index, randomId(item.type === 'message' ? 'msg' : 'fc'));
      return ids.get(index)!;
    };
    const finish = (result: Awaited<ReturnType<typeof runStateless>>, id: string) =>
      buildResponse({
        ...fields,
        id,
        createdAt: clock(),
        status: 'completed',
        output: result.output.map((item, index) => outputItem(item, idAt(index, item))),
        usage: usageOf(result.usage),
        tailgate: { context: result.context },
      });
    const id = randomId('resp');
    if (!body.stream) return c.json(finish(await runStateless(services, request), id), 200);
    const queue = eventQueue();
    const writer = new ResponseEventWriter(idAt, (event) => queue.push(event));
    writer.started(buildResponse({ ...fields, id, createdAt: clock(), status: 'in_progress', output: [] }));
    void runStateless(services, request, (event) =>
      event.type === 'text_delta' ? writer.delta(event.delta) : writer.itemDone(event.item),
    )
      .then(
        (result) => writer.completed(finish(result, id)),
        (error: unknown) => {
          services.log('tailgate: streamed response failed', error);
          writer.failed(
            buildResponse({
              ...fields,
              id,
              createdAt: clock(),
              status: 'failed',
              output: [],
              error: clientError(errorRecord(error)),
            }),
          );
        },
      )
      .finally(() => queue.close());
    return sse(queue);
  }

  const { sessionId, afterTurn } = await sessionOf(c, body, { instructions, model, idempotencyKey });
  const session = await services.sessions.get(sessionId);
  // The instructions of a request are the session's from then on (tailgate keeps one system prompt);
  // not so for one continuing an older turn: a retry (they are set already) or a branch (refused).
  const behind = afterTurn !== undefined && afterTurn < session.counts.turns;
  if (instructions !== null && instructions !== session.instructions && !behind)
    await services.sessions.update(sessionId, { instructions });
  const context: StoredContext = {
    sessionId,
    inputCount: items.length,
    body,
    fields: {
      ...common,
      instructions: instructions ?? session.instructions,
      tools: openaiTools(tools ?? session.tools),
      conversationId: sessionId,
      store: true,
    },
    clock,
  };
  const request: TurnRequest = {
    input: items,
    model,
    ...(turnTools !== undefined ? { tools: turnTools } : {}),
    ...(body.max_output_tokens ? { max_output_tokens: body.max_output_tokens } : {}),
    ...(body.temperature !== undefined && body.temperature !== null ? { temperature: body.temperature } : {}),
    ...(body.prompt_cache_key ? { prompt_cache_key: body.prompt_cache_key } : {}),
    // OpenAI's default is "disabled": no overflow safety net behind a Responses client's back.
    truncation: body.truncation ?? 'disabled',
    ...(compaction
      ? { compaction: compaction.compact_threshold ? { threshold: compaction.compact_threshold } : {} }
      : {}),
  };
  const options: TurnOptions = {
    ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
    ...(afterTurn !== undefined ? { afterTurn } : {}),
  };
  // A conversation does not branch: the claim refuses a turn that would not follow previous_response_id's.
  const branched = async (error: unknown): Promise<never> => {
    if (error instanceof NotNewestTurnError && body.previous_response_id)
      throw await branchingError(services, body.previous_response_id, sessionId, error.newest);
    throw error;
  };
  if (body.stream) return streamStoredTurn(services, context, request, options).catch(branched);
  const pending = runTurn(services, sessionId, request, options);
  services.background(
    pending.then(
      () => undefined,
      () => undefined,
    ),
  );
  const response = await pending.catch(branched);
  const firstSeq = response.output[0]?.seq ?? (await services.sessions.get(sessionId)).counts.items + 1;
  return c.json(storedResponse(context, response, firstSeq, await compactionOutput(services, response)), 200);
}

/**
 * The session a stored response goes to: previous_response_id's (404 unknown; `afterTurn`:
 * the turn must follow it, which the claim judges after replaying a repeated Idempotency-Key),
 * the conversation's, or a new one. A new session's id comes from the Idempotency-Key when
 * there is one, so a retried request finds the session its first attempt created and its
 * turn is replayed, not taken twice.
 */
async function sessionOf(
  c: Context<AppEnv>,
  body: ResponseCreateBody,
  fresh: { instructions: string | null; model: string; idempotencyKey: string | undefined },
): Promise<{ sessionId: string; afterTurn?: number }> {
  const { sessions } = c.var.services;
  if (body.previous_response_id && body.conversation) {
    throw new OpenAIApiError(
      400,
      'invalid_request',
      'previous_response_id and conversation cannot both be set',
      'previous_response_id',
    );
  }
  if (body.previous_response_id) {
    const { sessionId, turn } = await previousResponse(c, body.previous_response_id);
    return { sessionId, afterTurn: turn };
  }
  if (body.conversation) {
    const id = typeof body.conversation === 'string' ? body.conversation : body.conversation.id;
    authorizeSession(c, id);
    const exists = await sessions.get(id).then(
      () => true,
      (error: unknown) => {
        if (
          error instanceof NotFoundError ||
          (error instanceof Error && 'code' in error && error.code === 'invalid_request')
        )
          return false;
        throw error;
      },
    );
    if (!exists)
      throw new OpenAIApiError(
        404,
        'conversation_not_found',
        `Conversation with id '${id}' not found.`,
        'conversation',
      );
    return { sessionId: id };
  }
  authorizeSession(c, null);
  const id =
    fresh.idempotencyKey !== undefined
      ? `conv_${sha256Hex(`openai-response:${fresh.idempotencyKey}`).slice(0, 24)}`
      : randomId('conv');
  try {
    await sessions.create({
      id,
      model: fresh.model,
      ...(fresh.instructions !== null ? { instructions: fresh.instructions } : {}),
      ...(body.metadata ? { metadata: body.metadata } : {}),
    });
  } catch (error) {
    if (!(error instanceof SessionExistsError && fresh.idempotencyKey !== undefined)) throw error;
  }
  return { sessionId: id };
}

/**
 * The session `previousResponseId` continues: 404 previous_response_not_found when it is not
 * a stored response, 409 conversation_branching_unsupported when it is not the session's
 * newest turn (a conversation does not branch).
 */
export async function continuedSession(c: Context<AppEnv>, previousResponseId: string): Promise<string> {
  const { sessionId, turn, newestTurn } = await previousResponse(c, previousResponseId);
  if (turn < newestTurn) throw await branchingError(c.var.services, previousResponseId, sessionId, newestTurn);
  return sessionId;
}

/**
 * The stored response `previousResponseId` names, its session and that session's newest turn
 * (404 previous_response_not_found when it is not a stored response).
 */
async function previousResponse(
  c: Context<AppEnv>,
  previousResponseId: string,
): Promise<{ sessionId: string; turn: number; newestTurn: number }> {
  const { sessions } = c.var.services;
  const ref = parseResponseId(previousResponseId);
  const missing = () =>
    new OpenAIApiError(
      404,
      'previous_response_not_found',
      `Previous response with id '${previousResponseId}' not found.`,
      'previous_response_id',
    );
  if (!ref) throw missing();
  authorizeSession(c, ref.sessionId);
  const session = await sessions.get(ref.sessionId).catch((error: unknown) => {
    throw error instanceof NotFoundError ? missing() : error;
  });
  if (ref.turn > session.counts.turns) throw missing();
  return { sessionId: ref.sessionId, turn: ref.turn, newestTurn: session.counts.turns };
}

/** 409 conversation_branching_unsupported: `previousResponseId` is not the newest turn of its session. */
async function branchingError(
  services: AppServices,
  previousResponseId: string,
  sessionId: string,
  newestTurn: number,
): Promise<OpenAIApiError> {
  const newest = await newestResponseId(services, sessionId, newestTurn);
  const continueFrom = newest ?? `turn ${newestTurn}`;
  return new OpenAIApiError(
    409,
    'conversation_branching_unsupported',
    `Response '${previousResponseId}' is not the newest turn of its conversation; ` +
      `continue from ${continueFrom} (a conversation does not branch).`,
    'previous_response_id',
    { newest_response_id: newest, newest_turn: newestTurn },
  );
}

/**
 * The id of the session's newest response, found in its newest items: the newest run of
 * model output (assistant messages, calls) stored together, and the input before it back to
 * the previous output. Undefined when the newest turn stored no output.
 */
async function newestResponseId(services: AppServices, sessionId: string, turn: number): Promise<string | undefined> {
  const page = await services.sessions.listItems(sessionId, { limit: 200 });
  const items = page.items;
  const outputAt = items.findIndex(isOutput);
  if (outputAt < 0) return undefined;
  let first = outputAt;
  while (
    first + 1 < items.length &&
    isOutput(items[first + 1]!) &&
    items[first + 1]!.created_at === items[outputAt]!.created_at
  )
    first += 1;
  const outputSeq = items[first]!.seq;
  let inputSeq = outputSeq;
  const claimedAt = items[first + 1]?.created_at;
  for (let index = first + 1; index < items.length && items[index]!.created_at === claimedAt; index += 1)
    inputSeq = items[index]!.seq;
  return inputSeq < outputSeq ? responseId({ sessionId, turn, inputSeq, outputSeq }) : undefined;
}

function isOutput(item: StoredItem): boolean {
  return item.type === 'function_call' || (item.type === 'message' && item.role === 'assistant');
}

/** Items with `from <= seq < to`, oldest first (several pages when they are large). */
export async function itemsBetween(
  services: AppServices,
  sessionId: string,
  from: number,
  to: number,
): Promise<StoredItem[]> {
  const collected: StoredItem[] = [];
  let before = to;
  while (before > from) {
    const page = await services.sessions.listItems(sessionId, { before, limit: Math.min(1000, before - from) });
    collected.push(...page.items.filter((item) => item.seq >= from));
    if (!page.has_more || page.next_before === null || page.items.length === 0) break;
    before = page.next_before;
  }
  return collected.sort((a, b) => a.seq - b.seq);
}

/** Model outputs past the newest that a turn may hold, read back for GET. */
const OUTPUT_WINDOW = 64;

/** A stored response and its items, read back from its session (404 when it is not there). */
async function readResponse(c: Context<AppEnv>, id: string) {
  const ref = parseResponseId(id);
  const missing = () => new OpenAIApiError(404, 'not_found', `Response with id '${id}' not found.`, 'response_id');
  if (!ref) throw missing();
  const { services } = c.var;
  const session = await services.sessions.get(ref.sessionId).catch((error: unknown) => {
    throw error instanceof NotFoundError ? missing() : error;
  });
  if (ref.turn > session.counts.turns || ref.outputSeq > session.counts.items + 1) throw missing();
  const items = await itemsBetween(
    services,
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
  return { ref, session, input, output };
}

function itemKindId(sessionId: string, item: StoredItem): string {
  return itemId(item.type, sessionId, item.seq);
}

/** POST /v1/responses, GET /v1/responses/:id[/input_items], DELETE /v1/responses/:id. */
export function responseRoutes() {
  return createRouter()
    .openapi(createResponseRoute, async (c) =>
      createResponse(c, c.req.valid('json'), c.req.valid('header')['idempotency-key']),
    )
    .openapi(getResponseRoute, async (c) => {
      const { ref, session, input, output } = await readResponse(c, c.req.valid('param').id);
      const createdAt = new Date((output[0] ?? input[0])!.created_at);
      const response = buildResponse({
        id: responseId(ref),
        createdAt,
        status: output.length > 0 ? 'completed' : 'failed',
        model: session.model ?? c.var.config.defaultModel,
        output: output.map((item) =>
          outputItem(item as Parameters<typeof outputItem>[0], itemKindId(ref.sessionId, item)),
        ),
        instructions: session.instructions,
        tools: openaiTools(session.tools),
        toolChoice: 'auto',
        temperature: null,
        maxOutputTokens: null,
        metadata: null,
        previousResponseId: null,
        conversationId: ref.sessionId,
        store: true,
        tailgate: { session_id: ref.sessionId, turn: ref.turn },
      });
      return c.json(openaiObject(response), 200);
    })
    .openapi(inputItemsRoute, async (c) => {
      const id = c.req.valid('param').id;
      const { ref, input } = await readResponse(c, id);
      const query = c.req.valid('query');
      const ordered: ResponseItem[] = input.map((item) => storedItem(item, itemKindId(ref.sessionId, item)));
      if ((query.order ?? 'desc') === 'desc') ordered.reverse();
      const start = query.after === undefined ? 0 : ordered.findIndex((item) => item.id === query.after) + 1;
      if (start === 0 && query.after !== undefined)
        throw new OpenAIApiError(
          400,
          'invalid_request',
          `'${query.after}' is not an input item of response '${id}'`,
          'after',
        );
      const data = withinPageBytes(ordered.slice(start, start + (query.limit ?? 20)));
      return c.json(
        {
          object: 'list',
          data,
          first_id: data[0]?.id ?? null,
          last_id: data.at(-1)?.id ?? null,
          has_more: start + data.length < ordered.length,
        },
        200,
      );
    })
    .openapi(deleteResponseRoute, async (c) => {
      const id = c.req.valid('param').id;
      const { ref } = await readResponse(c, id);
      await c.var.services.sessions.delete(ref.sessionId);
      return c.json({ id, object: 'response', deleted: true }, 200);
    });
}

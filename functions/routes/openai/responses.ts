import { createRoute } from '@hono/zod-openapi';
import { z } from 'zod';
import { cancelResponse, currentResponse, streamResponse } from '../../../lib/openai/background-response.ts';
import { createResponse } from '../../../lib/openai/post-response.ts';
import { OpenAIApiError } from '../../../lib/openai/errors.ts';
import {
  openaiObject,
  openaiObjectSchema,
  responseCreateSchema,
  responseIdParamsSchema,
} from '../../../lib/openai/schemas.ts';
import { itemListQuerySchema, retrieveHeadersSchema, retrieveQuerySchema } from '../../../lib/openai/query-schemas.ts';
import { noContentWhenEmpty } from '../../../lib/openai/sse.ts';
import { deleteResponse } from '../../../lib/openai/stored-responses.ts';
import { idempotencyKeyHeaders, jsonBody } from '../../openapi-helpers.ts';
import { createRouter } from '../../router.ts';
import { requires } from '../../tokens.ts';
import { facadeOf, openaiErrors } from './facade-context.ts';
import { inputItemsPage } from '../../../lib/openai/input-items.ts';

/**
 * The Responses API (POST/GET/DELETE /v1/responses...) over sessions: a conversation is a
 * session and a response is one of its turns (lib/openai/ids.ts has the ids, lib/openai/
 * create-response.ts the mapping). A request with `previous_response_id` continues that
 * response's session (an older turn than its newest: a branch), one with `conversation` continues
 * that session, and one with neither starts a new session, unless `store: false`, which stores
 * nothing: the strategies and the model run on the input alone, or under previous_response_id or
 * conversation on the prompt that session's next turn would send (lib/openai/continued-stateless.ts).
 */

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
    headers: idempotencyKeyHeaders(),
  },
  responses: {
    200: {
      description: 'The response object, or with `stream: true` the Responses server-sent events',
      content: { 'application/json': { schema: openaiObjectSchema }, 'text/event-stream': { schema: z.string() } },
    },
    ...openaiErrors(400, 401, 402, 403, 404, 409, 413, 429, 502, 503, 504),
  },
});

const getResponseRoute = createRoute({
  method: 'get',
  path: '/v1/responses/{id}',
  tags: ['openai'],
  summary: 'Read a stored response: the object its create answered; a background one as it stands',
  description:
    "With `stream=true`, a background or streamed response's Responses events (server-sent), replayed from its " +
    'journal after `starting_after` (a sequence_number, as its stream numbered them) and followed live to its end, ' +
    'from any process; 400 for a response that was neither streamed nor in the background. Each event carries its ' +
    'sequence_number as its SSE id (an end no stream sent live: that number plus 100,001), and `Last-Event-ID: N` ' +
    'starts after N (the later of it and `starting_after`).',
  security: requires('session:read'),
  request: { params: responseIdParamsSchema, query: retrieveQuerySchema, headers: retrieveHeadersSchema },
  responses: {
    200: {
      description: 'The response object, or with `stream=true` the Responses server-sent events',
      content: { 'application/json': { schema: openaiObjectSchema }, 'text/event-stream': { schema: z.string() } },
    },
    204: {
      description:
        'With `stream=true` and `Last-Event-ID`: the response ended and the reader has its terminal event ' +
        '(without the header, an empty 200 stream, which the `openai` client takes)',
    },
    ...openaiErrors(400, 401, 403, 404),
  },
});

const cancelResponseRoute = createRoute({
  method: 'post',
  path: '/v1/responses/{id}/cancel',
  tags: ['openai'],
  summary: 'Cancel a background response: its turn stops, its notices go back, its partial output is not stored',
  description: 'A background response that already ended is answered as it stands; any other response is 400.',
  security: requires('session:turn'),
  request: { params: responseIdParamsSchema },
  responses: {
    200: {
      description: 'The response, `cancelled` (or as it ended)',
      content: { 'application/json': { schema: openaiObjectSchema } },
    },
    ...openaiErrors(400, 401, 403, 404),
  },
});

const inputItemsRoute = createRoute({
  method: 'get',
  path: '/v1/responses/{id}/input_items',
  tags: ['openai'],
  summary: 'The input items of a stored response',
  security: requires('session:read'),
  request: { params: responseIdParamsSchema, query: itemListQuerySchema },
  responses: {
    200: { description: 'A list of items', content: { 'application/json': { schema: openaiObjectSchema } } },
    ...openaiErrors(400, 401, 403, 404),
  },
});

const deleteResponseRoute = createRoute({
  method: 'delete',
  path: '/v1/responses/{id}',
  tags: ['openai'],
  summary: 'Delete the newest response of its conversation, which goes back to the response before it',
  description: 'A response another came after is 409 delete_refused; the conversation is never deleted.',
  security: requires('admin'),
  request: { params: responseIdParamsSchema },
  responses: {
    200: { description: 'Deleted', content: { 'application/json': { schema: openaiObjectSchema } } },
    ...openaiErrors(400, 401, 403, 404, 409),
  },
});

/** POST /v1/responses, GET /v1/responses/:id[/input_items], POST .../cancel, DELETE /v1/responses/:id. */
export function responseRoutes() {
  return createRouter()
    .openapi(createResponseRoute, async (c) => {
      const result = await createResponse(facadeOf(c), c.req.valid('json'), c.req.valid('header')['idempotency-key']);
      return result instanceof Response ? result : c.json(openaiObject(result), 200);
    })
    .openapi(getResponseRoute, async (c) => {
      const { id } = c.req.valid('param');
      const { stream, starting_after: after } = c.req.valid('query');
      const lastEventId = c.req.valid('header')['last-event-id'];
      if (stream) {
        // An EventSource opened with `starting_after` reconnects to the same URL with the last id
        // it got: the later of the two. Only it is answered a 204 once it has the end (it stops there).
        const from = Math.max(after ?? -1, lastEventId ?? -1);
        const events = await streamResponse(facadeOf(c), id, from, c.req.raw.signal);
        return lastEventId === undefined ? events : noContentWhenEmpty(events, c.req.raw.signal);
      }
      if (after !== undefined)
        throw new OpenAIApiError(400, 'invalid_request', 'starting_after is for stream=true', 'starting_after');
      return c.json(openaiObject(await currentResponse(facadeOf(c), id)), 200);
    })
    .openapi(cancelResponseRoute, async (c) =>
      c.json(openaiObject(await cancelResponse(facadeOf(c), c.req.valid('param').id)), 200),
    )
    .openapi(inputItemsRoute, async (c) =>
      c.json(await inputItemsPage(facadeOf(c), c.req.valid('param').id, c.req.valid('query')), 200),
    )
    .openapi(deleteResponseRoute, async (c) => {
      const id = c.req.valid('param').id;
      await deleteResponse(facadeOf(c), id);
      return c.json({ id, object: 'response', deleted: true }, 200);
    });
}

import { createRoute } from '@hono/zod-openapi';
import { z } from 'zod';
import { runTurn, streamTurn, type TurnRequest } from '../../lib/turn.ts';
import { createRouter } from '../router.ts';
import { requires } from '../tokens.ts';
import { errorResponses, jsonBody, jsonResponse } from '../openapi-helpers.ts';
import { sessionIdParamsSchema, turnRequestSchema, turnResponseSchema } from '../schemas.ts';
import { checkItemSizes } from '../item-size.ts';
import { turnEventStream } from '../turn-event-stream.ts';

const turnHeadersSchema = z.object({
  'idempotency-key': z
    .string()
    .min(1)
    .max(256)
    .optional()
    .meta({ description: 'A retried request with the same key returns the first response.' }),
});

const takeTurnRoute = createRoute({
  method: 'post',
  path: '/v1/sessions/{id}/turns',
  tags: ['turns'],
  summary: 'Take a turn: store the input, build the prompt, call the model, store the output',
  security: requires('session:turn'),
  request: { params: sessionIdParamsSchema, headers: turnHeadersSchema, body: jsonBody(turnRequestSchema) },
  responses: {
    200: {
      description: 'The turn, or (with `stream: true` or `Accept: text/event-stream`) server-sent events: turn.started, output_text.delta, output_item.done, turn.completed or error',
      content: { 'application/json': { schema: turnResponseSchema }, 'text/event-stream': { schema: z.string() } },
    },
    ...errorResponses(400, 401, 403, 404, 409, 413, 502, 503, 504),
  },
});

/** POST /v1/sessions/:id/turns, as JSON or as server-sent events. */
export function turnRoutes() {
  return createRouter().openapi(takeTurnRoute, async (c) => {
    const { id } = c.req.valid('param');
    const { stream, ...body } = c.req.valid('json');
    const idempotencyKey = c.req.valid('header')['idempotency-key'];
    checkItemSizes(typeof body.input === 'string' ? [{ type: 'message', role: 'user', content: body.input }] : body.input, c.var.config.maxItemBytes);
    const request = body as TurnRequest;
    const options = idempotencyKey !== undefined ? { idempotencyKey } : {};
    const services = c.var.services;
    const wantsStream = stream ?? (c.req.header('accept') ?? '').includes('text/event-stream');
    if (wantsStream) {
      const turn = streamTurn(services, id, request, options);
      services.background(turn.done);
      return turnEventStream(turn.events);
    }
    // The turn must complete even if the client goes away: keep it alive past the response.
    const pending = runTurn(services, id, request, options);
    services.background(pending.then(() => undefined, () => undefined));
    return c.json(await pending, 200);
  });
}

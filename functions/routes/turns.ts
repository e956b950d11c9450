import { createRoute } from '@hono/zod-openapi';
import { z } from 'zod';
import {
  claimBackgroundTurn,
  cancelOpenTurn,
  runTurn,
  streamTurn,
  takeUnderPolicy,
  type TurnOptions,
  type TurnServices,
} from '../../lib/turn/index.ts';
import { InvalidRequestError } from '../../lib/errors.ts';
import { markParsedItems } from '../../lib/items.ts';
import { createRouter } from '../router.ts';
import { requires } from '../tokens.ts';
import { errorResponses, idempotencyKeyHeaders, jsonBody, jsonResponse, noFieldsBody } from '../openapi-helpers.ts';
import { sessionIdParamsSchema, turnParamsSchema, turnRequestSchema, turnResponseSchema } from '../schemas.ts';
import { checkItemSizes } from '../../lib/session/item-size.ts';
import { turnEventStream } from '../turn-event-stream.ts';

const turnHeadersSchema = idempotencyKeyHeaders('A retried request with the same key returns the first response.');

const takeTurnRoute = createRoute({
  method: 'post',
  path: '/v1/sessions/{id}/turns',
  tags: ['turns'],
  summary: 'Take a turn: store the input, build the prompt, call the model, store the output',
  security: requires('session:turn'),
  request: { params: sessionIdParamsSchema, headers: turnHeadersSchema, body: jsonBody(turnRequestSchema) },
  responses: {
    200: {
      description:
        'The turn, or (with `stream: true`, or `Accept: text/event-stream` and no `stream`) server-sent events: ' +
        'turn.started (`{turn, first_seq}`, the seq of the first output item), output_text.delta, ' +
        'function_call.started, ' +
        'function_call_arguments.delta, output_item.done, ' +
        'turn.completed or error',
      content: { 'application/json': { schema: turnResponseSchema }, 'text/event-stream': { schema: z.string() } },
    },
    202: jsonResponse(
      z.union([
        z
          .object({
            session_id: z.string(),
            turn: z.number().int(),
            status: z.enum(['queued', 'in_progress', 'completed', 'failed', 'cancelled', 'aborted']),
          })
          .meta({ id: 'BackgroundTurn' }),
        z
          .object({
            session_id: z.string(),
            queued_turn: z.string().meta({ description: 'The queued input (the SHA-256 its turn is claimed under).' }),
            position: z
              .number()
              .int()
              .nullable()
              .meta({
                description:
                  'Its place among the queued inputs: 1 is next, 0 taken up already; null when the store ' +
                  'failed to list the queue (it is queued all the same).',
              }),
          })
          .meta({ id: 'QueuedTurn' }),
      ]),
      'With `background: true`: the turn is stored and queued (`status: "queued"`); GET ' +
        '/v1/sessions/{id}/turns/{turn} follows it; a repeated Idempotency-Key whose turn has ended answers its ' +
        'status. With the busy policy `enqueue` and another turn running: the input is queued ({queued_turn, ' +
        'position}) and runs as its own turn after it.',
    ),
    ...errorResponses(400, 401, 402, 403, 404, 409, 413, 429, 502, 503, 504),
  },
});

const cancelledSchema = z
  .object({ session_id: z.string(), turn: z.number().int(), status: z.literal('failed') })
  .meta({ id: 'CancelledTurn' });

const cancelTurnRoute = createRoute({
  method: 'post',
  path: '/v1/sessions/{id}/turns/{turn}/cancel',
  tags: ['turns'],
  summary: 'End an open turn as failed (turn_cancelled): its input stays, its output will not be stored',
  description:
    'For a turn whose server died, or that is no longer wanted. The session takes turns again at once. The ' +
    'running turn, if any, is answered 409 turn_cancelled.',
  security: requires('session:turn'),
  request: { params: turnParamsSchema, body: noFieldsBody },
  responses: {
    200: jsonResponse(cancelledSchema, 'The turn is closed as failed'),
    ...errorResponses(400, 401, 403, 404, 409, 503),
  },
});

/** POST /v1/sessions/:id/turns (JSON or server-sent events) and .../turns/:turn/cancel. */
export function turnRoutes() {
  return createRouter()
    .openapi(cancelTurnRoute, async (c) => {
      const { id, turn } = c.req.valid('param');
      const services = c.var.services;
      // The session is free: its queued inputs go on.
      await cancelOpenTurn(services, id, turn);
      return c.json({ session_id: id, turn, status: 'failed' as const }, 200);
    })
    .openapi(takeTurnRoute, async (c) => {
      const { id } = c.req.valid('param');
      const { stream, background, on_busy: onBusy, ...request } = c.req.valid('json');
      // Its items, as the schema gave them, are not checked again by the claim (lib/items.ts markParsedItems).
      if (Array.isArray(request.input)) markParsedItems(request.input);
      const idempotencyKey = c.req.valid('header')['idempotency-key'];
      checkItemSizes(
        typeof request.input === 'string' ? [{ type: 'message', role: 'user', content: request.input }] : request.input,
        c.var.config.maxItemBytes,
      );
      // An empty input takes the newest turn again, which must have failed (lib/turn/types.ts, `retake`).
      const retake = Array.isArray(request.input) && request.input.length === 0;
      const policy = {
        ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
        ...(retake ? { retake } : {}),
        ...(onBusy ? { onBusy } : {}),
      };
      const services = c.var.services;
      if (background && stream)
        throw new InvalidRequestError(
          'stream: a background turn is not streamed (send stream or background, not both); ' +
            `follow its events with GET /v1/sessions/${id}/turns/{turn}/events`,
          { field: 'stream' },
        );
      const wantsStream = stream ?? (c.req.header('accept') ?? '').includes('text/event-stream');
      // `observed`: the services whose observer the busy policy holds a refusal back from (lib/turn/busy.ts).
      // `lapsed`: how its claim judges a dead turn answered at its end (takeUnderPolicy).
      const take = async (
        observed: TurnServices,
        lapsed: Pick<TurnOptions, 'onLapsed' | 'enqueues'>,
      ): Promise<Response> => {
        const options = { ...policy, ...lapsed };
        if (background) {
          const claimed = await claimBackgroundTurn(observed, id, request, options);
          if (claimed.run) await services.startBackground(claimed.run);
          return c.json({ session_id: id, turn: claimed.turn, status: claimed.status }, 202);
        }
        if (wantsStream) {
          const turn = streamTurn(observed, id, request, options);
          services.background(turn.done);
          return turnEventStream(c, turn.events);
        }
        // The turn must complete even if the client goes away: keep it alive past the response.
        const pending = runTurn(observed, id, request, options);
        services.background(
          pending.then(
            () => undefined,
            () => undefined,
          ),
        );
        return c.json(await pending, 200);
      };
      const taken = await takeUnderPolicy(services, id, request, policy, take);
      if (taken.kind === 'queued')
        return c.json({ session_id: id, queued_turn: taken.queued_turn, position: taken.position }, 202);
      return taken.value;
    });
}

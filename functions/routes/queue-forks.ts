import { createRoute, z } from '@hono/zod-openapi';
import { QUEUE_PREVIEW_CHARS } from '../../lib/session/log/queue-listing.ts';
import { listQueue } from '../../lib/turn/index.ts';
import { createRouter } from '../router.ts';
import { requires } from '../tokens.ts';
import { errorResponses, jsonResponse } from '../openapi-helpers.ts';
import { limitText, sessionIdParamsSchema } from '../schemas.ts';

const queueQuerySchema = z.object({
  limit: limitText('How many queued inputs to show, 1..100 (default 100).'),
});

const queuedListSchema = z.object({
  queued: z.array(
    z.object({
      queued_turn: z.string().meta({ description: 'The name the enqueue answered (`queued_turn` of its 202).' }),
      position: z.number().int().meta({ description: '1: the next to run.' }),
      enqueued_at: z.string(),
      items: z.number().int().meta({ description: 'How many input items it holds.' }),
      preview: z.string().meta({
        description:
          `The input's text (messages, calls, outputs, one item a line), ` +
          `its first ${QUEUE_PREVIEW_CHARS} characters.`,
      }),
      preview_truncated: z.boolean().meta({ description: 'true when the text is longer than the preview.' }),
    }),
  ),
  total: z.number().int().meta({
    description:
      'How many queued inputs will still run, shown or not (neither a withdrawn one nor one taken up as a turn).',
  }),
  held: z
    .object({
      reason: z.literal('budget_exhausted'),
      budget: z.literal('session'),
      limit: z.string(),
      spent: z.number(),
      value: z.number(),
    })
    .optional()
    .meta({
      description:
        "Present while inputs wait and the session's budget refuses its next turn: no input runs until a PATCH " +
        'raises the budget (or they are withdrawn). The `details` of the 402 `budget_exhausted` such a turn meets.',
    }),
});

const listQueueRoute = createRoute({
  method: 'get',
  path: '/v1/sessions/{id}/queue',
  tags: ['turns'],
  summary:
    'Inputs queued behind a running turn (`on_busy: enqueue`), oldest first, each as a preview ' +
    '(one listing plus a read of each shown)',
  security: requires('session:read'),
  request: { params: sessionIdParamsSchema, query: queueQuerySchema },
  responses: {
    200: jsonResponse(queuedListSchema, 'The queued inputs'),
    ...errorResponses(400, 401, 403, 404, 503),
  },
});

const queuedTurnParamsSchema = sessionIdParamsSchema.extend({
  queued_turn: z
    .string()
    .regex(/^[0-9a-f]{64}$/, 'queued_turn must be the queued_turn an enqueue answered')
    .meta({ param: { name: 'queued_turn', in: 'path' }, description: "The `queued_turn` of the enqueue's 202." }),
});

const withdrawQueuedRoute = createRoute({
  method: 'delete',
  path: '/v1/sessions/{id}/queue/{queued_turn}',
  tags: ['turns'],
  summary:
    'Withdraw a queued input no pickup began claiming as a turn (409 queued_input_taken once one did: ' +
    'it runs; 404 when none is queued under the name)',
  security: requires('session:turn'),
  request: { params: queuedTurnParamsSchema },
  responses: {
    200: jsonResponse(
      z.object({ session_id: z.string(), queued_turn: z.string(), deleted: z.literal(true) }),
      'Withdrawn: its turn never runs',
    ),
    ...errorResponses(400, 401, 403, 404, 409, 503),
  },
});

const forksQuerySchema = z.object({
  after: z
    .string()
    .regex(
      /^(g\d{13}[0-9a-f]{8}\/)?[A-Za-z0-9_-]{1,64}\.g\d{13}[0-9a-f]{8}$/,
      'after must be the next_after of a previous page',
    )
    .optional()
    .meta({ param: { name: 'after', in: 'query' }, description: 'The `next_after` of the previous page (opaque).' }),
  limit: limitText('How many forks a page holds at most, 1..100 (default 50).'),
});

const forkListSchema = z.object({
  forks: z.array(
    z.object({
      id: z.string().meta({ description: 'The fork, a session of its own.' }),
      seq: z.number().int().meta({ description: 'The last seq it shares with this session (its `forked_from.seq`).' }),
      created_at: z.string(),
    }),
  ),
  has_more: z.boolean(),
  next_after: z.string().nullable().meta({ description: 'The `after` of the next page; null on the last one.' }),
});

const listForksRoute = createRoute({
  method: 'get',
  path: '/v1/sessions/{id}/forks',
  tags: ['sessions'],
  summary:
    'The live forks of a session, made from it directly (a page reads its fork references on until it ' +
    'holds `limit` forks: fewer only at the end, or past more references that are no fork of it than a page reads)',
  security: requires('session:read'),
  request: { params: sessionIdParamsSchema, query: forksQuerySchema },
  responses: {
    200: jsonResponse(forkListSchema, 'A page of forks'),
    ...errorResponses(400, 401, 403, 404, 503),
  },
});

/**
 * GET /v1/sessions/:id/queue and DELETE .../queue/:queued_turn (docs/API.md, "Busy sessions"),
 * GET /v1/sessions/:id/forks ("Forks").
 */
export function queueAndForkRoutes() {
  return createRouter()
    .openapi(listQueueRoute, async (c) => {
      const { id } = c.req.valid('param');
      const { limit } = c.req.valid('query');
      return c.json(await listQueue(c.var.services, id, limit ?? 100), 200);
    })
    .openapi(withdrawQueuedRoute, async (c) => {
      const { id, queued_turn } = c.req.valid('param');
      await c.var.services.sessions.withdrawQueued(id, queued_turn);
      return c.json({ session_id: id, queued_turn, deleted: true as const }, 200);
    })
    .openapi(listForksRoute, async (c) => {
      const { id } = c.req.valid('param');
      const { after, limit } = c.req.valid('query');
      const options = { limit: limit ?? 50, ...(after !== undefined ? { after } : {}) };
      return c.json(await c.var.services.sessions.listForks(id, options), 200);
    });
}

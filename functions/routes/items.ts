import { createRoute } from '@hono/zod-openapi';
import { createRouter } from '../router.ts';
import { requires } from '../tokens.ts';
import { errorResponses, idempotencyKeyHeaders, jsonBody, jsonResponse } from '../openapi-helpers.ts';
import {
  appendItemsSchema,
  appendResultSchema,
  itemPageSchema,
  listItemsQuerySchema,
  sessionIdParamsSchema,
} from '../schemas.ts';
import { markParsedItems } from '../../lib/items.ts';
import { namedInRequest } from '../../lib/openai/request.ts';
import { checkItemSizes } from '../../lib/session/item-size.ts';
import { appendItems } from '../../lib/turn/index.ts';

const appendItemsRoute = createRoute({
  method: 'post',
  path: '/v1/sessions/{id}/items',
  tags: ['items'],
  summary: 'Append items without calling the model or touching the inbox',
  security: requires('session:turn'),
  request: {
    params: sessionIdParamsSchema,
    body: jsonBody(appendItemsSchema),
    headers: idempotencyKeyHeaders(
      'A retried append with the same key and items answers the first one (201, the same seqs), storing ' +
        'nothing; the key sent again with other items is 422 idempotency_key_reused.',
    ),
  },
  responses: {
    201: jsonResponse(appendResultSchema, 'The seqs of the appended items'),
    ...errorResponses(400, 401, 403, 404, 409, 413, 422, 503),
  },
});

const listItemsRoute = createRoute({
  method: 'get',
  path: '/v1/sessions/{id}/items',
  tags: ['items'],
  summary: 'A page of stored items, newest first',
  security: requires('session:read'),
  request: { params: sessionIdParamsSchema, query: listItemsQuerySchema },
  responses: {
    200: jsonResponse(itemPageSchema, 'A page of items, newest first'),
    ...errorResponses(400, 401, 403, 404, 503),
  },
});

/** POST/GET /v1/sessions/:id/items. */
export function itemRoutes() {
  return createRouter()
    .openapi(appendItemsRoute, async (c) => {
      const { id } = c.req.valid('param');
      // Parsed by clientItemSchema: the session log does not parse them again (lib/items.ts).
      const items = markParsedItems(c.req.valid('json').items);
      checkItemSizes(items, c.var.config.maxItemBytes, { name: 'items' });
      const key = c.req.valid('header')['idempotency-key'];
      const keyed = key === undefined ? {} : { idempotencyKey: key };
      // The open-call check names an item by its place in a turn's `input`: here it is in `items`.
      const positions = items.map((_, index) => index);
      const appended = await appendItems(c.var.services, id, items, keyed).catch((error: unknown) => {
        throw namedInRequest(error, positions, 'items');
      });
      return c.json(appended, 201);
    })
    .openapi(listItemsRoute, async (c) => {
      const { id } = c.req.valid('param');
      const { before, limit } = c.req.valid('query');
      const page = await c.var.services.sessions.listItems(id, {
        limit: limit ?? 100,
        ...(before !== undefined ? { before } : {}),
      });
      return c.json(page, 200);
    });
}

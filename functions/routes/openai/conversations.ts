import { createRoute } from '@hono/zod-openapi';
import type { ConversationDeletedResource } from 'openai/resources/conversations/conversations';
import {
  addConversationItems,
  conversationObject,
  createConversation,
  deleteConversationItem,
  getConversationItem,
  listConversationItems,
  readConversation,
} from '../../../lib/openai/conversations.ts';
import {
  conversationCreateSchema,
  conversationIdParamsSchema,
  conversationItemParamsSchema,
  conversationItemsCreateSchema,
  conversationUpdateSchema,
  openaiObject,
  openaiObjectSchema,
} from '../../../lib/openai/schemas.ts';
import { itemListQuerySchema, includeQuerySchema } from '../../../lib/openai/query-schemas.ts';
import { idempotencyKeyHeaders, jsonBody } from '../../openapi-helpers.ts';
import { createRouter } from '../../router.ts';
import { requires } from '../../tokens.ts';
import { facadeOf, openaiErrors } from './facade-context.ts';

/** The Conversations API over sessions (lib/openai/conversations.ts does the work). */

const objectResponse = (description: string) => ({
  200: { description, content: { 'application/json': { schema: openaiObjectSchema } } },
});

const createConversationRoute = createRoute({
  method: 'post',
  path: '/v1/conversations',
  tags: ['openai'],
  summary: 'Create a conversation (a new session), optionally with items',
  description: 'Needs session:turn and a token bound to no session.',
  security: requires('session:turn'),
  request: {
    body: { required: false, content: { 'application/json': { schema: conversationCreateSchema } } },
    headers: idempotencyKeyHeaders(),
  },
  responses: { ...objectResponse('The conversation'), ...openaiErrors(400, 401, 403, 413, 503) },
});

const getConversationRoute = createRoute({
  method: 'get',
  path: '/v1/conversations/{id}',
  tags: ['openai'],
  summary: 'Read a conversation',
  security: requires('session:read'),
  request: { params: conversationIdParamsSchema },
  responses: { ...objectResponse('The conversation'), ...openaiErrors(400, 401, 403, 404) },
});

const updateConversationRoute = createRoute({
  method: 'post',
  path: '/v1/conversations/{id}',
  tags: ['openai'],
  summary: "Replace a conversation's metadata (the session's)",
  security: requires('admin'),
  request: { params: conversationIdParamsSchema, body: jsonBody(conversationUpdateSchema) },
  responses: { ...objectResponse('The conversation'), ...openaiErrors(400, 401, 403, 404) },
});

const deleteConversationRoute = createRoute({
  method: 'delete',
  path: '/v1/conversations/{id}',
  tags: ['openai'],
  summary: 'Delete a conversation (its session, with every item and turn)',
  security: requires('admin'),
  request: { params: conversationIdParamsSchema },
  responses: { ...objectResponse('Deleted'), ...openaiErrors(400, 401, 403, 404) },
});

const createItemsRoute = createRoute({
  method: 'post',
  path: '/v1/conversations/{id}/items',
  tags: ['openai'],
  summary: 'Append items to a conversation without calling the model',
  security: requires('session:turn'),
  request: {
    params: conversationIdParamsSchema,
    query: includeQuerySchema,
    body: jsonBody(conversationItemsCreateSchema),
    headers: idempotencyKeyHeaders(
      'A retried append with the same key and body answers the first one, storing nothing.',
    ),
  },
  responses: { ...objectResponse('The appended items'), ...openaiErrors(400, 401, 403, 404, 409, 413, 422) },
});

const listItemsRoute = createRoute({
  method: 'get',
  path: '/v1/conversations/{id}/items',
  tags: ['openai'],
  summary: "List a conversation's items (`after` an item id, `limit` 1..100, `order` asc or desc, default desc)",
  security: requires('session:read'),
  request: { params: conversationIdParamsSchema, query: itemListQuerySchema },
  responses: { ...objectResponse('A list of items'), ...openaiErrors(400, 401, 403, 404) },
});

const getItemRoute = createRoute({
  method: 'get',
  path: '/v1/conversations/{id}/items/{item_id}',
  tags: ['openai'],
  summary: 'Read one item of a conversation',
  security: requires('session:read'),
  request: { params: conversationItemParamsSchema, query: includeQuerySchema },
  responses: { ...objectResponse('The item'), ...openaiErrors(400, 401, 403, 404) },
});

const deleteItemRoute = createRoute({
  method: 'delete',
  path: '/v1/conversations/{id}/items/{item_id}',
  tags: ['openai'],
  summary: "Delete one item: refused (400 unsupported), a conversation's history is append-only",
  description:
    'An item of the conversation is 400 `unsupported`: a prompt must stay valid (a function_call needs its ' +
    'output) and the history is append-only. DELETE /v1/responses/{id} takes the newest response out with its ' +
    'input and output items. An item the conversation does not have is 404.',
  security: requires('admin'),
  request: { params: conversationItemParamsSchema },
  responses: { ...objectResponse('Never: items are not deleted one by one'), ...openaiErrors(400, 401, 403, 404) },
});

/** POST/GET/DELETE /v1/conversations[/:id[/items[/:item_id]]]. */
export function conversationRoutes() {
  return createRouter()
    .openapi(createConversationRoute, async (c) => {
      const conversation = await createConversation(
        facadeOf(c),
        c.req.valid('json') ?? {},
        c.req.valid('header')['idempotency-key'],
      );
      return c.json(conversation, 200);
    })
    .openapi(getConversationRoute, async (c) =>
      c.json(conversationObject(await readConversation(facadeOf(c), c.req.valid('param').id)), 200),
    )
    .openapi(updateConversationRoute, async (c) => {
      const { id } = c.req.valid('param');
      await readConversation(facadeOf(c), id);
      const session = await c.var.services.sessions.update(id, { metadata: c.req.valid('json').metadata });
      return c.json(conversationObject(session), 200);
    })
    .openapi(deleteConversationRoute, async (c) => {
      const { id } = c.req.valid('param');
      await readConversation(facadeOf(c), id);
      await c.var.services.sessions.delete(id);
      const deleted: ConversationDeletedResource = { id, object: 'conversation.deleted', deleted: true };
      return c.json(deleted, 200);
    })
    .openapi(createItemsRoute, async (c) => {
      const { items } = c.req.valid('json');
      const key = c.req.valid('header')['idempotency-key'];
      return c.json(await addConversationItems(facadeOf(c), c.req.valid('param').id, items, key), 200);
    })
    .openapi(listItemsRoute, async (c) =>
      c.json(await listConversationItems(facadeOf(c), c.req.valid('param').id, c.req.valid('query')), 200),
    )
    .openapi(getItemRoute, async (c) => {
      const { id, item_id: requested } = c.req.valid('param');
      return c.json(openaiObject(await getConversationItem(facadeOf(c), id, requested)), 200);
    })
    .openapi(deleteItemRoute, async (c): Promise<never> => {
      const { id, item_id: requested } = c.req.valid('param');
      return deleteConversationItem(facadeOf(c), id, requested);
    });
}

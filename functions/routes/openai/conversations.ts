import { createRoute } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { Conversation, ConversationDeletedResource } from 'openai/resources/conversations/conversations';
import type { ConversationItemList } from 'openai/resources/conversations/items';
import type { ResponseItem } from 'openai/resources/responses/responses';
import { z } from 'zod';
import { NotFoundError, SessionExistsError } from '../../../lib/errors.ts';
import { sha256Hex } from '../../../lib/hash.ts';
import type { Item, StoredItem } from '../../../lib/items.ts';
import { compactionItem, itemPage } from '../../../lib/openai/compaction.ts';
import { compactionId, itemId, parseCompactionId, parseItemId, randomId } from '../../../lib/openai/ids.ts';
import { inputToItems, storedItem, type InputItemBody } from '../../../lib/openai/responses.ts';
import type { SessionRecord } from '../../../lib/session/session-log.ts';
import { appendItems } from '../../../lib/turn.ts';
import { authorizeSession } from '../../auth.ts';
import { checkItemSizes } from '../../item-size.ts';
import { jsonBody } from '../../openapi-helpers.ts';
import { createRouter, type AppEnv } from '../../router.ts';
import { requires } from '../../tokens.ts';
import { OpenAIApiError } from '../../../lib/openai/errors.ts';
import { itemsWithinPage, withinPageBytes } from './item-pages.ts';
import { itemsBetween } from '../../../lib/openai/sessions.ts';
import { openaiErrors } from './facade-context.ts';
import {
  conversationCreateSchema,
  conversationIdParamsSchema,
  conversationItemParamsSchema,
  conversationItemsCreateSchema,
  conversationItemsQuerySchema,
  conversationUpdateSchema,
  includeQuerySchema,
  openaiObjectSchema,
  openaiObject,
} from '../../../lib/openai/schemas.ts';

/**
 * The Conversations API over sessions: a conversation is a session (same id), its items are
 * the session's items under the ids lib/openai/ids.ts forms (`msg_|fc_|fco_<session>_<seq>`),
 * and `POST /v1/responses` with `conversation` continues it.
 */

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
    headers: z.object({ 'idempotency-key': z.string().min(1).max(256).optional() }),
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
  },
  responses: { ...objectResponse('The appended items'), ...openaiErrors(400, 401, 403, 404, 409, 413) },
});

const listItemsRoute = createRoute({
  method: 'get',
  path: '/v1/conversations/{id}/items',
  tags: ['openai'],
  summary: "List a conversation's items (`after` an item id, `limit` 1..100, `order` asc or desc, default desc)",
  security: requires('session:read'),
  request: { params: conversationIdParamsSchema, query: conversationItemsQuerySchema },
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

function conversationObject(session: Pick<SessionRecord, 'id' | 'created_at' | 'metadata'>): Conversation {
  return {
    id: session.id,
    object: 'conversation',
    created_at: Math.floor(Date.parse(session.created_at) / 1000),
    metadata: session.metadata,
  };
}

/** The session of a conversation; a missing one is OpenAI's 404. */
async function readConversation(c: Context<AppEnv>, id: string): Promise<SessionRecord> {
  return c.var.services.sessions.get(id).catch((error: unknown) => {
    throw error instanceof NotFoundError
      ? new OpenAIApiError(404, 'not_found', `Conversation with id '${id}' not found.`, 'conversation_id')
      : error;
  });
}

/**
 * Items a client adds to a conversation: messages and tool traffic. A system or developer
 * message has no place in the history (tailgate keeps one system prompt, the session's
 * instructions), except leading ones when the conversation is created.
 */
function conversationItems(
  input: InputItemBody[],
  allowInstructions: boolean,
): { instructions: string | null; items: Item[] } {
  const { instructions, items } = inputToItems(input);
  if (instructions.length > 0 && !allowInstructions) {
    throw new OpenAIApiError(
      400,
      'invalid_request',
      "a system or developer message cannot be added to a conversation: its instructions are the session's, set " +
        'with `instructions` on a response',
      'items[0].role',
    );
  }
  return { instructions: instructions.join('\n\n') || null, items };
}

function listOf(data: ResponseItem[], hasMore: boolean): ConversationItemList {
  return {
    object: 'list',
    data: data as ConversationItemList['data'],
    first_id: data[0]?.id ?? '',
    last_id: data.at(-1)?.id ?? '',
    has_more: hasMore,
  };
}

/** POST/GET/DELETE /v1/conversations[/:id[/items[/:item_id]]]. */
export function conversationRoutes() {
  return createRouter()
    .openapi(createConversationRoute, async (c) => {
      const body = c.req.valid('json') ?? {};
      const key = c.req.valid('header')['idempotency-key'];
      const { sessions } = c.var.services;
      authorizeSession(c, null);
      const { instructions, items } = conversationItems((body.items ?? []) as InputItemBody[], true);
      checkItemSizes(items, c.var.config.maxItemBytes);
      // A retried create (the official clients send an Idempotency-Key) finds the session its first attempt made.
      const id = key !== undefined ? `conv_${sha256Hex(`openai-conversation:${key}`).slice(0, 24)}` : randomId('conv');
      let session: SessionRecord;
      try {
        session = await sessions.create({
          id,
          ...(instructions !== null ? { instructions } : {}),
          ...(body.metadata ? { metadata: body.metadata } : {}),
        });
      } catch (error) {
        if (!(error instanceof SessionExistsError && key !== undefined)) throw error;
        session = await sessions.get(id);
      }
      if (items.length > 0 && session.counts.items === 0) await appendItems(c.var.services, id, items);
      return c.json(conversationObject(session), 200);
    })
    .openapi(getConversationRoute, async (c) =>
      c.json(conversationObject(await readConversation(c, c.req.valid('param').id)), 200),
    )
    .openapi(updateConversationRoute, async (c) => {
      const { id } = c.req.valid('param');
      await readConversation(c, id);
      const session = await c.var.services.sessions.update(id, { metadata: c.req.valid('json').metadata });
      return c.json(conversationObject(session), 200);
    })
    .openapi(deleteConversationRoute, async (c) => {
      const { id } = c.req.valid('param');
      await readConversation(c, id);
      await c.var.services.sessions.delete(id);
      const deleted: ConversationDeletedResource = { id, object: 'conversation.deleted', deleted: true };
      return c.json(deleted, 200);
    })
    .openapi(createItemsRoute, async (c) => {
      const { id } = c.req.valid('param');
      const { items } = conversationItems(c.req.valid('json').items as InputItemBody[], false);
      checkItemSizes(items, c.var.config.maxItemBytes);
      await readConversation(c, id);
      const { first_seq } = await appendItems(c.var.services, id, items);
      const data = items.map((item, index) =>
        storedItem({ ...item, seq: first_seq + index } as StoredItem, itemId(item.type, id, first_seq + index)),
      );
      return c.json(listOf(data, false), 200);
    })
    .openapi(listItemsRoute, async (c) => {
      const { id } = c.req.valid('param');
      const query = c.req.valid('query');
      const session = await readConversation(c, id);
      const total = session.counts.items;
      let after: number | undefined;
      if (query.after !== undefined) {
        const compaction = parseCompactionId(query.after);
        const ref = parseItemId(query.after);
        if (compaction?.sessionId === id) after = compaction.startSeq - 0.5;
        else if (ref?.sessionId === id) after = ref.seq;
        else
          throw new OpenAIApiError(
            400,
            'invalid_request',
            `'${query.after}' is not an item of conversation '${id}'`,
            'after',
          );
      }
      // The current compaction item sits before the first item its summary did not replace.
      const context = await c.var.services.sessions.currentContext(id);
      const { positions, hasMore } = itemPage({
        total,
        limit: query.limit ?? 20,
        ascending: query.order === 'asc',
        ...(after !== undefined ? { after } : {}),
        ...(context ? { compactionAt: context.start_seq - 0.5 } : {}),
      });
      const seqs = positions.filter(Number.isInteger);
      const range = { from: Math.min(...seqs), to: Math.max(...seqs) + 1 };
      const stored = seqs.length > 0 ? await itemsWithinPage(c.var.services, id, range, query.order === 'asc') : [];
      const bySeq = new Map(stored.map((item) => [item.seq, item]));
      // A page ends before the first item its byte cap left out.
      const listed: ResponseItem[] = [];
      for (const position of positions) {
        if (!Number.isInteger(position)) {
          if (context) listed.push(compactionItem(compactionId(id, context.start_seq), context.summary));
          continue;
        }
        const item = bySeq.get(position);
        if (!item) break;
        listed.push(storedItem(item, itemId(item.type, id, item.seq)));
      }
      const data = withinPageBytes(listed);
      return c.json(listOf(data, hasMore || data.length < positions.length), 200);
    })
    .openapi(getItemRoute, async (c) => {
      const { id, item_id: requested } = c.req.valid('param');
      const missing = () =>
        new OpenAIApiError(
          404,
          'not_found',
          `Item with id '${requested}' not found in conversation '${id}'.`,
          'item_id',
        );
      const compaction = parseCompactionId(requested);
      if (compaction?.sessionId === id) {
        await readConversation(c, id);
        const context = await c.var.services.sessions.currentContext(id);
        if (context?.start_seq !== compaction.startSeq) throw missing();
        return c.json(openaiObject(compactionItem(requested, context.summary)), 200);
      }
      const ref = parseItemId(requested);
      if (!ref || ref.sessionId !== id) throw missing();
      const session = await readConversation(c, id);
      if (ref.seq > session.counts.items) throw missing();
      const [item] = await itemsBetween(c.var, id, ref.seq, ref.seq + 1);
      if (!item || item.type !== ref.kind) throw missing();
      return c.json(openaiObject(storedItem(item, requested)), 200);
    });
}

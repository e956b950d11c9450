import type { Conversation } from 'openai/resources/conversations/conversations';
import type { ConversationItemList } from 'openai/resources/conversations/items';
import type { ResponseItem } from 'openai/resources/responses/responses';
import { NotFoundError, SessionExistsError, TailgateError } from '../errors.ts';
import { sha256Hex } from '../hash.ts';
import type { Item, StoredItem } from '../items.ts';
import type { LogScope } from '../session/keys.ts';
import type { SessionRecord } from '../session/session-log.ts';
import { appendItems } from '../turn/index.ts';
import { compactionItem, itemPage } from './compaction.ts';
import { OpenAIApiError } from './errors.ts';
import type { Facade } from './facade.ts';
import { compactionId, namesCompaction, parseCompactionId, randomId } from './ids.ts';
import { itemsWithinPage, withinPageBytes } from './item-pages.ts';
import { listedItems, pageAfter, placeOf } from './listed-items.ts';
import { inputInRequest, namedInRequest } from './request.ts';
import { inputToItems } from './request-input.ts';
import { resolveItemReferences } from './item-references.ts';
import type { ItemListQuery } from './query-schemas.ts';
import type { ConversationCreateBody } from './schemas.ts';
import { itemsBetween } from './sessions.ts';

/** The items a conversation's create or items create sends (references among them). */
type ConversationItemsBody = NonNullable<ConversationCreateBody['items']>;

/**
 * The Conversations API over sessions: a conversation is a session (same id), its items are
 * the session's items under the ids lib/openai/ids.ts forms (`msg_|fc_|fco_<session>_<seq>`),
 * and `POST /v1/responses` with `conversation` continues it (functions/routes/openai/
 * conversations.ts has the routes).
 */

export function conversationObject(session: Pick<SessionRecord, 'id' | 'created_at' | 'metadata'>): Conversation {
  return {
    id: session.id,
    object: 'conversation',
    created_at: Math.floor(Date.parse(session.created_at) / 1000),
    metadata: session.metadata,
  };
}

/** The session of a conversation; a missing one is OpenAI's 404. */
export async function readConversation(facade: Facade, id: string): Promise<SessionRecord> {
  return facade.services.sessions.get(id).catch(conversationMissing(id));
}

/** The conversation and where its incarnation keeps its objects (the ids of its items name its generations). */
async function readConversationScope(facade: Facade, id: string): Promise<[SessionRecord, LogScope]> {
  return Promise.all([readConversation(facade, id), facade.services.sessions.scope(id).catch(conversationMissing(id))]);
}

/** A session not found answered as OpenAI answers a conversation that is not there. */
function conversationMissing(id: string): (error: unknown) => never {
  return (error) => {
    throw error instanceof NotFoundError
      ? new OpenAIApiError(404, 'not_found', `Conversation with id '${id}' not found.`, 'conversation_id')
      : error;
  };
}

/**
 * Items a client adds to a conversation: messages and tool traffic. A system or developer
 * message has no place in the history (tailgate keeps one system prompt, the session's
 * instructions), except leading ones when the conversation is created.
 */
async function conversationItems(
  facade: Facade,
  sent: ConversationItemsBody,
  allowInstructions: boolean,
): Promise<{ instructions: string | null; items: Item[]; positions: readonly number[] }> {
  // An `item_reference` stands for the stored item it names, as in a create (./item-references.ts).
  const { input, origins } = await resolveItemReferences(facade, sent, 'items');
  // Checked as a request's `input`, each refusal named by the item's place in the request's `items`.
  const resolved = inputInRequest(() => inputToItems(input), origins, 'items');
  const { instructions, items } = resolved;
  const positions = resolved.positions.items.map((index) => origins[index] ?? index);
  if (instructions.length > 0 && !allowInstructions) {
    throw new OpenAIApiError(
      400,
      'invalid_request',
      'items[0].role: a system or developer message cannot be added to a conversation: its instructions are the ' +
        "session's, set with `instructions` on a response",
      'items[0].role',
    );
  }
  return { instructions: instructions.join('\n\n') || null, items, positions };
}

/** `items` appended to the conversation, a refusal naming an item by its place in the request's `items`. */
async function appendNamed(
  facade: Facade,
  id: string,
  items: Item[],
  positions: readonly number[],
  options?: { onlyFirst: true } | { idempotencyKey: string },
): Promise<{ first_seq: number }> {
  try {
    return await appendItems(facade.services, id, items, options);
  } catch (error) {
    throw namedInRequest(error, positions, 'items');
  }
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

/** The SHA-256 of what a create stores (metadata keys sorted): a key sent again with another request is refused. */
function conversationHash(
  instructions: string | null,
  items: Item[],
  metadata: ConversationCreateBody['metadata'],
): string {
  const sorted = Object.entries(metadata ?? {}).sort(([a], [b]) => a.localeCompare(b));
  return sha256Hex(JSON.stringify({ instructions, items, metadata: Object.fromEntries(sorted) }));
}

/**
 * POST /v1/conversations: a new session with the items; a retried create (same key) finds the
 * first, and the key sent again with another request is 422 idempotency_key_reused.
 */
export async function createConversation(
  facade: Facade,
  body: ConversationCreateBody,
  key: string | undefined,
): Promise<Conversation> {
  const { sessions } = facade.services;
  facade.authorize(null);
  const { instructions, items, positions } = await conversationItems(facade, body.items ?? [], true);
  facade.checkItems(items, 'items', positions);
  // A retried create (the official clients send an Idempotency-Key) finds the session its first attempt made.
  const id = key !== undefined ? `conv_${sha256Hex(`openai-conversation:${key}`).slice(0, 24)}` : randomId('conv');
  const requestHash = key !== undefined ? conversationHash(instructions, items, body.metadata) : undefined;
  let session: Pick<SessionRecord, 'id' | 'created_at' | 'metadata'>;
  try {
    session = await sessions.create(
      {
        id,
        ...(instructions !== null ? { instructions } : {}),
        ...(body.metadata ? { metadata: body.metadata } : {}),
      },
      requestHash,
    );
  } catch (error) {
    if (!(error instanceof SessionExistsError && key !== undefined)) throw error;
    // A conversation created before its config kept the request's hash is not checked.
    const config = await sessions.config(id);
    const stored = config.request_sha256;
    if (stored !== undefined && stored !== requestHash)
      throw new TailgateError(
        'idempotency_key_reused',
        `the Idempotency-Key created conversation ${id} with a different request`,
        { conversation_id: id },
      );
    session = config;
  }
  // Only as the first record: of retries racing (or one after a create that stopped before its items), one lands.
  if (items.length > 0) await appendNamed(facade, id, items, positions, { onlyFirst: true });
  return conversationObject(session);
}

/**
 * POST /v1/conversations/:id/items: the items appended (a reasoning item on the one after it,
 * inputToItems). Under an Idempotency-Key (`key`), the native append's (lib/session/log/
 * append-key.ts): a retry is answered as the first, its items stored once.
 */
export async function addConversationItems(
  facade: Facade,
  id: string,
  input: ConversationItemsBody,
  key?: string,
): Promise<ConversationItemList> {
  const { items, positions } = await conversationItems(facade, input, false);
  facade.checkItems(items, 'items', positions);
  await readConversation(facade, id);
  // Reasoning items alone go with no item: nothing appended.
  if (items.length === 0) return listOf([], false);
  const keyed = key === undefined ? undefined : { idempotencyKey: key };
  const { first_seq } = await appendNamed(facade, id, items, positions, keyed);
  const scope = await facade.services.sessions.scope(id);
  const data = items.flatMap((item, index) => listedItems({ ...item, seq: first_seq + index } as StoredItem, scope));
  return listOf(data, false);
}

/**
 * GET /v1/conversations/:id/items: a page of the items, each with the reasoning it carries
 * (lib/openai/listed-items.ts), the current compaction item among them.
 */
export async function listConversationItems(
  facade: Facade,
  id: string,
  query: ItemListQuery,
): Promise<ConversationItemList> {
  const [session, scope] = await readConversationScope(facade, id);
  const total = session.counts.items;
  const descending = query.order !== 'asc';
  const limit = query.limit ?? 20;
  const refused = () =>
    new OpenAIApiError(
      400,
      'invalid_request',
      `after: '${query.after}' is not an item of conversation '${id}'`,
      'after',
    );
  // The current compaction item sits before the first item its summary did not replace.
  const context = await facade.services.sessions.currentContext(id);
  let after: number | undefined;
  let within = false;
  if (query.after !== undefined) {
    const compaction = parseCompactionId(query.after);
    const place = placeOf(query.after, id, descending);
    if (compaction?.sessionId === id) {
      // The current compaction, or one a later compaction superseded (a client paging while it
      // landed): one list of the session's compactions, a read of each since. One the
      // conversation never made is no cursor.
      const made =
        namesCompaction(compaction, context) ||
        namesCompaction(compaction, await facade.services.sessions.contextAt(id, compaction.startSeq));
      if (!made) throw refused();
      after = compaction.startSeq - 0.5;
    } else if (place) {
      within = place.within;
      // Within an item's entries the page starts at that item (not at the compaction item before it).
      after = within ? place.seq + (descending ? 0.25 : -0.25) : place.seq;
      // A page after a whole item reads none of it: the id must name that item (the page finds any other).
      if (!within && !(await storedEntry(facade, scope, query.after, total))) throw refused();
    } else throw refused();
  }
  const { positions, hasMore } = itemPage({
    total,
    // One place more when the first one's entries up to the cursor are left out.
    limit: within ? limit + 1 : limit,
    ascending: !descending,
    ...(after !== undefined ? { after } : {}),
    ...(context ? { compactionAt: context.start_seq - 0.5 } : {}),
  });
  const seqs = positions.filter(Number.isInteger);
  const range = { from: Math.min(...seqs), to: Math.max(...seqs) + 1 };
  const stored = seqs.length > 0 ? await itemsWithinPage(facade.services, id, range, !descending) : [];
  const bySeq = new Map(stored.map((item) => [item.seq, item]));
  // A page ends before the first item its byte cap left out.
  const listed: ResponseItem[] = [];
  let cut = false;
  for (const position of positions) {
    if (!Number.isInteger(position)) {
      if (context) listed.push(compactionItem(compactionId(id, context), context.summary));
      continue;
    }
    const item = bySeq.get(position);
    cut = !item;
    if (!item) break;
    listed.push(...listedItems(item, scope, descending));
  }
  const page = pageAfter(listed, query.after, within, limit);
  if (!page) throw refused();
  const data = withinPageBytes(page.data);
  return listOf(data, hasMore || cut || page.more || data.length < page.data.length);
}

/** GET /v1/conversations/:id/items/:item_id: an item, a reasoning item it carries, or the current compaction item. */
export async function getConversationItem(facade: Facade, id: string, requested: string): Promise<ResponseItem> {
  const missing = () =>
    new OpenAIApiError(404, 'not_found', `Item with id '${requested}' not found in conversation '${id}'.`, 'item_id');
  const compaction = parseCompactionId(requested);
  if (compaction?.sessionId === id) {
    await readConversation(facade, id);
    const context = await facade.services.sessions.currentContext(id);
    if (!context || !namesCompaction(compaction, context)) throw missing();
    return compactionItem(requested, context.summary);
  }
  if (!placeOf(requested, id, false)) throw missing();
  const [session, scope] = await readConversationScope(facade, id);
  const found = await storedEntry(facade, scope, requested, session.counts.items);
  if (!found) throw missing();
  return found;
}

/**
 * The entry an item or reasoning id names among the `total` items of the conversation `scope`
 * reads (an item, or its reasoning): none for an id of an item a delete took out, whose seq
 * another item holds now (its id names another generation).
 */
async function storedEntry(
  facade: Facade,
  scope: LogScope,
  requested: string,
  total: number,
): Promise<ResponseItem | undefined> {
  const place = placeOf(requested, scope.id, false);
  if (!place || place.seq > total) return undefined;
  const [item] = await itemsBetween(facade, scope.id, place.seq, place.seq + 1);
  return item && listedItems(item, scope).find((entry) => entry.id === requested);
}

/**
 * DELETE /v1/conversations/{id}/items/{item_id}: refused. The history is append-only, and taking
 * one item out of the prompts (a function_call without its output) would make them invalid; the
 * newest response goes whole with DELETE /v1/responses/{id}. An item not there is 404.
 */
export async function deleteConversationItem(facade: Facade, id: string, requested: string): Promise<never> {
  await getConversationItem(facade, id, requested);
  throw new OpenAIApiError(
    400,
    'unsupported',
    `Item '${requested}' cannot be deleted: a conversation's history is append-only, and a prompt without ` +
      'part of it (a function_call without its output) would be invalid. Delete the newest response instead ' +
      '(DELETE /v1/responses/{id}): it takes out its input and output items.',
    'item_id',
  );
}

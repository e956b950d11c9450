import { ForkRefusedError, NotFoundError, SessionExistsError } from '../errors.ts';
import { forkSession } from '../turn/fork.ts';
import { idGeneration } from '../session/log/rewind.ts';
import { randomHex, sha256Hex } from '../hash.ts';
import type { ClientItem, StoredItem } from '../items.ts';
import { newestPastDead } from './dead-turn.ts';
import { OpenAIApiError } from './errors.ts';
import type { Facade } from './facade.ts';
import { parseResponseId, randomId, responseId } from './ids.ts';
import { refuseOverToolLimit } from '../models/model.ts';
import type { PreparedRequest } from './request.ts';
import type { ResponseCreateBody } from './schemas.ts';

/**
 * The session a request maps to: a conversation is a session and a response is one of its
 * turns (lib/openai/ids.ts). `previous_response_id` continues that response's session,
 * `conversation` that session, and neither starts a new one.
 */

/**
 * The session a stored response goes to: previous_response_id's (404 unknown; `afterTurn`:
 * the turn must follow it, which the claim judges after replaying a repeated Idempotency-Key),
 * the conversation's, or a new one. A new session's id comes from the Idempotency-Key when
 * there is one, so a retried request finds the session its first attempt created and its
 * turn is replayed, not taken twice.
 */
export async function sessionOf(
  facade: Facade,
  body: Pick<ResponseCreateBody, 'previous_response_id' | 'conversation' | 'metadata'>,
  fresh: { instructions: string | null; model: string; idempotencyKey: string | undefined },
): Promise<{ sessionId: string; afterTurn?: number; created?: true }> {
  const { sessions } = facade.services;
  if (body.previous_response_id && body.conversation) {
    throw new OpenAIApiError(
      400,
      'invalid_request',
      'previous_response_id and conversation cannot both be set',
      'previous_response_id',
    );
  }
  if (body.previous_response_id) {
    const { sessionId, turn } = await previousResponse(facade, body.previous_response_id);
    return { sessionId, afterTurn: turn };
  }
  if (body.conversation) {
    const id = typeof body.conversation === 'string' ? body.conversation : body.conversation.id;
    facade.authorize(id);
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
  facade.authorize(null);
  const id = newConversationId(fresh.idempotencyKey);
  try {
    await sessions.create({
      id,
      model: fresh.model,
      ...(fresh.instructions !== null ? { instructions: fresh.instructions } : {}),
      ...(body.metadata ? { metadata: body.metadata } : {}),
    });
  } catch (error) {
    if (!(error instanceof SessionExistsError && fresh.idempotencyKey !== undefined)) throw error;
    return { sessionId: id };
  }
  return { sessionId: id, created: true };
}

/** A new conversation's id: from its request's Idempotency-Key (a retry finds it), else random. */
function newConversationId(idempotencyKey: string | undefined): string {
  return idempotencyKey !== undefined
    ? `conv_${sha256Hex(`openai-response:${idempotencyKey}`).slice(0, 24)}`
    : randomId('conv');
}

/**
 * Refuses a request that would start a conversation (402 `budget_exhausted`) when its token's
 * budget is spent, before anything is stored, as its turn's claim would after the create; what
 * comes first is still answered first (a token bound to a session: the create's 403; then the
 * claim's, its model: an unknown one 404, an unpriced one under a cost budget 400; the tools
 * offered it). A keyed request whose key's conversation exists
 * goes on to it: its turn is replayed, or refused by its claim. One get of the token's spend
 * record, a budgeted token's only.
 */
export async function refuseSpentStart(
  facade: Facade,
  prepared: PreparedRequest,
  idempotencyKey: string | undefined,
): Promise<void> {
  const { tokenSpend: spend, model, sessions } = facade.services;
  if (!spend) return;
  // A token bound to a session may start none: its 403 first, as the create's (sessionOf).
  facade.authorize(null);
  try {
    await spend.checkNow();
  } catch (error) {
    const keyed = idempotencyKey !== undefined ? newConversationId(idempotencyKey) : undefined;
    const started =
      keyed !== undefined &&
      (await sessions.get(keyed).then(
        () => true,
        (missing: unknown) => {
          if (missing instanceof NotFoundError) return false;
          throw missing;
        },
      ));
    if (started) return;
    const tools = prepared.turnTools ?? [];
    refuseOverToolLimit(model(prepared.model ?? facade.config.defaultModel), tools, prepared.modelSettings);
    throw error;
  }
}

/**
 * Deletes a conversation that an unkeyed request started and its failure left empty (its turn
 * taken out, or refused before it was stored): nobody was told its random id, so nothing else
 * goes to it, and a resend of the request starts a conversation of its own. A branch's fork
 * (forked at turn `forkedAt`) is empty when it holds no turn after it. One that holds a turn
 * of its own (a failed turn that stays) is kept; a failed delete is logged.
 */
export async function dropStartedConversation(facade: Facade, sessionId: string, forkedAt = 0): Promise<void> {
  const { sessions, log } = facade.services;
  try {
    if ((await sessions.get(sessionId)).counts.turns === forkedAt) await sessions.delete(sessionId);
  } catch (error) {
    log(`tailgate: the conversation ${sessionId} a failed response started stays`, error);
  }
}

/**
 * The session `previousResponseId` continues: 400 previous_response_not_found when it is not
 * a stored response (OpenAI's status for it), 409 conversation_branching_unsupported when it is not the session's
 * newest turn (a conversation does not branch). A dead turn right after it (./dead-turn.ts) is no
 * branch point: it is taken out first, as the next request on the conversation takes it out.
 */
export async function continuedSession(facade: Facade, previousResponseId: string): Promise<string> {
  const { sessionId, turn, newestTurn } = await previousResponse(facade, previousResponseId);
  const newest = turn === newestTurn - 1 ? await newestPastDead(facade, sessionId) : newestTurn;
  if (turn < newest) throw await branchingError(facade, previousResponseId, sessionId, newest);
  return sessionId;
}

/**
 * The stored response `previousResponseId` names, its session and that session's newest turn
 * (400 previous_response_not_found when it is not a stored response, as OpenAI answers it).
 */
async function previousResponse(
  facade: Facade,
  previousResponseId: string,
): Promise<{ sessionId: string; turn: number; newestTurn: number }> {
  const ref = parseResponseId(previousResponseId);
  const missing = () =>
    new OpenAIApiError(
      400,
      'previous_response_not_found',
      `Previous response with id '${previousResponseId}' not found.`,
      'previous_response_id',
    );
  if (!ref) throw missing();
  facade.authorize(ref.sessionId);
  const [session, generation] = await Promise.all([
    facade.services.sessions.get(ref.sessionId),
    generationAt(facade, ref.sessionId, ref.inputSeq),
  ]).catch((error: unknown) => {
    throw error instanceof NotFoundError ? missing() : error;
  });
  if (ref.turn > session.counts.turns || generation !== ref.generation) throw missing();
  return { sessionId: ref.sessionId, turn: ref.turn, newestTurn: session.counts.turns };
}

/**
 * A new conversation branching off `previousResponseId` (turn `turn` of `sessionId`): a fork of
 * that session at that turn (lib/session/log/fork.ts), which shares its history, with
 * `instructions` when given (the ones that response ran with), else the session's. Its id comes
 * from the Idempotency-Key when there is one, so a retried request finds the fork its first
 * attempt made and its turn is replayed there. A turn that cannot be forked at (one in a
 * segment written before segments kept each record's state) is 409
 * conversation_branching_unsupported naming why.
 */
export async function branchedSession(
  facade: Facade,
  previousResponseId: string,
  at: { sessionId: string; turn: number; instructions?: string | null },
  idempotencyKey: string | undefined,
  tag: string,
): Promise<string> {
  facade.authorize(null);
  const id =
    idempotencyKey !== undefined
      ? `conv_${sha256Hex(`openai-branch:${previousResponseId}:${idempotencyKey}`).slice(0, 24)}`
      : `${branchIdPrefix(tag)}${randomHex(6)}`;
  try {
    const fields = { id, ...(at.instructions !== undefined ? { instructions: at.instructions } : {}) };
    await forkSession(facade.services, at.sessionId, { at_turn: at.turn, fields });
  } catch (error) {
    if (error instanceof SessionExistsError && idempotencyKey !== undefined) return id;
    throw branchRefused(previousResponseId, error);
  }
  return id;
}

/** A fork's refusal (ForkRefusedError) as 409 conversation_branching_unsupported naming why; else `error`. */
export function branchRefused(previousResponseId: string, error: unknown): unknown {
  if (!(error instanceof ForkRefusedError)) return error;
  return new OpenAIApiError(
    409,
    'conversation_branching_unsupported',
    `Response '${previousResponseId}' cannot be branched from: ${error.message}.`,
    'previous_response_id',
  );
}

/**
 * What tells one loop's steps under `previousResponseId` from another's: a hash of the response and
 * `scope`, the loop's (lib/openai/history-index.ts loopScope: the caller, metadata, user...) with
 * the first item of its input, which each step of the loop sends first. Kept with the object of
 * every response that names `previousResponseId` (./stored-responses.ts), so that a later step
 * goes on only after a response of its own loop (./resent-after.ts resentAfter).
 */
export function loopTag(previousResponseId: string, scope: string): string {
  return sha256Hex(`openai-loop-branch:${previousResponseId}:${scope}`);
}

/**
 * How the id of an unkeyed branch off a response begins (the rest random): 12 hex of its loop's
 * tag (loopTag), so that a loop's later steps look for their branch among the forks made there
 * by its own scope starting with the same item alone (./resent-after.ts branchResentAfter).
 */
export function branchIdPrefix(tag: string): string {
  return `conv_${tag.slice(0, 12)}`;
}

/** 409 conversation_branching_unsupported: `previousResponseId` is not the newest turn of its session. */
export async function branchingError(
  facade: Facade,
  previousResponseId: string,
  sessionId: string,
  newestTurn: number,
): Promise<OpenAIApiError> {
  const newest = await newestResponseId(facade, sessionId, newestTurn);
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
async function newestResponseId(facade: Facade, sessionId: string, turn: number): Promise<string | undefined> {
  const page = await facade.services.sessions.listItems(sessionId, { limit: 200 });
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
  if (inputSeq >= outputSeq) return undefined;
  const generation = await generationAt(facade, sessionId, inputSeq);
  return responseId({ sessionId, turn, inputSeq, outputSeq, ...(generation ? { generation } : {}) });
}

/**
 * The generation the ids of a turn whose input starts at `seq` name (lib/openai/ids.ts;
 * lib/session/log/rewind.ts, idGeneration): one read of the session's config.
 */
export async function generationAt(facade: Facade, sessionId: string, seq: number): Promise<string | undefined> {
  return idGeneration(await facade.services.sessions.scope(sessionId), seq);
}

/** A model's output item: an assistant message or a function call. */
export function isOutput(item: StoredItem | ClientItem): boolean {
  return item.type === 'function_call' || (item.type === 'message' && item.role === 'assistant');
}

/** Items with `from <= seq < to`, oldest first (several pages when they are large). */
export async function itemsBetween(
  facade: Pick<Facade, 'services'>,
  sessionId: string,
  from: number,
  to: number,
): Promise<StoredItem[]> {
  const collected: StoredItem[] = [];
  let before = to;
  while (before > from) {
    const page = await facade.services.sessions.listItems(sessionId, {
      before,
      limit: Math.min(1000, before - from),
    });
    collected.push(...page.items.filter((item) => item.seq >= from));
    if (!page.has_more || page.next_before === null || page.items.length === 0) break;
    before = page.next_before;
  }
  return collected.sort((a, b) => a.seq - b.seq);
}

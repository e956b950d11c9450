import { IdempotencyKeyReusedError, NotNewestTurnError, TurnInProgressError } from '../errors.ts';
import type { Tool } from '../items.ts';
import { refuseOverToolLimit } from '../models/model.ts';
import type { TurnOptions, TurnRequest } from '../turn/index.ts';
import { refusedAgain, refusedNewest, refusedRetry, retriedAfter } from './aborted-retry.ts';
import { createBackgroundResponse } from './background-response.ts';
import type { Facade } from './facade.ts';
import { compactionScope } from './compaction-index.ts';
import { findHistory, loopScope, type HistoryMatch } from './history-index.ts';
import { takenUnderConversation } from './failed-steps.ts';
import { canonical } from './history-items.ts';
import { parseCompactionId } from './ids.ts';
import { conversationTag, resentByKey, resentUnderConversation } from './conversation-resend.ts';
import { checkOfferedToolChoice } from './tool-choice.ts';
import { echoedModel, namedInRequest, type PreparedRequest } from './request.ts';
import { resentHistory, type StoredContext, type TailgateResponse } from './responses.ts';
import {
  branchedSession,
  branchingError,
  dropStartedConversation,
  loopTag,
  refuseSpentStart,
  sessionOf,
} from './sessions.ts';
import { branchResentAfter, resentAfter, storedList } from './resent-after.ts';
import { readWithoutDeadTurn } from './dead-turn.ts';
import { checkHeldIds, heldAtBranch, heldIn } from './held-ids.ts';
import { LapsedDeadTurn, refuseLapsedDead } from '../turn/dead-turn.ts';
import type { NewestTurn } from '../session/log/newest-turn.ts';
import { runStoredTurn, streamStoredTurn } from './stored-turn.ts';
import { keptObject, openaiTools } from './stored-responses.ts';

/**
 * A stored response (POST /v1/responses without `store: false`, ./post-response.ts): the request
 * is mapped onto its conversation (continued, branched, or a new one); ./stored-turn.ts runs its turn.
 */
export async function createStoredResponse(
  facade: Facade,
  prepared: PreparedRequest,
  idempotencyKey: string | undefined,
  onto: {
    /** A branch: the fork of previous_response_id's conversation this request goes to. */
    branch?: string;
    /** A new conversation whatever stored one the input's history matches (see `branched`). */
    fresh?: true;
    /**
     * previous_response_id's conversation's newest turn: the input resent the `known` items up to
     * `lastSeq` (none: it retries the failed attempts of its step, `taken` of its items stored
     * by the first: lib/openai/failed-steps.ts).
     */
    after?: { turn: number; known: number; lastSeq: number; taken?: number | undefined };
    /** A keyed retry under `conversation`: the items the request its key took resent (./conversation-resend.ts). */
    keyedResent?: number;
    /** Started again once its claim found a dead turn's lease run out (./dead-turn.ts): it closes that turn. */
    lapsed?: true;
  } = {},
): Promise<TailgateResponse | Response> {
  const { branch, fresh, after } = onto;
  const { services } = facade;
  const { body, model, instructions, tools, turnTools } = prepared;
  // Neither previous_response_id nor conversation: the input is the whole history, which may continue a stored one.
  const whole = !body.previous_response_id && !body.conversation;
  const loop = whole ? loopScope(facade, prepared) : '';
  // A step naming previous_response_id: its loop's tag (the loop's scope and its first item, which
  // every step of it sends first, before any compaction item a step resends), kept with its response,
  // which only a step of its loop goes on after.
  const first = prepared.history.slice(0, 1).map((item) => canonical(item));
  const tag = body.previous_response_id
    ? loopTag(body.previous_response_id, JSON.stringify([loopScope(facade, prepared), first]))
    : undefined;
  const keyed = idempotencyKey !== undefined;
  const match = whole && !fresh ? await resentConversation(facade, prepared, keyed) : undefined;
  // A client's loop step goes on in `match`: counted under its session's rate limit, as one naming it.
  if (match) await facade.takeSessionTurn?.(match.session.id);
  // Without tools the turn offers its conversation's: a new one has none (refused before it is
  // created, as is a new one of a token whose budget is spent).
  if (whole && !match) checkOfferedToolChoice(prepared);
  if (whole && !match) await refuseSpentStart(facade, prepared, idempotencyKey);
  const { sessionId, afterTurn, created } = match
    ? { sessionId: match.session.id, afterTurn: match.turn, created: undefined }
    : await sessionOf(facade, body, { instructions, model: model ?? facade.config.defaultModel, idempotencyKey }).then(
        (found) => ({
          ...found,
          ...(branch ? { sessionId: branch } : {}),
          ...(after ? { afterTurn: after.turn } : {}),
        }),
      );
  // Read with its newest turn: a conversation's newest turn aborted may be what this request retries.
  // (Without a turn its dead process left, its client never told its id: ./dead-turn.ts.)
  const read = match ? undefined : await readWithoutDeadTurn(facade, sessionId);
  const session = match?.session ?? read!.session;
  // Under `conversation`: the items its loop's previous step sent, resent, are not stored again
  // (./conversation-resend.ts; a keyed retry's, those its key's request resent).
  const scope = body.conversation ? loopScope(facade, prepared) : '';
  const resentUnder =
    onto.keyedResent ?? (body.conversation && read ? await resentUnderConversation(facade, read, prepared, scope) : 0);
  // Without tools a tool_choice must name one of the conversation's. An unkeyed request is refused
  // now; a keyed one by the claim (`checkConfig`), after a retry's replay, so that a retry is answered
  // as its first request was whatever tools the conversation has since, and a refusal stores nothing.
  const checkTools =
    tools === undefined
      ? (offered: { tools: readonly Tool[] }) => checkOfferedToolChoice(prepared, offered)
      : undefined;
  let refused = false;
  try {
    checkTools?.(session);
  } catch (error) {
    if (idempotencyKey === undefined) throw error;
    refused = true;
  }
  // So is a request offering its model more tools than it takes (the claim refuses it, after a retry's replay).
  refused ||= overToolLimit(facade, prepared, session);
  // A match stores the items after the history it holds (a compaction item sent back among them
  // is the conversation's own); a new conversation, the input (a summary for the items compacted).
  // What the input sent beyond what the conversation holds (the items it resent counted as the
  // client holds them, compaction items left out), then what is stored of it. The conversation's
  // current compaction item sent back to it (under `conversation`, or previous_response_id naming
  // its newest response) is its own too: it stands for nothing new, and the items are stored as sent.
  const known = match?.known ?? after?.known ?? resentUnder;
  const resend = match ? 'history' : whole || branch ? 'items' : await storedList(facade, sessionId, prepared, known);
  const sent = prepared[resend].slice(known);
  // An unkeyed retry of a step whose dead turn stored its outputs, that turn's lease still running,
  // is answered 409 as any request while it runs (the client retries it), not refused for calls
  // answered already: once the lease ran out the attempt is failed, and its outputs are taken.
  // (Not a step naming a response older than the one the running turn follows: it branches.)
  const running = read?.running;
  const retries = running && (afterTurn === undefined || read.newestTurn!.turn <= afterTurn + 1);
  if (retries && !keyed && sent.some((item) => answeredBy(read.newestTurn, item))) throw running;
  // Items a failed attempt of the step stored that answer calls are not stored again (`taken`).
  // (Not in the background: a response id names its first input seq, which a retake has not.)
  // So are those of a step retried under `conversation`, its newest turn failed (./failed-steps.ts),
  // compared as that attempt stored them (without its own compaction item sent back).
  const under =
    body.conversation && !body.background && read ? await takenUnderConversation(facade, read, sent) : undefined;
  const taken = body.background ? 0 : (match?.taken ?? after?.taken ?? under ?? 0);
  const items = sent.slice(taken);
  const positions = prepared.positions[resend].slice(known).slice(taken);
  const retried =
    body.conversation && !keyed && refusedNewest(read?.newestTurn)
      ? await refusedRetry(facade, sessionId, undefined, items, session)
      : undefined;
  if (retried) throw retried;
  // An item sent with the id of one its conversation holds is a 400, as OpenAI's (a branch's: before its fork, below).
  const onNewest = afterTurn === undefined || after !== undefined || afterTurn >= session.counts.turns;
  if (read && !whole && onNewest) checkHeldIds(prepared, positions, heldIn(read.scope, session.counts.items));
  // The instructions of a request are the session's from then on (tailgate keeps one system prompt;
  // "" clears them, none sent keeps them); not so for one continuing an older turn: a retry (they
  // are set already) or a branch (refused), nor for one whose tool_choice or tools the claim will
  // refuse unless it is a retry.
  const behind = afterTurn !== undefined && afterTurn < session.counts.turns;
  const ranWith = prepared.sessionInstructions === undefined ? session.instructions : prepared.sessionInstructions;
  if (ranWith !== session.instructions && !behind && !refused)
    await services.sessions.update(sessionId, { instructions: ranWith });
  const context: StoredContext = {
    session: { id: sessionId, created_at: session.created_at },
    // The response names the taken items as its input too: its input_items list them once.
    inputCount: taken + items.length,
    fields: {
      ...prepared.echo,
      model: echoedModel(facade, prepared, session.model),
      createdAt: services.clock(),
      instructions: ranWith,
      tools: openaiTools(tools ?? session.tools),
      conversationId: sessionId,
      store: true,
    },
    ...(match?.lastSeq !== undefined ? { resent: resentHistory(prepared, sessionId, match.known, match.lastSeq) } : {}),
    ...(after?.known ? { resent: resentHistory(prepared, sessionId, after.known, after.lastSeq) } : {}),
    ...(tag !== undefined ? { loop: tag } : {}),
    ...(body.conversation ? { loop: conversationTag(sessionId, scope, prepared.history) } : {}),
    // A keyed request keeps the entry it matched: a retry of it matches again, and is replayed.
    ...(whole
      ? {
          history: {
            before: prepared.history,
            replaced: idempotencyKey === undefined ? match?.key : undefined,
            scope: loop,
          },
        }
      : {}),
  };
  const compaction = body.context_management?.[0];
  // A background turn's answer is built from its stored items, which keep no log probabilities: none are asked.
  const { logprobs: _unanswered, ...backgroundSettings } = prepared.modelSettings;
  const modelSettings = body.background ? backgroundSettings : prepared.modelSettings;
  const request: TurnRequest = {
    input: items,
    ...(model !== undefined ? { model } : {}),
    ...(turnTools !== undefined ? { tools: turnTools } : {}),
    ...(body.max_output_tokens ? { max_output_tokens: body.max_output_tokens } : {}),
    ...(body.temperature !== undefined && body.temperature !== null ? { temperature: body.temperature } : {}),
    ...(body.prompt_cache_key ? { prompt_cache_key: body.prompt_cache_key } : {}),
    ...(Object.keys(modelSettings).length > 0 ? { model_settings: modelSettings } : {}),
    // OpenAI's default is "disabled": no overflow safety net behind a Responses client's back.
    truncation: body.truncation ?? 'disabled',
    ...(compaction
      ? { compaction: compaction.compact_threshold ? { threshold: compaction.compact_threshold } : {} }
      : {}),
  };
  const options: TurnOptions = {
    ...(idempotencyKey !== undefined ? { idempotencyKey } : {}),
    ...(afterTurn !== undefined ? { afterTurn } : {}),
    ...(checkTools ? { checkConfig: checkTools } : {}),
    // A resend that retries a failed step whose outputs its first attempt stored takes it again
    // (under a key, compared as asking those outputs, as that attempt was: a retry is replayed).
    ...(taken > 0 && items.length === 0 ? { retake: true, retaken: sent } : {}),
    // A dead turn whose lease ran out since it was read is taken out, not followed (./dead-turn.ts).
    ...(onto.lapsed ? {} : { onLapsed: refuseLapsedDead }),
  };
  // The claim refuses a turn that would not follow previous_response_id's (a keyed retry is
  // replayed first): the request then branches, into a fork of the conversation at that turn.
  const branched = async (thrown: unknown): Promise<TailgateResponse | Response> => {
    if (thrown instanceof LapsedDeadTurn)
      return createStoredResponse(facade, prepared, idempotencyKey, { lapsed: true });
    const error = namedInRequest(thrown, positions);
    // A conversation this request started under a random id (a new one, or a branch's fork),
    // which its failure left without a turn of its own, goes.
    // (A branch a loop went on in, `after` its newest turn, stays.)
    if ((created || (branch && !after)) && idempotencyKey === undefined)
      await dropStartedConversation(facade, sessionId, branch ? afterTurn : undefined);
    // A history whose conversation moved past it (a keyed request whose key took no turn there,
    // or a step racing another): a new conversation, as an unkeyed resend of it starts.
    if (error instanceof NotNewestTurnError && match)
      return createStoredResponse(facade, prepared, idempotencyKey, { fresh: true });
    // A keyed retry of a step that resent every item since that response went on after the
    // turn before its key's, claiming the items after those: claimed so again, it is replayed.
    const keyedStep = error instanceof IdempotencyKeyReusedError && tag && afterTurn !== undefined && !branch && !after;
    const replayed = keyedStep ? await resentAfter(facade, sessionId, afterTurn, prepared, tag, error.turn) : undefined;
    if (replayed) return createStoredResponse(facade, prepared, idempotencyKey, { after: replayed });
    // So is a keyed retry of a step under `conversation` that resent what its loop sent before.
    const keyedUnder = error instanceof IdempotencyKeyReusedError && body.conversation && !onto.keyedResent;
    const keyedResent = keyedUnder ? await resentByKey(facade, sessionId, error.turn, prepared, scope) : 0;
    if (keyedResent) return createStoredResponse(facade, prepared, idempotencyKey, { keyedResent });
    // A turn running after one that ended after that response: the request would not follow it
    // whatever the running turn's end, so it is judged as on an idle conversation (a fork there
    // waits for no turn); right after that response, it waits for the running turn's end.
    const running = error instanceof TurnInProgressError && !error.ownKey ? runningTurn(error) : undefined;
    const passed =
      running !== undefined && afterTurn !== undefined && running > afterTurn + 1
        ? new NotNewestTurnError(sessionId, afterTurn, running)
        : error;
    if (!(passed instanceof NotNewestTurnError && body.previous_response_id && tag && afterTurn !== undefined))
      throw error;
    if (branch || after) throw await branchingError(facade, body.previous_response_id, sessionId, passed.newest);
    // A resend of every item since that response continues the newest (./resent-after.ts: the
    // compaction items among them are the conversation's own), and a retry of the request an
    // `abort` notice refused does not branch: it is refused again.
    const resent = await resentAfter(facade, sessionId, afterTurn, prepared, tag);
    const onward = await continuation(facade, sessionId, resent ?? afterTurn, prepared, keyed);
    if (onward) return createStoredResponse(facade, prepared, idempotencyKey, { after: onward });
    // The loop's later steps after it branched go on in its branch (an unkeyed one: a keyed
    // request's retry finds the branch its key names).
    facade.authorize(null);
    const ongoing = resent || keyed ? undefined : await branchResentAfter(facade, sessionId, afterTurn, prepared, tag);
    // (There too, a retry of its step's failed attempts goes on after them, one an abort refused is refused.)
    const inBranch = ongoing && (await continuation(facade, ongoing.sessionId, ongoing, prepared, false));
    if (inBranch)
      return createStoredResponse(facade, prepared, idempotencyKey, { branch: ongoing.sessionId, after: inBranch });
    // The branch runs with the instructions that response ran with (its kept object's), not the ones
    // its conversation took since; without a kept object, with the conversation's.
    const kept = await keptObject(facade, body.previous_response_id);
    // Nor may it resend an item of its history: those before that response's output, and that output.
    checkHeldIds(prepared, prepared.positions.items, heldAtBranch(read!.scope, body.previous_response_id, kept));
    const pointInstructions = typeof kept?.instructions === 'string' ? kept.instructions : null;
    const at = { sessionId, turn: afterTurn, ...(kept ? { instructions: pointInstructions } : {}) };
    const fork = await branchedSession(facade, body.previous_response_id, at, idempotencyKey, tag);
    return createStoredResponse(facade, prepared, idempotencyKey, { branch: fork });
  };
  const streamed = () => streamStoredTurn(facade, context, request, options);
  if (body.background)
    return createBackgroundResponse(facade, context, request, options, body.stream === true && streamed).catch(
      branched,
    );
  if (body.stream) return streamed().catch(branched);
  return runStoredTurn(facade, context, request, options, branched);
}

/**
 * The stored conversation a request with neither previous_response_id nor conversation goes on
 * in: the one whose whole history its input resends, in its loop's scope, when the caller may use
 * it (./history-index.ts findHistory); undefined when it starts a new one (which a token bound to
 * a session may not). A resend of the request an `abort` notice refused is refused again
 * (./aborted-retry.ts). The create decides so, and so does a count's caller (./input-tokens.ts).
 */
export async function resentConversation(
  facade: Facade,
  prepared: PreparedRequest,
  keyed: boolean,
): Promise<HistoryMatch | undefined> {
  // Only a stored conversation's compaction item (compactionId) is indexed under its own scope.
  const { anchor } = prepared;
  const start = anchor && parseCompactionId(anchor.id) ? compactionScope(facade, anchor) : undefined;
  const scope = loopScope(facade, prepared);
  const match = await findHistory(facade, scope, prepared.history, keyed, prepared.compactedAt, start);
  if (match?.refused) throw await refusedAgain(facade, match.session.id, match.turn);
  return match;
}

/**
 * Where a step under an older `previous_response_id` goes on in `sessionId`: after its newest
 * turn when the step resent every item since that response (`resent`, ./resent-after.ts);
 * else after the failed attempts of the step it retries, the outputs the first one stored to
 * its calls taken as they are (a message stored again would leave a history no fixed
 * previous_response_id resends), past the items it resent when it did; undefined (a branch)
 * otherwise. A retry of the request an `abort` notice refused is refused again (./aborted-retry.ts;
 * not under a key, whose retry is replayed). `resent` is a turn number when nothing was resent.
 */
export async function continuation(
  facade: Facade,
  sessionId: string,
  resent: number | { turn: number; known: number; lastSeq: number; newest: boolean },
  prepared: PreparedRequest,
  keyed: boolean,
): Promise<{ turn: number; known: number; lastSeq: number; taken?: number } | undefined> {
  if (typeof resent === 'object' && resent.newest) return resent;
  if (keyed) return undefined;
  const [since, known, lastSeq] =
    typeof resent === 'object' ? [resent.turn, resent.known, resent.lastSeq] : [resent, 0, 0];
  // Compared as the attempts stored it (the conversation's own compaction item not stored).
  const stored = await storedList(facade, sessionId, prepared, known);
  const retried = await retriedAfter(facade, sessionId, since, prepared[stored].slice(known));
  if (retried?.refused) throw await refusedAgain(facade, sessionId, retried.newest);
  // (Not in the background: a response id names its first input seq, which a retake has not.)
  return retried?.taken && !prepared.body.background
    ? { turn: retried.newest, known, lastSeq, taken: retried.taken }
    : undefined;
}

/** The number of the turn a `turn_in_progress` names as running (none for a compaction or a delete). */
function runningTurn(error: TurnInProgressError): number | undefined {
  const turn = (error.details as { turn?: unknown } | undefined)?.turn;
  return typeof turn === 'number' ? turn : undefined;
}

/**
 * Whether `item` is an output its conversation's newest turn answered its call with already (a
 * retake, storing no input, answers what the failed attempt it takes again answered: the calls
 * not open after it).
 */
export function answeredBy(turn: NewestTurn | null, item: { type?: string }): boolean {
  if (item.type !== 'function_call_output') return false;
  const call = (item as { call_id: string }).call_id;
  return turn!.answered.includes(call) || (turn!.retake !== undefined && !turn!.retake.open?.includes(call));
}

/**
 * Whether the claim of `prepared`'s turn will refuse it for its model (lib/turn/plan.ts
 * `checkTurnModels`): more tools offered than the model takes, or a model that cannot run.
 */
function overToolLimit(
  facade: Facade,
  prepared: PreparedRequest,
  session: { model: string | null; tools: readonly Tool[] },
): boolean {
  try {
    refuseModelTools(facade, prepared, session);
    return false;
  } catch {
    return true;
  }
}

/**
 * What the claim of `prepared`'s turn in `session` refuses it with for its model: more tools
 * offered than the model takes (its request's, else the session's), or a model that cannot run.
 */
export function refuseModelTools(
  facade: Facade,
  prepared: PreparedRequest,
  session: { model: string | null; tools: readonly Tool[] },
): void {
  const model = facade.services.model(prepared.model ?? session.model ?? facade.config.defaultModel);
  refuseOverToolLimit(model, prepared.turnTools ?? session.tools, prepared.modelSettings);
}

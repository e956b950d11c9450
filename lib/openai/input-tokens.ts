import { z } from 'zod';
import { countPromptTokens } from '../tokens/token-counter.ts';
import { OpenAIApiError } from './errors.ts';
import { TurnInProgressError } from '../errors.ts';
import type { Facade } from './facade.ts';
import { referableInputItemSchema } from './input-schemas.ts';
import { namedInRequest, partInRequest, prepareResponseRequest, type PreparedRequest } from './request.ts';
import { resentUnderConversation } from './conversation-resend.ts';
import { loopScope } from './history-index.ts';
import { resentAfter, storedList } from './resent-after.ts';
import { readWithoutDeadTurn, runningIn } from './dead-turn.ts';
import { takenUnderConversation } from './failed-steps.ts';
import { refusedNewest, refusedRetry } from './aborted-retry.ts';
import { answeredBy, continuation, refuseModelTools, resentConversation } from './create-response.ts';
import { checkCalls } from '../session/log/open-calls.ts';
import type { Item } from '../items.ts';
import { responseCreateSchema } from './schemas.ts';
import { assembleStateless } from './stateless.ts';
import { checkInputCalls } from './stateless-response.ts';
import { resolveItemReferences } from './item-references.ts';
import { continuedSession, loopTag, sessionOf } from './sessions.ts';
import { parseResponseId } from './ids.ts';
import { canonical } from './history-items.ts';
import { countNextPrompt } from '../turn/index.ts';
import type { ForkSketch } from '../session/session-log.ts';
import { countedBranch, forkInput } from './count-branch.ts';
import { checkOfferedToolChoice } from './tool-choice.ts';
import { checkHeldIds, heldIn } from './held-ids.ts';
import { budgetRefusal } from '../ledger/budget.ts';
import type { SessionRecord } from '../session/fields.ts';
import { ModelConfigurationError } from '../models/errors.ts';
import { refuseOverToolLimit, type Model } from '../models/model.ts';

/**
 * POST /v1/responses/input_tokens (`client.responses.inputTokens.count`): how many tokens the
 * prompt of a response to `input` would hold, by tailgate's own estimate: the counter that
 * sizes a model's window (`CONTEXT_LIMIT`, a budget's reserve), over the prompt the strategies
 * build, with the tools offered, before it is fitted to the window. Without
 * previous_response_id or conversation, a `store: false` response's prompt of the instructions
 * and the input (its checks refuse the same inputs); nothing is read, but for a token bound to a
 * session (or a tool_choice naming a tool none was sent, which a create checks against the tools
 * of the conversation the input resends) the history index, where a create finds the
 * conversation the input resends (its own, or the create's 403), and that conversation, a dead
 * response after that history taken out first as the create takes it out. With one of them, the
 * prompt the conversation's next turn would send (the prompt preview's, lib/turn/preview.ts:
 * the stored context after the strategies, pending notices, a due compaction as made, with the
 * input appended); it reads the conversation (its record, its context, its pending notices
 * where `inbox` runs) and a previous response's generation. A response that is not its
 * conversation's newest is counted where a create naming it would go (pastResponse): on after
 * the newest, or in the branch it would make, sketched, not written (./count-branch.ts). It
 * answers 409 turn_in_progress while a turn it would follow runs, or an input queued before it
 * waits for its claim to take up first (lib/turn/preview.ts), as a create's claim answers.
 * A conversation whose budget is spent is the create's 402 (its claim's check, before the input's
 * calls are judged). `item_reference` entries are resolved as a create resolves them (./item-references.ts). No
 * model is called, so a model whose provider has no key configured is counted too (as a
 * model that takes images and files); nothing is stored.
 */

export const inputTokensSchema = responseCreateSchema
  .pick({
    model: true,
    instructions: true,
    tools: true,
    tool_choice: true,
    parallel_tool_calls: true,
    reasoning: true,
    text: true,
    truncation: true,
    previous_response_id: true,
    conversation: true,
  })
  .extend({
    input: z
      .union([z.string().min(1), z.array(referableInputItemSchema).min(1).max(10_000)])
      .nullable()
      .optional(),
    // OpenAI's style preset of the model's: no prompt tailgate builds has one, so it changes no count.
    personality: z.string().max(64).optional(),
  })
  .strict()
  .meta({ id: 'OpenAIInputTokenCount' });
export type InputTokensBody = z.infer<typeof inputTokensSchema>;

export async function countInputTokens(
  facade: Facade,
  body: InputTokensBody,
): Promise<{ object: 'response.input_tokens'; input_tokens: number }> {
  facade = { ...facade, services: { ...facade.services, model: countingModel(facade.services.model) } };
  const stored = body.previous_response_id || body.conversation;
  if (!body.input && !stored)
    throw new OpenAIApiError(400, 'invalid_request', 'input: give the input to count', 'input');
  // The session the body names is authorized before anything else, as a create's limits authorize
  // it (functions/rate-limit.ts): a bound token is refused the create's 403 whatever else the body
  // holds (both fields set, an item_reference of a third session).
  const named = body.conversation
    ? typeof body.conversation === 'string'
      ? body.conversation
      : body.conversation.id
    : body.previous_response_id && parseResponseId(body.previous_response_id)?.sessionId;
  if (named) facade.authorize(named);
  const { input, origins } = await resolveItemReferences(facade, body.input ?? []);
  const { personality: _style, ...asked } = body;
  // Stored either way: a create without previous_response_id or conversation may go on in the
  // conversation its input resends, whose tools a tool_choice may name (checked below).
  const prepared = prepareResponseRequest(facade, { ...asked, input }, origins);
  if (stored) {
    const { sessionId, items, positions } = await nextTurnOf(facade, prepared);
    const tokens = await countNextPrompt(
      facade.services,
      sessionId,
      {
        input: items,
        model: prepared.model,
        tools: prepared.turnTools,
        ...(prepared.sessionInstructions !== undefined ? { instructions: prepared.sessionInstructions } : {}),
      },
      (plan) => refuseOverToolLimit(plan.model, plan.tools, prepared.modelSettings),
    ).catch((error: unknown) => {
      throw partInRequest(error, positions) ?? error;
    });
    return { object: 'response.input_tokens', input_tokens: tokens };
  }
  // As a create with neither field: a resend of a stored conversation's whole history goes on in it
  // (./create-response.ts resentConversation), any other input starts a new conversation, which a
  // token bound to a session may not (the create's 403). Looked up for such a token, or for a
  // tool_choice naming a tool none was sent, alone: the count is a `store: false` response's either way.
  let looked: ReturnType<typeof resentConversation> | undefined;
  const resent = () => (looked ??= resentConversation(facade, prepared, false));
  // Without tools, a tool_choice is checked first, as a create checks it, against the tools of the
  // conversation the input resends (none for a new one): looked up when it names a tool none offers.
  try {
    checkOfferedToolChoice(prepared);
  } catch (error) {
    const match = await resent();
    if (!match) throw error;
    checkOfferedToolChoice(prepared, match.session);
  }
  try {
    facade.authorize(null);
  } catch (refused) {
    if (!(await resent())) throw refused;
  }
  // An input a `store: false` create refuses (an output answering no call before it) is not counted.
  checkInputCalls(prepared);
  const tools = prepared.turnTools ?? [];
  const request = {
    items: prepared.items,
    instructions: prepared.instructions,
    tools,
    model: prepared.model ?? facade.config.defaultModel,
  };
  let stateless: ReturnType<typeof assembleStateless>;
  try {
    stateless = assembleStateless(facade.services, request);
  } catch (error) {
    // A refused image or file is named by its position in the request's input, as a create names it.
    throw partInRequest(error, prepared.positions.items) ?? error;
  }
  const { assembled, budget, model } = stateless;
  // More tools than the model takes: the 400 a create answers (./stateless.ts prepareStateless).
  refuseOverToolLimit(model, tools, prepared.modelSettings);
  return { object: 'response.input_tokens', input_tokens: countPromptTokens(assembled.prompt, tools, budget.counter) };
}

/**
 * Where the next turn of a request under previous_response_id or conversation goes, as a create
 * would take it, nothing written: the conversation (after its newest turn, or in a loop's branch),
 * or a fork not written (`ForkSketch`) when the create would branch (pastResponse); with the items
 * of its input that turn would store and their positions in the input. A `store: false` response
 * off a stored one (./continued-stateless.ts) runs on that turn's prompt: `stored` false, no
 * conversation's budget refuses it.
 */
export async function nextTurnOf(
  facade: Facade,
  prepared: PreparedRequest,
  stored = true,
): Promise<{ sessionId: string | ForkSketch; items: Item[]; positions: number[] }> {
  const { body } = prepared;
  const claim = claimChecks(facade, prepared, stored);
  // (sessionOf refuses previous_response_id and conversation both, as a create.)
  const { sessionId, after } = body.conversation
    ? { ...(await sessionOf(facade, body, { instructions: null, model: '', idempotencyKey: undefined })), after: {} }
    : await continuedSession(facade, body.previous_response_id!).then(
        (sessionId) => ({ sessionId, after: {} }),
        (error: unknown) => pastResponse(facade, prepared, error, claim),
      );
  const { items, positions } =
    typeof sessionId === 'string'
      ? await storedInput(facade, sessionId, prepared, after, claim)
      : forkInput(prepared, sessionId);
  return { sessionId, items, positions };
}

/**
 * The checks a stored create's claim makes of its turn in `session` before it judges the input's
 * calls (lib/session/log/commit.ts): the session's budget spent (`stored`; no conversation's
 * budget refuses a `store: false` response), then its model and the tools it offers (refuseModelTools).
 */
function claimChecks(facade: Facade, prepared: PreparedRequest, stored: boolean): (session: SessionRecord) => void {
  return (session) => {
    const spent = stored ? budgetRefusal(session.budget, session.usage) : null;
    if (spent) throw spent;
    refuseModelTools(facade, prepared, session);
  };
}

/**
 * `resolve`, where a provider's setting is missing a model that only counts: its window and
 * counter are its id's, it takes images and files, and a call of it is the 503 it would have been.
 */
function countingModel(resolve: (id: string) => Model): (id: string) => Model {
  return (id) => {
    try {
      return resolve(id);
    } catch (error) {
      if (!(error instanceof ModelConfigurationError)) throw error;
      const refuse = () => {
        throw error;
      };
      return { id, generate: refuse, stream: refuse };
    }
  };
}

/**
 * The items of `prepared` a create would store in conversation `sessionId` (./create-response.ts):
 * under `conversation`, not those its loop's previous step sent and it resent
 * (./conversation-resend.ts), nor those the failed attempts of the step it retries stored
 * (./failed-steps.ts), read as the create reads it, a dead turn taken out first (./dead-turn.ts;
 * under previous_response_id, continuedSession took it out); as the client holds them when the
 * compaction items it sent back are the conversation's own (./resent-after.ts storedList). With
 * their positions in the input. A tool_choice naming none of the conversation's tools, none sent,
 * is refused first (checkOfferedToolChoice). A retry of the request an `abort` notice refused is refused again
 * (./aborted-retry.ts); an item sent with the id of one the conversation holds is the create's
 * 400 (./held-ids.ts), and they are checked against the calls the conversation leaves open (an
 * output answering none is the 400 a create's claim answers), as a create refuses them; then a
 * turn running, its lease held (under previous_response_id, that response's own), is the 409 the claim answers.
 */
async function storedInput(
  facade: Facade,
  sessionId: string,
  prepared: PreparedRequest,
  /** Under an older previous_response_id, what pastResponse found resent and taken (`branch`: in a loop's branch). */
  after: { known?: number; taken?: number | undefined; branch?: true },
  claim: (session: SessionRecord) => void,
): Promise<{ items: Item[]; positions: number[] }> {
  const under = prepared.body.conversation !== undefined && prepared.body.conversation !== null;
  const read = under
    ? await readWithoutDeadTurn(facade, sessionId)
    : await facade.services.sessions.getWithNewestTurn(sessionId);
  checkOfferedToolChoice(prepared, read.session);
  const scope = loopScope(facade, prepared);
  const known = under ? await resentUnderConversation(facade, read, prepared, scope) : (after.known ?? 0);
  // A loop's branch stores its input's items as sent (./create-response.ts).
  const list = after.branch ? 'items' : await storedList(facade, sessionId, prepared, known);
  const sent = prepared[list].slice(known);
  const taken = (under ? await takenUnderConversation(facade, read, sent) : after.taken) ?? 0;
  const items = sent.slice(taken);
  const positions = prepared.positions[list].slice(known).slice(taken);
  // A retry of a step whose dead turn, its lease still running, answered its calls: the create's 409.
  // (Under previous_response_id, a newest turn still running is the one the next turn would follow.)
  const running = under ? ('running' in read ? read.running : undefined) : runningIn(facade, sessionId, read);
  if (running && sent.some((item) => answeredBy(read.newestTurn, item))) throw running;
  const refused = under && refusedNewest(read.newestTurn);
  const retried = refused ? await refusedRetry(facade, sessionId, undefined, items, read.session) : undefined;
  if (retried) throw retried;
  // An item sent with the id of one the conversation holds: the create's 400, before its claim's checks.
  checkHeldIds(prepared, positions, heldIn(read.scope, read.session.counts.items));
  claim(read.session);
  try {
    if (read.openCalls) checkCalls(items, read.openCalls);
  } catch (error) {
    throw namedInRequest(error, positions);
  }
  // While a turn runs, its lease held (a dead one's too), a create's claim answers 409 once the
  // input's calls passed (a bad input is a 400 whatever runs): so does the count.
  if (running) throw running;
  return { items, positions };
}

/**
 * Where a count naming a previous_response_id its conversation went on after goes, as a create
 * would go on (./create-response.ts continuation): after the newest turn when the input resent
 * every item since that response (./resent-after.ts resentAfter, its loop's tag the create's), or
 * after the failed attempts of the step it retries (their items taken); otherwise where the
 * create branches (./count-branch.ts countedBranch), judged on the conversation as the create reads
 * it, a dead newest turn closed or taken out first. A retry of a request an `abort` notice refused is
 * refused again, and so is one while the turn right after that response runs (409
 * turn_in_progress, as the create's claim answers it), a tool_choice naming none of the
 * conversation's tools refused before either.
 */
async function pastResponse(
  facade: Facade,
  prepared: PreparedRequest,
  error: unknown,
  claim: (session: SessionRecord) => void,
): Promise<{
  sessionId: string | ForkSketch;
  after: { known?: number; taken?: number | undefined; branch?: true };
}> {
  const id = prepared.body.previous_response_id!;
  const ref = parseResponseId(id);
  // A dead turn right after that response, its lease held (continuedSession's 409): a create
  // refuses a tool_choice naming none of the conversation's tools first.
  if (error instanceof TurnInProgressError && ref) {
    const session = await facade.services.sessions.get(ref.sessionId);
    checkOfferedToolChoice(prepared, session);
    claim(session);
  }
  if (!(error instanceof OpenAIApiError && error.code === 'conversation_branching_unsupported') || !ref) throw error;
  // Read as the create reads it (./dead-turn.ts): a dead newest turn whose lease ran out is closed
  // or taken out first, so a retry after it is judged on the failed attempt it left, as the create's.
  const read = await readWithoutDeadTurn(facade, ref.sessionId);
  checkOfferedToolChoice(prepared, read.session);
  // Then its claim's checks, as the create's claim in that conversation makes them before it branches.
  claim(read.session);
  // A turn running right after that response, its lease held: the 409 a create's claim answers.
  const running = read.newestTurn?.turn === ref.turn + 1 ? read.running : undefined;
  if (running) throw running;
  // That response the newest once a dead turn after it went: the create goes on after it.
  if (read.session.counts.turns <= ref.turn) return { sessionId: ref.sessionId, after: {} };
  const first = prepared.history.slice(0, 1).map((item) => canonical(item));
  const tag = loopTag(id, JSON.stringify([loopScope(facade, prepared), first]));
  const resent = await resentAfter(facade, ref.sessionId, ref.turn, prepared, tag);
  const onward = await continuation(facade, ref.sessionId, resent ?? ref.turn, prepared, false);
  if (onward) return { sessionId: ref.sessionId, after: { known: onward.known, taken: onward.taken } };
  return countedBranch(facade, prepared, { ...ref, scope: read.scope }, tag, resent !== undefined);
}

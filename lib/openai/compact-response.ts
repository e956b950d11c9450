import type { ResponseCompactionItem } from 'openai/resources/responses/responses';
import { SummaryTimeoutError } from '../compaction/summarize-context.ts';
import { turnUsage, type TurnUsage } from '../ledger/usage.ts';
import type { ModelUsage } from '../models/model.ts';
import { compactSessionFrom } from '../turn/compact-session.ts';
import { compactedResponse, compactionItem, compactItems } from './compaction.ts';
import { OpenAIApiError } from './errors.ts';
import { modelOf, type Facade } from './facade.ts';
import { compactionId, randomId } from './ids.ts';
import { indexCompaction } from './compaction-index.ts';
import { holderOf } from '../session/log/rewind.ts';
import { logUnlessGone } from '../log-unless-gone.ts';
import { inputToItems, type InputItemBody } from './request-input.ts';
import { resolveItemReferences } from './item-references.ts';
import type { ResponseCompactBody } from './schemas.ts';
import { continuedSession } from './sessions.ts';

/** A compact's body, its item references resolved. */
type CompactBody = Omit<ResponseCompactBody, 'input'> & { input?: string | InputItemBody[] | null | undefined };

/**
 * POST /v1/responses/compact (`client.responses.compact`): with `previous_response_id`, the
 * conversation's session is compacted as POST /v1/sessions/:id/compact does (everything
 * summarized, `input` appended first), and the session's context starts at the summary from
 * then on; with only `input`, the input is summarized and nothing is stored. The output is one
 * compaction item whose `encrypted_content` is the summary as plain text.
 */
export async function compactResponse(facade: Facade, sent: ResponseCompactBody) {
  // An `item_reference` stands for the stored item it names, as in a create (./item-references.ts).
  const body = { ...sent, input: sent.input && (await resolveItemReferences(facade, sent.input)).input };
  const model = body.model ? modelOf(facade, body.model) : undefined;
  const { output, usage } = body.previous_response_id
    ? await compactStored(facade, body, body.previous_response_id, model)
    : await compactInline(facade, body, model);
  return compactedResponse(randomId('resp'), facade.services.clock(), output, usage);
}

/** A compaction's item (none: nothing to summarize) and what its summary used. */
interface Compaction {
  output: ResponseCompactionItem[];
  usage: TurnUsage | null;
}

async function compactStored(
  facade: Facade,
  body: CompactBody,
  previousResponseId: string,
  model: string | undefined,
): Promise<Compaction> {
  const { services } = facade;
  const sessionId = await continuedSession(facade, previousResponseId);
  const { items, positions } = body.input ? inputToItems(body.input) : { items: [], positions: { items: [] } };
  facade.checkItems(items, 'input', positions.items);
  // The input is appended once the budgets allowed the compaction (a 402 stores nothing).
  const request = { keep_tokens: 0, ...(model ? { model } : {}) };
  const { answer: result, madeOf, generation } = await compactSessionFrom(services, sessionId, request, items);
  if (!result.context) return { output: [], usage: result.usage };
  const context = { ...result.context, ...(generation ? { generation } : {}) };
  return { output: [await indexedCompaction(facade, sessionId, context, madeOf)], usage: result.usage };
}

/**
 * The compaction item of a compaction of `sessionId` (responses.compact, or the native POST
 * /v1/sessions/:id/compact), once the conversation as the compaction found it (`madeOf`) is
 * indexed under it, for a client that goes on from the compaction item alone, or from it and
 * the items the compaction kept (indexCompaction): a turn taken since is none it has seen, and
 * such a resend starts a new one.
 */
export async function indexedCompaction(
  facade: Facade,
  sessionId: string,
  context: { start_seq: number; summary: string; generation?: string },
  madeOf: Awaited<ReturnType<typeof compactSessionFrom>>['madeOf'],
): Promise<ResponseCompactionItem> {
  const item = compactionItem(compactionId(sessionId, context), context.summary);
  if (!madeOf || madeOf.turns === 0) return item;
  // The compaction landed (and was charged): a failure to index it is logged (a session deleted
  // meanwhile has nothing to index), and the client's next step from the item alone starts a new
  // conversation, as after any failed index write.
  const session = await facade.services.sessions.get(sessionId).catch((error: unknown) => {
    logUnlessGone(facade.services.log, 'tailgate: could not index a compaction', error);
  });
  // The generation that wrote its newest item (an ancestor's, after a delete of the newest turn).
  const state = { generation: holderOf(madeOf.scope, madeOf.items), turn: madeOf.turns, items: madeOf.items };
  if (session) await indexCompaction(facade, session, state, { id: item.id, summary: item.encrypted_content });
  return item;
}

async function compactInline(facade: Facade, body: CompactBody, model: string | undefined): Promise<Compaction> {
  const { services, config } = facade;
  facade.authorize(null);
  if (!body.input)
    throw new OpenAIApiError(400, 'invalid_request', 'input: give input or previous_response_id to compact', 'input');
  // It calls a model: a token whose budget is spent is refused, as for a response.
  await services.tokenSpend?.checkNow();
  const { items, positions } = inputToItems(body.input);
  facade.checkItems(items, 'input', positions.items);
  const modelId = model ?? config.defaultModel;
  const summaryModel = services.model(model ?? config.summaryModel ?? modelId);
  // Charged to the token as a stateless response is, before the answer, but as no turn; a summary
  // call that timed out, estimated (its provider bills what it worked on).
  const charge = async (used: ModelUsage) => {
    const usage = turnUsage(used, config.modelPrices[summaryModel.id]);
    services.observeCompaction?.({ model: summaryModel.id, usage });
    await services.tokenSpend?.chargeNow(services, usage, 0);
    return usage;
  };
  const made = await compactItems({
    items,
    modelId,
    summaryModel,
    env: services.env,
    ...(config.summaryPrompt ? { summaryPrompt: config.summaryPrompt } : {}),
    ...(services.tokenEncoders ? { tokenEncoders: services.tokenEncoders } : {}),
  }).catch(async (error: unknown) => {
    if (error instanceof SummaryTimeoutError) await charge(error.spent);
    throw error;
  });
  if (made === null) return { output: [], usage: null };
  return { output: [compactionItem(randomId('cmp'), made.summary)], usage: await charge(made.usage) };
}

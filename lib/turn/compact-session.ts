import { NotFoundError } from '../errors.ts';
import { budgetRefusal } from '../ledger/budget.ts';
import { turnUsage, type TurnUsage } from '../ledger/usage.ts';
import type { ContextStart } from '../session/records.ts';
import type { Compacted } from '../session/log/compaction.ts';
import type { SessionLog, SessionRecord } from '../session/session-log.ts';
import { resolveStrategyConfig } from '../strategies/strategy-config.ts';
import { resolveTokenBudget } from '../tokens/model-limits.ts';
import { planCompaction } from '../compaction/plan-compaction.ts';
import { compactionSizes, keptBound, summaryCallWindow } from '../compaction/summary-budget.ts';
import { SummaryTimeoutError, summarizeContext } from '../compaction/summarize-context.ts';
import { ChargedFailure } from '../session/log/compaction.ts';
import type { Item, PromptItem } from '../items.ts';
import { countPromptTokens } from '../tokens/token-counter.ts';
import { afterResponse } from './after-response.ts';
import { appendItems } from './append.ts';
import { pickUp } from './pickup.ts';
import { writeWithoutDead } from './dead-turn.ts';
import type { TurnServices } from './types.ts';

/** The body of POST /v1/sessions/:id/compact, validated. */
export interface CompactRequest {
  /** The model that writes the summary (default SUMMARY_MODEL, else the session's model). */
  model?: string | undefined;
  /** The summary model's instructions (default SUMMARY_PROMPT, else DEFAULT_SUMMARY_PROMPT). */
  prompt?: string | undefined;
  /** Tokens of the newest items kept whole (default compact_keep_ratio of the budget); 0 summarizes everything. */
  keep_tokens?: number | undefined;
}

/**
 * What a compaction works with: a turn's services (an append of its input, the pickup of the
 * inputs queued behind it, the summary's model, prices and MODEL_TIMEOUT_MS, the token's spend
 * when it carries a budget, checked: see compactSession) and the session log's compaction.
 */
export type CompactServices = TurnServices &
  Parameters<typeof appendItems>[0] & { sessions: Pick<SessionLog, 'compact' | 'refreshIndex'> };

/** The answer of POST /compact. */
export interface CompactResult {
  session_id: string;
  compacted: boolean;
  /** The current context start after the call (null: never compacted). */
  context: {
    start_seq: number;
    summarized: { first_seq: number; last_seq: number };
    interrupted: string[];
    model: string;
    created_at: string;
    summary: string;
  } | null;
  /** What the summary's model call used (null: nothing was summarized), charged to the session and the token. */
  usage: TurnUsage | null;
}

/**
 * A manual compaction: summarizes the current context but its newest `keep_tokens` (pairs
 * never split) and moves the context start, whatever the trigger. Nothing to summarize:
 * `compacted: false`. An open turn: turn_in_progress (409). Durable and idempotent as the
 * in-turn compaction (SessionLog.compact). The summary's usage counts in the session's totals
 * (and a budgeted token's spend) as a turn's does, but as no turn, and the session's listing row
 * is written again after the response, as after a turn. `input` is appended first (POST
 * /v1/responses/compact), once the budgets allowed the compaction: a 402 stores nothing; the
 * listing row is written once for both.
 *
 * @example await compactSession(services, 's1', { keep_tokens: 0 })
 * // { compacted: true, context: { start_seq: 5, ... } }
 */
export async function compactSession(
  services: CompactServices,
  sessionId: string,
  request: CompactRequest = {},
  input: Item[] = [],
): Promise<CompactResult> {
  return (await compactSessionFrom(services, sessionId, request, input)).answer;
}

/**
 * compactSession's answer, and the session as the compaction found it (Compacted's `made_of`):
 * what a compaction item's conversation holds, whatever the session took since.
 */
export async function compactSessionFrom(
  services: CompactServices,
  sessionId: string,
  request: CompactRequest = {},
  input: Item[] = [],
): Promise<{ answer: CompactResult; madeOf: Compacted['made_of']; generation?: string }> {
  const spend = services.tokenSpend;
  const spent = spend?.read();
  spent?.catch(() => undefined);
  const session: SessionRecord = await services.sessions.get(sessionId);
  // A compaction calls a model: a spent budget, the session's or the token's, refuses it (402)
  // as it refuses a turn.
  const refused = budgetRefusal(session.budget, session.usage);
  if (refused) throw refused;
  if (spend && spent) spend.check(await spent);
  // The deployment's summary model, where the request names none: the refusal names its setting.
  const { summaryModel } = services.config;
  if (request.model === undefined && summaryModel)
    spend?.checkPriced(summaryModel, services.config.modelPrices, 'SUMMARY_MODEL');
  const model = services.model(
    request.model ?? services.config.summaryModel ?? session.model ?? services.config.defaultModel,
  );
  const turnModel = session.model ?? services.config.defaultModel;
  const config = resolveStrategyConfig({ env: services.env, session: session.strategy_config });
  const budget = resolveTokenBudget(
    turnModel,
    config,
    services.tokenEncoders ? { encoders: services.tokenEncoders } : {},
  );
  const sizes = compactionSizes(budget, config);
  // What every prompt carries besides its items: the session's tools and instructions.
  const instructions: PromptItem[] = session.instructions
    ? [{ type: 'message', role: 'system', content: session.instructions }]
    : [];
  const beside = countPromptTokens(instructions, session.tools, budget.counter);
  const prompt = request.prompt ?? services.config.summaryPrompt;
  let result: Compacted | undefined;
  let claimed = false;
  // Its session deleted while it summarized: nothing is left to take up after it.
  let deleted = false;
  // What a summary call that timed out spent, estimated: charged as a summary made would be.
  let unmade: TurnUsage | undefined;
  const price = services.config.modelPrices[model.id];
  // Charged to the token as no turn, landed before the error answer, as a summary made is before its answer.
  const charges: Promise<unknown>[] = [];
  const chargeUnmade = (charge: TurnUsage) => {
    services.observeCompaction?.({ model: model.id, usage: charge });
    if (spend) charges.push(spend.chargeNow(services, charge, 0));
  };
  try {
    // The listing row is written once, below, for the input and the compaction together.
    if (input.length > 0) await appendItems(services, sessionId, input, { refreshIndex: false });
    // Its claim takes the dead turn of a turn answered at its end out first (./dead-turn.ts).
    const summarize: Parameters<SessionLog['compact']>[1] = async ({ items, context, carriedFromSeq }, claim) => {
      const cut = planCompaction(items, {
        keepTokens: request.keep_tokens ?? sizes.keepTokens,
        counter: budget.counter,
        // Kept no larger than a turn's compaction keeps (lib/turn/turn-prompt.ts), so the next prompt fits.
        ...keptBound(budget, sizes.maxSummaryTokens, beside),
        ...(carriedFromSeq !== null ? { earliestStartSeq: carriedFromSeq } : {}),
      });
      if (!cut) return null;
      // The session is held from here to the compaction's record: no turn or other compaction meanwhile.
      const { signal: lost, scope } = await claim();
      claimed = true;
      // A delete of the session stops the summary call: at once when it ended in this process,
      // else once the claim's renewal finds it (`lost`); so does a move to another incarnation.
      const stop = new AbortController();
      const stopWith = () => stop.abort(lost.reason);
      if (lost.aborted) stopWith();
      else lost.addEventListener('abort', stopWith, { once: true });
      const unregister = services.running?.addCompaction(scope, stop);
      let stopped: TurnUsage | undefined;
      // Bounded as a turn's model call is (MODEL_TIMEOUT_MS): a call that never answers fails
      // the compaction with model_timeout, which then releases the session.
      const summary = await summarizeContext(model, context, cut, {
        maxSummaryTokens: sizes.maxSummaryTokens,
        window: budget,
        ...summaryCallWindow(turnModel, model.id, services.tokenEncoders),
        timeoutMs: services.config.modelTimeoutMs,
        signal: stop.signal,
        // Stopped: charged only when its provider may have run it (lib/models/provider-reach.ts).
        onAborted: (spent) => {
          stopped = turnUsage(spent, price);
        },
        ...(prompt ? { prompt } : {}),
      })
        .catch((error: unknown) => {
          const { aborted, reason } = stop.signal;
          if (aborted) {
            deleted = reason instanceof NotFoundError;
            if (!stopped) throw reason;
            chargeUnmade(stopped);
            throw new ChargedFailure(reason, stopped);
          }
          if (!(error instanceof SummaryTimeoutError)) throw error;
          unmade = turnUsage(error.spent, price);
          throw new ChargedFailure(error, unmade);
        })
        .finally(() => {
          unregister?.();
          lost.removeEventListener('abort', stopWith);
        });
      return { context: summary.context, usage: turnUsage(summary.usage, price) };
    };
    result = await writeWithoutDead(services, sessionId, (lapsed) =>
      services.sessions.compact(sessionId, summarize, lapsed),
    );
  } finally {
    if (unmade) chargeUnmade(unmade);
    await Promise.all(charges);
    // The listing row takes the input's items and the compaction's usage and time, after the
    // response; an input appended before a compaction that failed still counts in it.
    if (input.length > 0 || result?.compacted)
      afterResponse(services, async () => services.sessions.refreshIndex(sessionId));
    // The compaction held the session: the inputs queued behind it are taken up once it let it go,
    // as after a turn's close (a claim it could not end leaves them to its lease and the sweep).
    if (claimed && !deleted) afterResponse(services, () => pickUp(services, sessionId));
  }
  // The session's totals took the usage with the compaction's record; the token's take it before
  // the answer, as a turn's do.
  const { usage } = result;
  if (usage) services.observeCompaction?.({ model: model.id, usage });
  if (usage) await spend?.chargeNow(services, usage, 0);
  const answer: CompactResult = {
    session_id: sessionId,
    compacted: result.compacted,
    context: result.context ? contextView(result.context) : null,
    usage: result.usage ?? null,
  };
  // The generation that wrote the compaction, when its id names it (ContextStart.generation).
  const generation = result.context?.generation;
  return { answer, madeOf: result.made_of, ...(generation ? { generation } : {}) };
}

function contextView(context: ContextStart): NonNullable<CompactResult['context']> {
  return {
    start_seq: context.start_seq,
    summarized: context.summarized,
    interrupted: context.interrupted,
    model: context.model,
    created_at: context.created_at,
    summary: context.summary,
  };
}

import { compactionSizes, fitPrompt, planCompaction, summarizeContext, usesSafetyNet } from '../compaction/index.ts';
import type { DeliveredNotice } from '../inbox/index.ts';
import type { PromptItem } from '../items.ts';
import type { ModelRequest } from '../models/model.ts';
import type { OpenTurn } from '../session/log/types.ts';
import type { OverflowBoundary } from '../session/records.ts';
import type { HistoryAggregates } from '../strategies/aggregates.ts';
import { countPromptTokens } from '../tokens/token-counter.ts';
import type { resolveTokenBudget } from '../tokens/model-limits.ts';
import type { TurnNotices } from './notices.ts';
import type { TurnPlan } from './plan.ts';
import { assemblePrompt, compactionContext, promptContext } from './assemble-prompt.ts';
import { buildModelRequest, turnCallOptions } from './model-call.ts';
import { buildReceipt, receiptParts, type ReceiptParts, type TurnReceipt } from './receipt.ts';
import type { TurnContext, TurnRequest, TurnServices } from './types.ts';

/**
 * The prompt step of a turn: the strategies over the history, the session instructions first,
 * out-of-line payloads fetched; with `compact` in the list, a compaction when the prompt is
 * over its trigger (or the request's `compaction` threshold); then, for a model with a known
 * window, the prompt is fitted (lib/compaction/fit-prompt.ts: `truncation: "auto"`, or without
 * `compact` the overflow safety net, whose moved boundary the completion stores) and one that
 * still does not fit is refused (context_too_large) instead of sent. Under the safety net the
 * history was read from the stored boundary on (`promptStart`).
 */

export interface PromptInputs {
  turn: OpenTurn;
  plan: TurnPlan;
  budget: ReturnType<typeof resolveTokenBudget>;
  request: TurnRequest;
  /** The history read for the turn; a compaction here cuts it (and drops the aggregates). */
  history: PromptItem[];
  aggregates: HistoryAggregates | undefined;
  notices: TurnNotices;
  /** Set by the compaction this turn did, so a second build does not compact again. */
  compaction?: TurnContext['compaction'];
  /** The overflow boundary the fitted prompt moved: the turn's close stores it (lib/turn/close-turn.ts). */
  moved?: OverflowBoundary;
}

export interface TurnPrompt {
  modelRequest: ModelRequest;
  /** The response's `context`, but for `notices_delivered` (known once the notices moved). */
  context: Omit<TurnContext, 'notices_delivered'>;
  /**
   * Starts the receipt's slow part (the prompt's hashes and seq ranges, lib/turn/receipt.ts
   * `receiptParts`) in slices: called once the model call is under way, it is done while the
   * model answers.
   */
  startReceipt: () => void;
  /** The receipt of what the model saw, given the notices finally delivered. */
  receipt: (delivered: DeliveredNotice[]) => Promise<TurnReceipt>;
}

/**
 * Where the turn's history read starts: the stored overflow boundary when the safety net fits
 * this turn's prompt (null otherwise). What is behind it never reaches the prompt, so the turn
 * reads and builds only the window (lib/session/log/tail-reader.ts `readContext`).
 */
export function promptStart(
  turn: OpenTurn,
  plan: TurnPlan,
  budget: PromptInputs['budget'],
  request: TurnRequest,
): OverflowBoundary | null {
  return usesSafetyNet(budget, { truncation: request.truncation, compacting: isCompacting(plan, request) })
    ? turn.overflow
    : null;
}

function isCompacting(plan: TurnPlan, request: TurnRequest): boolean {
  return plan.strategies.includes('compact') || request.compaction !== undefined;
}

export async function buildTurnPrompt(services: TurnServices, inputs: PromptInputs): Promise<TurnPrompt> {
  const { turn, plan, budget, request, notices } = inputs;
  let built = await build(services, inputs, notices.forPrompt());
  const compacting = isCompacting(plan, request);
  const threshold = request.compaction?.threshold;
  const { sessions } = services;
  if (compacting && !inputs.compaction && (threshold !== undefined || Number.isFinite(budget.promptLimit))) {
    const sizes = compactionSizes(budget, plan.strategyConfig, threshold);
    if (countPromptTokens(built.hydrated, plan.tools, budget.counter) > sizes.trigger) {
      const cut = planCompaction(inputs.history, {
        keepTokens: sizes.keepTokens,
        counter: budget.counter,
        ...(turn.input[0] ? { keepFromSeq: turn.input[0].seq } : {}),
        // Start no older than what the newest records carry, so later turns read the context from them.
        ...(turn.carried[0] ? { earliestStartSeq: turn.carried[0].seq } : {}),
      });
      if (cut) {
        // The summary is stored under the turn's record: the claim must have landed.
        await notices.claimed();
        const summaryModel = services.config.summaryModel ? services.model(services.config.summaryModel) : plan.model;
        const next = await summarizeContext(summaryModel, turn.context, cut, {
          maxSummaryTokens: sizes.maxSummaryTokens,
          ...(services.config.summaryPrompt ? { prompt: services.config.summaryPrompt } : {}),
        });
        const stored = await sessions.commitTurnContext(turn, next);
        inputs.compaction = {
          start_seq: stored.start_seq,
          summarized: stored.summarized,
          interrupted: stored.interrupted,
        };
        inputs.history = inputs.history.filter((item) => item.seq === undefined || item.seq >= stored.start_seq);
        inputs.aggregates = undefined;
        built = await build(services, inputs, notices.forPrompt());
      }
    }
  }
  const fit = fitPrompt(built, plan.tools, budget, {
    truncation: request.truncation,
    compacting,
    boundary: inputs.moved ?? turn.overflow,
    turn: turn.turn,
    keepFromSeq: turn.input[0]?.seq,
  });
  built = fit.built;
  if (fit.moved) inputs.moved = fit.moved;
  const promptTokens = fit.promptTokens;
  const { prepared, cacheBreakpoint, hydrated } = built;
  const context: Omit<TurnContext, 'notices_delivered'> = {
    ...promptContext(prepared, hydrated),
    ...(compacting
      ? compactionContext(
          promptTokens ?? countPromptTokens(hydrated, plan.tools, budget.counter),
          turn.context,
          inputs.compaction,
        )
      : {}),
    ...fit.context,
  };
  const { history } = inputs;
  let parts: Promise<ReceiptParts> | undefined;
  const startReceipt = () => {
    parts ??= receiptParts(history, prepared.items, hydrated, plan.tools);
    parts.catch(() => undefined);
  };
  const receipt = async (delivered: DeliveredNotice[]): Promise<TurnReceipt> => {
    startReceipt();
    const names = delivered.map((notice) => notice.name);
    return buildReceipt(plan, await parts!, hydrated, delivered, { ...context, notices_delivered: names });
  };
  const modelRequest = buildModelRequest(
    // Images and files are read last, for the items the fitted prompt kept.
    await services.sessions.readMedia(turn.scope, hydrated),
    plan.tools,
    cacheBreakpoint,
    turnCallOptions(request),
  );
  return { modelRequest, context, startReceipt, receipt };
}

/** The strategies applied, the instructions first, payloads fetched. */
async function build(services: TurnServices, inputs: PromptInputs, delivered: DeliveredNotice[]) {
  const { turn, plan } = inputs;
  const { prompt, cacheBreakpoint, prepared } = assemblePrompt({
    history: inputs.history,
    contextStart: turn.context,
    strategies: plan.strategies,
    strategyConfig: plan.strategyConfig,
    env: services.env,
    aggregates: inputs.aggregates,
    notices: delivered,
    instructions: turn.session.instructions,
  });
  return { prepared, cacheBreakpoint, hydrated: await services.sessions.hydrate(turn.scope, prompt) };
}

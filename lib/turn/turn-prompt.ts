import {
  compactedContext,
  compactionSizes,
  keptBound,
  fitPrompt,
  planCompaction,
  summarizeContext,
  summaryCallWindow,
  SummaryTimeoutError,
  usesSafetyNet,
  type CompactionPlan,
} from '../compaction/index.ts';
import type { DeliveredNotice } from '../inbox/index.ts';
import { turnUsage, type TurnUsage } from '../ledger/usage.ts';
import type { PromptItem } from '../items.ts';
import { type ModelRequest, type ModelUsage, toolsSent } from '../models/model.ts';
import type { OpenTurn } from '../session/log/types.ts';
import type { ContextStart, OverflowBoundary } from '../session/records.ts';
import type { HistoryAggregates } from '../strategies/aggregates.ts';
import { countPromptTokens } from '../tokens/token-counter.ts';
import { outputRoom, type resolveTokenBudget } from '../tokens/model-limits.ts';
import type { TurnNotices } from './notices.ts';
import type { TurnPlan } from './plan.ts';
import { assemblePrompt, compactionContext, promptContext } from './assemble-prompt.ts';
import { buildModelRequest, turnCallOptions } from './model-call.ts';
import { buildReceipt, receiptParts, sendsMedia, type ReceiptParts, type TurnReceipt } from './receipt.ts';
import type { TurnContext, TurnRequest, TurnServices } from './types.ts';

/**
 * The prompt step of a turn: the strategies over the history, the session instructions first,
 * out-of-line payloads fetched; with `compact` in the list, a compaction when the prompt is
 * over its trigger (or the request's `compaction` threshold); then, for a model with a known
 * window, the prompt is fitted (lib/compaction/fit-prompt.ts: `truncation: "auto"`, or without
 * `compact` the overflow safety net, whose moved boundary the completion stores) and one that
 * still does not fit is refused (context_too_large) instead of sent. Everything up to the
 * model request is `fitTurnPrompt`, which the prompt preview (lib/turn/preview.ts) runs too.
 * Under the safety net the history was read from the stored boundary on (`promptStart`).
 */

/** What a prompt is built for: the claimed turn, or for the preview the turn the session would claim next. */
export type PromptTurn = Pick<
  OpenTurn,
  'scope' | 'session' | 'turn' | 'input' | 'retaken' | 'carried' | 'context' | 'overflow'
>;

/** What the prompt of a turn is built from, up to its model request (a turn's, or the preview's). */
export interface PromptSource {
  turn: PromptTurn;
  plan: TurnPlan;
  budget: ReturnType<typeof resolveTokenBudget>;
  request: Pick<TurnRequest, 'truncation' | 'compaction'>;
  /** The history read for the turn; a compaction here cuts it (and drops the aggregates). */
  history: PromptItem[];
  /** Undefined: `history` holds every item of the context (from its start); else a tail view's. */
  aggregates: HistoryAggregates | undefined;
  /**
   * Every item of the history from `startSeq` on, as the turn after a compaction starting there
   * reads it: a compaction that cut a tail view (`aggregates` set) builds the prompt from it.
   */
  readFrom: (startSeq: number) => Promise<PromptItem[]>;
  /** The notices the `inbox` strategy inserts (`pending`: the preview's, not delivered). */
  notices: { forPrompt(): readonly { content: string; pending?: true }[] };
  /**
   * The context start the compaction this turn did stored (a second build does not compact
   * again): the prompt starts there, and the turn's close commits it (lib/turn/close-turn.ts).
   * `pending`: the preview's, which calls no model and writes nothing.
   */
  compacted?: ContextStart | PendingContextStart;
  /** The overflow boundary the fitted prompt moved: the turn's close stores it (lib/turn/close-turn.ts). */
  moved?: OverflowBoundary;
}

/** The context start the preview's compaction would write (no summary yet). */
type PendingContextStart = Pick<ContextStart, 'start_seq' | 'summary' | 'summarized' | 'interrupted'> & {
  pending: true;
};

export interface PromptInputs extends PromptSource {
  turn: OpenTurn;
  compacted?: ContextStart;
  /** What the summary of the compaction this turn did used (the turn's close adds it to the totals). */
  summaryUsage?: TurnUsage;
  /** The model that wrote that summary. */
  summaryModel?: string;
  request: TurnRequest;
  notices: TurnNotices;
  /** Aborts the summary's model call of the compaction this turn makes (the turn's `stop`). */
  stop?: AbortSignal;
  /** The bytes of the images and files the turn's request brought, by SHA-256: not read back. */
  inputBytes?: (sha256: string) => Uint8Array | undefined;
}

/**
 * Summarizes what a compaction cuts off and stores the new context start (a turn's, which
 * moves `turn.context` there); null: the preview, which calls no model and shows the
 * compaction as pending.
 */
export type Summarize = ((cut: CompactionPlan, maxSummaryTokens: number) => Promise<ContextStart>) | null;

/** The fitted prompt of a turn before its media are read, and the response's `context` but for its notices. */
export interface FittedPrompt {
  built: Built;
  context: Omit<TurnContext, 'notices_delivered'>;
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
  /** The prompt's tokens as the turn counts them for its window (the tools included). */
  promptTokens: () => number;
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
  return safetyNetFits(plan, budget, request) ? turn.overflow : null;
}

/** Whether the overflow safety net fits this prompt (the turn's, or the preview's with `request` empty). */
export function safetyNetFits(
  plan: TurnPlan,
  budget: PromptInputs['budget'],
  request: PromptSource['request'],
): boolean {
  return usesSafetyNet(budget, { truncation: request.truncation, compacting: isCompacting(plan, request) });
}

function isCompacting(plan: TurnPlan, request: PromptSource['request']): boolean {
  return plan.strategies.includes('compact') || request.compaction !== undefined;
}

export async function buildTurnPrompt(services: TurnServices, inputs: PromptInputs): Promise<TurnPrompt> {
  const { turn, plan, request, notices } = inputs;
  const summarize: Summarize = async (cut, maxSummaryTokens) => {
    // The summary is stored under the turn's record: the claim must have landed.
    await notices.claimed();
    const summaryModel = services.config.summaryModel ? services.model(services.config.summaryModel) : plan.model;
    const price = services.config.modelPrices[summaryModel.id];
    const unanswered = (spent: ModelUsage) => {
      inputs.summaryUsage = turnUsage(spent, price);
      inputs.summaryModel = summaryModel.id;
    };
    const summary = await summarizeContext(summaryModel, turn.context, cut, {
      maxSummaryTokens,
      window: inputs.budget,
      ...summaryCallWindow(plan.model.id, summaryModel.id, services.tokenEncoders),
      ...(services.config.summaryPrompt ? { prompt: services.config.summaryPrompt } : {}),
      ...(inputs.stop ? { signal: inputs.stop } : {}),
      // Stopped by someone else's close: the stopped turn charges the estimate (close-turn.ts).
      onAborted: (spent) => unanswered(spent),
    }).catch((error: unknown) => {
      // Timed out: the failed turn charges its estimate as the summary's usage (close-turn.ts).
      if (error instanceof SummaryTimeoutError) unanswered(error.spent);
      throw error;
    });
    inputs.summaryUsage = turnUsage(summary.usage, price);
    inputs.summaryModel = summaryModel.id;
    return services.sessions.commitTurnContext(turn, summary.context);
  };
  const { built, context } = await fitTurnPrompt(services, inputs, summarize);
  const { prepared, cacheBreakpoint, hydrated } = built;
  const { history } = inputs;
  let parts: Promise<ReceiptParts> | undefined;
  const startReceipt = () => {
    // The tools as the provider gets them: with allowed tools, the allowed ones alone on most.
    parts ??= receiptParts(
      history,
      prepared.items,
      hydrated,
      toolsSent(plan.model, plan.tools, request.model_settings),
    );
    parts.catch(() => undefined);
  };
  const receipt = async (delivered: DeliveredNotice[]): Promise<TurnReceipt> => {
    startReceipt();
    const names = delivered.map((notice) => notice.name);
    return buildReceipt(plan, await parts!, hydrated, delivered, { ...context, notices_delivered: names });
  };
  const promptTokens = () => context.prompt_tokens ?? countPromptTokens(hydrated, plan.tools, inputs.budget.counter);
  const modelRequest = buildModelRequest(
    // Images and files are read last, for the items the fitted prompt kept; not those that go as
    // text placeholders only (an assistant's or system message's, `Model.assistantMedia`, a tool
    // result's where the model takes none there, `Model.toolResultMedia`).
    await services.sessions.readMedia(turn.scope, hydrated, sendsMedia(plan.model, hydrated), inputs.inputBytes),
    plan.tools,
    cacheBreakpoint,
    turnCallOptions(request),
    outputRoom(inputs.budget.contextLimit, promptTokens),
  );
  return { modelRequest, context, startReceipt, receipt, promptTokens };
}

/**
 * Everything of a turn's prompt up to its model request, the one way turns and the preview
 * (lib/turn/preview.ts) do it: assembled, compacted when due (`summarize`; without it the
 * prompt the compaction leaves, its summary pending), fitted to the window. Sets the
 * source's `compacted` and `moved`.
 */
export async function fitTurnPrompt(
  services: TurnServices,
  inputs: PromptSource,
  summarize: Summarize,
): Promise<FittedPrompt> {
  const { turn, plan, budget, request } = inputs;
  // The newest turn's input, kept whole: the turn's own, or the failed input a retake takes again.
  const keepFromSeq = inputFromSeq(turn);
  let built = await build(services, inputs, inputs.compacted ?? turn.context);
  const compacting = isCompacting(plan, request);
  const threshold = request.compaction?.threshold;
  if (compacting && !inputs.compacted && (threshold !== undefined || Number.isFinite(budget.promptLimit))) {
    const sizes = compactionSizes(budget, plan.strategyConfig, threshold);
    if (countPromptTokens(built.hydrated, plan.tools, budget.counter) > sizes.trigger) {
      const cut = planCompaction(inputs.history, {
        keepTokens: sizes.keepTokens,
        counter: budget.counter,
        ...(keepFromSeq !== undefined ? { keepFromSeq } : {}),
        // A kept side over the window would leave every later prompt too large: the tools, the
        // instructions and notices (the prompt's items without a seq, the summary aside) go in it too.
        ...keptBound(
          budget,
          sizes.maxSummaryTokens,
          countPromptTokens(
            built.hydrated.filter((item) => item.seq === undefined && item.synthetic !== 'summary'),
            plan.tools,
            budget.counter,
          ),
        ),
        // Start no older than what the newest records carry, so later turns read the context from them.
        ...(turn.carried[0] ? { earliestStartSeq: turn.carried[0].seq } : {}),
      });
      if (cut) {
        const next = summarize
          ? await summarize(cut, sizes.maxSummaryTokens)
          : { ...compactedContext(turn.context, cut, ''), pending: true as const };
        inputs.compacted = next;
        // A tail view lacks older tool items of the context it keeps, which the strategies then
        // count as the next turn does (without aggregates: every item from its start).
        inputs.history = inputs.aggregates
          ? await inputs.readFrom(next.start_seq)
          : inputs.history.filter((item) => item.seq === undefined || item.seq >= next.start_seq);
        inputs.aggregates = undefined;
        built = await build(services, inputs, next);
      }
    }
  }
  const fit = fitPrompt(built, plan.tools, budget, {
    truncation: request.truncation,
    compacting,
    boundary: inputs.moved ?? turn.overflow,
    turn: turn.turn,
    keepFromSeq,
  });
  built = fit.built;
  if (fit.moved) inputs.moved = fit.moved;
  const { prepared, hydrated } = built;
  const context: Omit<TurnContext, 'notices_delivered'> = {
    ...promptContext(prepared, hydrated),
    ...(compacting
      ? compactionContext(
          fit.promptTokens ?? countPromptTokens(hydrated, plan.tools, budget.counter),
          inputs.compacted ?? turn.context,
          inputs.compacted && {
            start_seq: inputs.compacted.start_seq,
            summarized: inputs.compacted.summarized,
            interrupted: inputs.compacted.interrupted,
            ...('pending' in inputs.compacted ? { pending: true as const } : {}),
          },
        )
      : // The prompt still reads from a stored context start (a compaction on demand): named as the preview names it.
        turn.context
        ? { context_start_seq: turn.context.start_seq }
        : {}),
    ...fit.context,
  };
  return { built, context };
}

type Built = Awaited<ReturnType<typeof build>>;

/** The context start a prompt begins with: its summary first (`pending`: one the preview's compaction would write). */
type PromptContextStart = Pick<ContextStart, 'start_seq' | 'summary'> & { pending?: true };

/**
 * The strategies applied, the instructions first, payloads fetched. A pending summary (the
 * preview's) is marked `pending`.
 */
async function build(services: TurnServices, inputs: PromptSource, contextStart: PromptContextStart | null) {
  const { turn, plan } = inputs;
  const { prompt, cacheBreakpoint, prepared } = assemblePrompt({
    history: inputs.history,
    contextStart,
    strategies: plan.strategies,
    strategyConfig: plan.strategyConfig,
    env: services.env,
    aggregates: inputs.aggregates,
    notices: inputs.notices.forPrompt(),
    instructions: turn.session.instructions,
    inputFromSeq: inputFromSeq(turn),
  });
  return { prepared, cacheBreakpoint, hydrated: await services.sessions.hydrate(turn.scope, prompt) };
}

const inputFromSeq = (turn: PromptTurn) => turn.input[0]?.seq ?? turn.retaken;

import {
  FALLBACK_CONTEXT_LIMIT,
  FALLBACK_RESPONSE_RESERVE,
  modelFamily,
  resolveTokenBudget,
  type TokenBudget,
} from '../tokens/model-limits.ts';
import { countItemTokens, type TokenEncoders } from '../tokens/token-counter.ts';
import { summaryMessage } from './summary-transcript.ts';

/** The share of the prompt limit a summary may take. */
export const SUMMARY_SHARE = 0.15;

/**
 * The token sizes a compaction works with, from the turn's budget and the resolved ratios:
 * the trigger, what the newest kept items may take, and the summary's cap. A model without
 * a window (echo) is treated as the fallback window for manual compaction. With `threshold`
 * (tokens, a request's own trigger) the sizes are shares of it and a prompt of `threshold`
 * tokens or more triggers, whatever the model's window.
 */
export function compactionSizes(
  budget: TokenBudget,
  config: { compact_trigger_ratio: number; compact_keep_ratio: number },
  threshold?: number,
): { trigger: number; keepTokens: number; maxSummaryTokens: number } {
  const limit =
    threshold ??
    (Number.isFinite(budget.promptLimit) ? budget.promptLimit : FALLBACK_CONTEXT_LIMIT - FALLBACK_RESPONSE_RESERVE);
  return {
    trigger: threshold !== undefined ? threshold - 1 : Math.floor(limit * config.compact_trigger_ratio),
    keepTokens: Math.floor(limit * config.compact_keep_ratio),
    maxSummaryTokens: Math.max(32, Math.floor(limit * SUMMARY_SHARE)),
  };
}

/**
 * The most tokens a compaction's kept side may take (planCompaction `maxKeptTokens`): the prompt
 * limit less the summary's message at its cap (the cap, its header and overhead: `summaryMessage`)
 * and `beside`, what every prompt carries besides its items (the tools, the instructions). None
 * without a window.
 */
export function keptBound(budget: TokenBudget, maxSummaryTokens: number, beside: number): { maxKeptTokens?: number } {
  if (!Number.isFinite(budget.promptLimit)) return {};
  const summary = maxSummaryTokens + countItemTokens(summaryMessage(''), budget.counter);
  return { maxKeptTokens: budget.promptLimit - summary - beside };
}

/**
 * The window a summary call by `summaryModel` shares with its answer, where it is not the
 * prompt's (`SummarizeOptions.callWindow`): a model of another known family than the prompt's
 * model (a Claude summary of a gpt-4.1 conversation) has its family's window and counter. None
 * for a model of the prompt's family (the prompt's budget holds, its `context_limit` included)
 * or of no known family.
 */
export function summaryCallWindow(
  promptModel: string,
  summaryModel: string,
  encoders?: TokenEncoders,
): { callWindow?: Pick<TokenBudget, 'contextLimit' | 'counter'> } {
  const family = modelFamily(summaryModel);
  if (!family || family === modelFamily(promptModel)) return {};
  const own = resolveTokenBudget(summaryModel, { context_limit: 0, response_reserve: 0 }, encoders ? { encoders } : {});
  return { callWindow: { contextLimit: own.contextLimit, counter: own.counter } };
}

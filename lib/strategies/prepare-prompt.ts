import type { PromptItem } from '../items.ts';
import { isContextNotice } from './context-notice.ts';
import { indexHistory } from './history-index.ts';
import { builtInRegistry } from './registry.ts';
import type { Strategy, StrategyContext, StrategyRegistry } from './strategy.ts';
import { splitStrategyNames } from '../history.ts';
import { defaultStrategyConfig, defaultStrategyNames } from './strategy-config.ts';

/**
 * A strategy list: a custom function, undefined (the configured default: env
 * PROMPT_STRATEGY, else `shorten_tools_epoch_increment,shorten_images,inbox`), a comma-separated string
 * (names trimmed, empty entries ignored) or an array of names.
 */
export type StrategySpec = string | readonly string[] | ((items: PromptItem[]) => PromptItem[]) | undefined;

/** The API's `context` counts: tool calls by what happened to their output. */
export interface PromptStats {
  tool_calls_total: number;
  kept_full: number;
  compacted: number;
  dropped: number;
}

export interface PreparedPrompt {
  items: PromptItem[];
  /** The resolved strategy names (`custom` for a function). */
  strategies: string[];
  stats: PromptStats;
  /**
   * items[0..n) are the cache-stable prefix: up to and including the context notice (which
   * an epoch strategy places right after its compacted region). 0 without a notice. An
   * Anthropic cache_control breakpoint belongs on item n - 1.
   */
  stablePrefixLength: number;
}

/** The name reported for a function given as the strategy list. */
export const CUSTOM_STRATEGY_NAME = 'custom';

/**
 * Resolves a strategy list to strategies, in order. Throws UnknownStrategyError (listing
 * the known names) for a name the registry does not have, before anything is applied.
 */
export function resolveStrategies(
  spec: Exclude<StrategySpec, (items: PromptItem[]) => PromptItem[]>,
  registry: StrategyRegistry = builtInRegistry,
  env: Record<string, string | undefined> = {},
): Strategy[] {
  const names = spec === undefined ? defaultStrategyNames(env) : splitStrategyNames(spec);
  return names.map((name) => registry.get(name));
}

/**
 * Builds the prompt a model will see from the history, without changing the history.
 *
 * Steps: index the history (positions of tool calls, repeats; from `context.aggregates`
 * when `items` is only a tail view, see `selectTail`), drop the function_call_output items
 * that answer no function_call before them (but in a compacted context,
 * `context.compactedContext`, not those answering a call before its start:
 * lib/strategies/history-index.ts), then apply the strategies in order, each to the previous
 * output. A call without an output stays where it stands, as any call: the provider
 * is sent a placeholder result for it (lib/models/convert-to-model-messages.ts), in this
 * prompt and every later one, so that its output, once it comes, changes nothing before it.
 * The input is never mutated; items kept whole are the input's own objects.
 *
 * `stats` counts tool calls by what happened to their output: `tool_calls_total` is every
 * function_call of the history (from the aggregates for a tail view), `kept_full` and
 * `compacted` count the outputs in the prompt and the calls in it without one (as the call
 * went), `dropped` the rest (an output without a call counts nowhere, one a compacted context
 * keeps, `context.compactedContext`, included).
 *
 * Example: `preparePrompt(history, 'shorten_tools_epoch_increment,inbox', { config, inbox })`.
 */
export function preparePrompt(
  items: readonly PromptItem[],
  strategies: StrategySpec,
  context: StrategyContext = {},
): PreparedPrompt {
  const config = context.config ?? defaultStrategyConfig();
  let names: string[];
  let apply: (current: PromptItem[], strategyContext: StrategyContext) => PromptItem[];
  if (typeof strategies === 'function') {
    names = [CUSTOM_STRATEGY_NAME];
    apply = (current) => strategies(current);
  } else {
    const resolved = resolveStrategies(strategies, context.registry ?? builtInRegistry, context.env);
    names = resolved.map((strategy) => strategy.name);
    apply = (current, strategyContext) => {
      let result = current;
      for (const strategy of resolved) result = strategy.apply(result, config, strategyContext);
      return result;
    };
  }
  const { history, items: paired } = indexHistory(items, context.aggregates, context.compactedContext);
  const output = apply(paired, { ...context, config, history });

  let keptFull = 0;
  let compacted = 0;
  let stablePrefixLength = 0;
  // The calls not answered yet, by call_id, each with whether it went compacted; one a later
  // call of its call_id supersedes before it is answered counts on its own.
  const open = new Map<string, boolean>();
  const count = (wasCompacted: boolean | undefined) => {
    if (wasCompacted) compacted += 1;
    else keptFull += 1;
  };
  for (let index = 0; index < output.length; index += 1) {
    const item = output[index]!;
    if (item.type === 'function_call_output') {
      // An output kept without its call (a compacted context's, answering a call before its start).
      if (history.isLateOutput(item)) continue;
      open.delete(item.call_id);
      count(item.compacted);
    } else if (item.type === 'function_call') {
      if (open.has(item.call_id)) count(open.get(item.call_id));
      open.set(item.call_id, item.compacted === true);
    } else if (isContextNotice(item)) {
      stablePrefixLength = index + 1;
    }
  }
  // A call sent without an output (its placeholder result) counts as the call went.
  for (const wasCompacted of open.values()) count(wasCompacted);
  const total = history.toolCalls;
  return {
    items: output,
    strategies: names,
    stats: {
      tool_calls_total: total,
      kept_full: keptFull,
      compacted,
      dropped: Math.max(0, total - keptFull - compacted),
    },
    stablePrefixLength,
  };
}

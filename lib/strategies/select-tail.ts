import type { PromptItem } from '../items.ts';
import type { HistoryAggregates } from './aggregates.ts';
import type { StrategySpec } from './prepare-prompt.ts';
import { resolveStrategies } from './prepare-prompt.ts';
import { builtInRegistry } from './registry.ts';
import { sortedUnion } from '../sorted.ts';
import type { StrategyRegistry, TailRequirement } from './strategy.ts';
import type { StrategyConfig } from './strategy-config.ts';

/**
 * How much of a long history a strategy list needs, from the stored aggregates alone.
 * Strategies that only keep tool items as they are (`none`, `inbox`) need what the others
 * need; a list of only those, a function, shorten_tools (its character budget reaches
 * arbitrarily far back) and a custom strategy without `tailRequirement` need the whole
 * history. Otherwise the largest `toolCalls` (at least what `tailCalls` asks) and the union of
 * `seqs`.
 *
 * Example: defaults, 200 calls, no repeats -> `{ toolCalls: 150, seqs: [] }`.
 */
export function tailRequirement(
  strategies: StrategySpec,
  config: StrategyConfig,
  aggregates: HistoryAggregates,
  options: { registry?: StrategyRegistry; env?: Record<string, string | undefined> } = {},
): TailRequirement {
  if (typeof strategies === 'function') return { toolCalls: 'all', seqs: [] };
  const resolved = resolveStrategies(strategies, options.registry ?? builtInRegistry, options.env);
  let toolCalls: number | 'all' | undefined;
  let wholeCalls: number | undefined = 0;
  let seqs: number[] = [];
  // Strategies with `tailCalls` (shorten_images): the newest calls they count in, and whether
  // one comes before a strategy that shortens tool items (then the view keeps its tail whole:
  // an item it had stored compacted would reach them otherwise than it does in the history).
  let counted = 0;
  let countingBefore = false;
  for (const strategy of resolved) {
    if (strategy.tailCalls) {
      counted = Math.max(counted, strategy.tailCalls(config, aggregates));
      countingBefore = true;
    }
    const needed = strategy.tailRequirement
      ? strategy.tailRequirement(config, aggregates)
      : { toolCalls: 'all' as const, seqs: [] };
    if (needed === null) continue;
    if (countingBefore) wholeCalls = undefined;
    if (needed.toolCalls === 'all' || toolCalls === 'all') toolCalls = 'all';
    else toolCalls = Math.max(toolCalls ?? 0, needed.toolCalls);
    wholeCalls =
      needed.wholeCalls === undefined || wholeCalls === undefined ? undefined : Math.max(wholeCalls, needed.wholeCalls);
    // Ascending (a long history's pinned calls are tens of thousands): merged, not sorted again.
    if (needed.seqs.length > 0) seqs = sortedUnion(seqs, needed.seqs);
  }
  if (toolCalls === undefined || toolCalls === 'all') return { toolCalls: 'all', seqs: [] };
  toolCalls = Math.max(toolCalls, counted);
  if (wholeCalls !== undefined) wholeCalls = Math.max(wholeCalls, counted);
  return {
    toolCalls,
    seqs,
    ...(wholeCalls === undefined ? {} : { wholeCalls: Math.min(wholeCalls, toolCalls) }),
  };
}

/**
 * The cut of {@link selectTail}: the latest index such that items[cut..] holds at least
 * `toolCalls` function_call and function_call_output items each (items.length for 0), or
 * null when the items hold fewer.
 */
export function tailCut(items: readonly PromptItem[], toolCalls: number): number | null {
  if (toolCalls <= 0) return items.length;
  let calls = 0;
  let outputs = 0;
  for (let index = items.length - 1; index >= 0; index -= 1) {
    const type = items[index]!.type;
    if (type === 'function_call') calls += 1;
    else if (type === 'function_call_output') outputs += 1;
    if (calls >= toolCalls && outputs >= toolCalls) return index;
  }
  return null;
}

/**
 * The reference definition of a tail view: what the session store hands the strategies
 * (with the history's aggregates) instead of the whole history. The store must reproduce
 * exactly this selection (in seq order):
 *
 * - `toolCalls: 'all'`: the whole history.
 * - Otherwise, with n = toolCalls, the cut is the latest index such that the suffix
 *   items[cut..] holds at least n function_call items and at least n function_call_output
 *   items (0 when the history has fewer; items.length when n is 0). The view is
 *   1. every `message` item before the cut,
 *   2. every function_call before the cut whose seq is in `seqs`, and the first
 *      function_call_output after it with the same call_id when that output is before the
 *      cut too (outputs are not in the aggregates, so the store finds them by call_id),
 *   3. the whole suffix.
 *
 * Invariant (property-tested): for every strategy list and history whose call ids are unique,
 * or come again only once their call is answered (lib/strategies/history-index.ts, Pairing),
 * `preparePrompt(selectTail(full, tailRequirement(list, config, computeAggregates(full))),
 * list, { config, aggregates: computeAggregates(full) })` is byte-identical to
 * `preparePrompt(full, list, { config })`.
 */
export function selectTail<T extends PromptItem>(items: readonly T[], requirement: TailRequirement): T[] {
  if (requirement.toolCalls === 'all') return [...items];
  const cut = tailCut(items, requirement.toolCalls) ?? 0;
  const wanted = new Set(requirement.seqs);
  const awaitingOutput = new Set<string>();
  const view: T[] = [];
  for (let index = 0; index < cut; index += 1) {
    const item = items[index]!;
    if (item.type === 'message') {
      view.push(item);
    } else if (item.type === 'function_call') {
      if (item.seq !== undefined && wanted.has(item.seq)) {
        view.push(item);
        awaitingOutput.add(item.call_id);
      }
    } else if (awaitingOutput.has(item.call_id)) {
      view.push(item);
      awaitingOutput.delete(item.call_id);
    }
  }
  for (let index = cut; index < items.length; index += 1) view.push(items[index]!);
  return view;
}

import { repeatIndices } from './aggregates.ts';
import { applyEpochPlan, historyFor } from './apply-epoch-plan.ts';
import { incrementEpochPlan, repeatsAmong } from './epoch-plan.ts';
import { epochTailRequirement } from './epoch-tail-requirement.ts';
import type { Strategy } from './strategy.ts';
import { strategyConfigFieldsSchema } from './strategy-config.ts';

/**
 * `shorten_tools_epoch_increment` (the default): shorten_tools_epoch with epochs that grow
 * over the life of the session and a compacted window that grows with them (see
 * {@link incrementEpochPlan} for the exact schedule, including repeat-driven growth).
 *
 * Example (defaults): 51 calls -> 21 whole, 30 compacted, 0 dropped; 200 calls -> 50
 * whole, 100 compacted, 50 dropped.
 */
export const shortenToolsEpochIncrement: Strategy = {
  name: 'shorten_tools_epoch_increment',
  configSchema: strategyConfigFieldsSchema.pick({
    epoch_tool_call_threshold: true,
    epoch_full_tool_calls: true,
    epoch_compacted_tool_calls: true,
    epoch_size: true,
    epoch_increment_epochs_per_increase: true,
    epoch_increment_size_increase: true,
    epoch_increment_repeat_increase: true,
    epoch_increment_max_size: true,
    epoch_increment_compacted_growth_ratio: true,
    epoch_increment_max_compacted_tool_calls: true,
  }),
  apply(items, config, context) {
    const { history, items: input } = historyFor(items, context);
    const plan = incrementEpochPlan(history.toolCalls, config, history.repeatsIn);
    if (plan === null) return [...input];
    return applyEpochPlan(input, plan, history);
  },
  tailRequirement(config, aggregates) {
    return epochTailRequirement(
      incrementEpochPlan(aggregates.tool_calls, config, repeatsAmong(repeatIndices(aggregates))),
      aggregates,
    );
  },
};

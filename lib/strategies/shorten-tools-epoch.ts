import { applyEpochPlan, historyFor } from './apply-epoch-plan.ts';
import { epochPlan } from './epoch-plan.ts';
import type { Strategy } from './strategy.ts';
import { strategyConfigFieldsSchema } from './strategy-config.ts';
import { epochTailRequirement } from './epoch-tail-requirement.ts';

/**
 * `shorten_tools_epoch`: a cache-friendly boundary frozen for `epoch_size` calls at a time
 * (see {@link epochPlan}). Positions count every function_call of the history newest-first.
 * Within an epoch the compacted region and everything before the context notice are
 * byte-identical from one call count to the next.
 *
 * Example (threshold 100, full 10, compacted 40, size 10), as whole/compacted/dropped
 * calls: 100 -> nothing changes; 101 -> 11/40/50; 105 -> 15/40/50; 110 -> 20/40/50;
 * 111 -> 11/40/60.
 */
export const shortenToolsEpoch: Strategy = {
  name: 'shorten_tools_epoch',
  configSchema: strategyConfigFieldsSchema.pick({
    epoch_tool_call_threshold: true,
    epoch_full_tool_calls: true,
    epoch_compacted_tool_calls: true,
    epoch_size: true,
  }),
  apply(items, config, context) {
    const { history, items: input } = historyFor(items, context);
    const plan = epochPlan(history.toolCalls, config);
    if (plan === null) return [...input];
    return applyEpochPlan(input, plan, history);
  },
  tailRequirement(config, aggregates) {
    return epochTailRequirement(epochPlan(aggregates.tool_calls, config), aggregates);
  },
};

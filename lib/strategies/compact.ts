import { z } from 'zod';
import type { Strategy } from './strategy.ts';

/**
 * `compact`: summarization compaction (lib/compaction/). Summarizing calls a model, so the
 * work is not done here: the turn pipeline measures the prompt the whole list prepares and,
 * above `compact_trigger_ratio` of the budget, summarizes the oldest part of the context and
 * moves the session's context start (lib/turn/). The summary reaches the strategies as the
 * first item of the history (`synthetic: 'summary'`). In the list the strategy itself changes
 * nothing, so its position does not change the prompt.
 *
 * @example preparePrompt(items, 'shorten_tools_epoch_increment,compact,inbox') // same as without compact
 */
export const compact: Strategy = {
  name: 'compact',
  configSchema: z.object({
    context_limit: z.number(),
    response_reserve: z.number(),
    compact_trigger_ratio: z.number(),
    compact_keep_ratio: z.number(),
  }),
  apply(items) {
    return [...items];
  },
  tailRequirement() {
    return null;
  },
};

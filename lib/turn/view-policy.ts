import type { ViewPolicy } from '../session/session-log.ts';
import { callKey, emptyAggregates, extendAggregates } from '../strategies/aggregates.ts';
import { compactCallItem, compactOutputItem } from '../strategies/compact-text.ts';
import { selectTail, tailCut } from '../strategies/select-tail.ts';

/**
 * The strategies' part of the session log's views (see ViewPolicy): the log stores views
 * whose aggregates, repeat keys and compacted items these functions produce, and reads only
 * views written under this `version`. Bump it when any of them changes what it gives for the
 * same history (compact-text.ts, aggregates.ts, select-tail.ts): older views are then read
 * past (exact, only slower) until the next pack writes one under the new version.
 */
export const viewPolicy: ViewPolicy = {
  version: 'strategies-2',
  emptyAggregates,
  extendAggregates,
  callKey,
  selectTail: (items, requirement) => selectTail(items, requirement),
  tailCut,
  compact: (item) =>
    (item.type === 'function_call'
      ? compactCallItem(item)
      : item.type === 'function_call_output'
        ? compactOutputItem(item)
        : item) as typeof item,
};

import { outputLength, type PromptItem } from '../items.ts';
import { historyFor } from './apply-epoch-plan.ts';
import { compactCallItem, compactOutputItem } from './compact-text.ts';
import type { Strategy } from './strategy.ts';
import { strategyConfigFieldsSchema, type StrategyConfig } from './strategy-config.ts';

type Fate = 'whole' | 'compact' | 'drop';

/**
 * `shorten_tools`: recomputes the truncation on every prompt (not cache-stable; no notice).
 *
 * Walk newest-first. An output's position is the number of outputs seen so far, its own
 * included; a call shares its output's position. While no (non-synthetic) user message has
 * been passed, i.e. for every tool item after the newest user message, or while the
 * retained tool characters so far are below `max_tool_chars`, items stay whole. Otherwise
 * outputs at positions 1..full_tool_outputs stay whole, up to max_tool_outputs are
 * compacted, older are dropped; calls likewise with full_tool_calls and max_tool_calls.
 * Retained characters count the output text of outputs and the arguments text of calls, a
 * compacted item its compacted length, a dropped one nothing.
 *
 * Pairs stay whole for providers: a call is dropped exactly when its output is dropped; a
 * call whose own rule says "drop" while its output is kept is compacted instead. A call
 * without an output (the provider is sent a placeholder result for it) takes a position as
 * its output would. Items already compacted by an earlier strategy are left as they are.
 *
 * Example (defaults 0/10/40/40, budget exhausted, no user message after the tools): the
 * newest 10 outputs whole with compacted calls, outputs and calls 11..40 compacted, older
 * pairs dropped.
 */
export const shortenTools: Strategy = {
  name: 'shorten_tools',
  configSchema: strategyConfigFieldsSchema.pick({
    full_tool_calls: true,
    full_tool_outputs: true,
    max_tool_calls: true,
    max_tool_outputs: true,
    max_tool_chars: true,
  }),
  apply(items, config, context) {
    const { history, items: input } = historyFor(items, context);
    const reversed: PromptItem[] = [];
    const outputFates = new Map<string, { position: number; fate: Fate }>();
    let outputsSeen = 0;
    let retained = 0;
    let userSeen = false;
    for (let index = input.length - 1; index >= 0; index -= 1) {
      const item = input[index]!;
      if (item.type === 'message') {
        reversed.push(item);
        if (item.role === 'user' && item.synthetic === undefined) userSeen = true;
        continue;
      }
      // An output without its call (a compacted context's, answering a call before its start):
      // kept as a message is, it has no position.
      if (history.isLateOutput(item)) {
        reversed.push(item);
        continue;
      }
      const budgetLeft = !userSeen || retained < config.max_tool_chars;
      if (item.type === 'function_call_output') {
        outputsSeen += 1;
        const position = outputsSeen;
        const fate = outputFate(position, budgetLeft, config);
        outputFates.set(item.call_id, { position, fate });
        if (fate === 'drop') continue;
        const kept = fate === 'compact' ? compactOutputItem(item) : item;
        if (kept !== item) history.derive(item, kept);
        retained += kept === item ? outputLength(item) : kept.output.length;
        reversed.push(kept);
        continue;
      }
      let output = outputFates.get(item.call_id);
      outputFates.delete(item.call_id);
      if (output === undefined) {
        // A call without an output is answered by a placeholder, which counts as an output here.
        outputsSeen += 1;
        output = { position: outputsSeen, fate: outputFate(outputsSeen, budgetLeft, config) };
      }
      if (output.fate === 'drop') continue;
      let fate: Fate = budgetLeft
        ? 'whole'
        : output.position <= config.full_tool_calls
          ? 'whole'
          : output.position <= config.max_tool_calls
            ? 'compact'
            : 'drop';
      if (fate === 'drop') fate = 'compact';
      const kept = fate === 'compact' ? compactCallItem(item) : item;
      if (kept !== item) history.derive(item, kept);
      retained += kept.arguments.length;
      reversed.push(kept);
    }
    return reversed.reverse();
  },
};

/** The fate of the output (or placeholder) at `position`, newest-first. */
function outputFate(position: number, budgetLeft: boolean, config: StrategyConfig): Fate {
  if (budgetLeft || position <= config.full_tool_outputs) return 'whole';
  return position <= config.max_tool_outputs ? 'compact' : 'drop';
}

import type { PromptItem } from '../items.ts';
import { compactToolItem } from './compact-text.ts';
import { contextNoticeItem, insertContextNotice, isContextNotice, PairGaps } from './context-notice.ts';
import type { EpochPlan } from './epoch-plan.ts';
import {
  indexHistory,
  LAYOUT_CALL,
  LAYOUT_MESSAGE,
  LAYOUT_NOTICE,
  LAYOUT_OUTPUT,
  type HistoryIndex,
} from './history-index.ts';
import type { StrategyContext } from './strategy.ts';

/**
 * The history index a strategy should use: the dispatcher's, or (when a strategy is
 * applied on its own) one built here, with the outputs that answer no call dropped.
 */
export function historyFor(
  items: readonly PromptItem[],
  context: StrategyContext,
): { history: HistoryIndex; items: readonly PromptItem[] } {
  if (context.history) return { history: context.history, items };
  return indexHistory(items, context.aggregates, context.compactedContext);
}

/**
 * Applies an epoch boundary to the items. Each tool item of the history takes the fate of
 * its call's position: 1..keepFull whole, the next `compacted` compacted, older dropped.
 * The newest instance of a repeated call (and its output) stays whole wherever it falls.
 * Items the history does not know (messages, synthetic items) are kept as they are.
 *
 * Exactly one context notice: earlier notices are removed, and one is placed when an item
 * was compacted, when the plan's dropped region holds any call of the history (positions
 * beyond keepFull + compacted; this counts even if those calls are all protected or
 * unpaired, so a tail view decides as the full history does), or when a notice was already
 * there. It goes right before the first item of the kept-whole region, moved back to the
 * nearest point that splits no call from an output answering it right after it (PairGaps).
 * Within an epoch everything before it is byte-identical from one call count to the next
 * (as long as the new calls repeat no older call).
 */
export function applyEpochPlan(items: readonly PromptItem[], plan: EpochPlan, history: HistoryIndex): PromptItem[] {
  const out: PromptItem[] = [];
  let changed = false;
  let hadNotice = false;
  let anchor: number | undefined;
  // Where the notice goes when `anchor` is found: followed item by item until then.
  const gaps = new PairGaps();
  let gap = 0;
  const compactedEnd = plan.keepFull + plan.compacted;
  // With the layout, an item is read only when it is kept (or compacted) and needed.
  const layout = history.layoutOf(items);
  for (let index = 0; index < items.length; index += 1) {
    const item = items[index]!;
    const kind = layout ? layout.kinds[index]! : kindOf(item);
    if (kind === LAYOUT_NOTICE) {
      hadNotice = true;
      continue;
    }
    if (kind === LAYOUT_MESSAGE) {
      if (anchor === undefined) gaps.skip(item);
      out.push(item);
      continue;
    }
    const info = layout ? layout.infoAt(index) : history.infoOf(item);
    if (info === undefined || info.protected || info.position <= plan.keepFull) {
      if (info !== undefined && info.position <= plan.keepFull && anchor === undefined) {
        anchor = out.length;
        gap = gaps.latest();
      }
      if (anchor === undefined) gaps.next(item);
      out.push(item);
      continue;
    }
    if (info.position <= compactedEnd) {
      const compacted = compactToolItem(item);
      if (compacted !== item) history.derive(item, compacted);
      // An item may come compacted already (a stored view holds it so): it counts the same.
      if (compacted.compacted) changed = true;
      if (anchor === undefined) gaps.next(compacted);
      out.push(compacted);
    }
  }
  // Dropped items of a tail view are not in `items`, so whether anything is dropped comes
  // from the plan: some call of the history lies beyond the compacted region.
  const dropsSome = history.toolCalls > compactedEnd;
  if (!changed && !dropsSome && !hadNotice) return out;
  if (anchor === undefined) return insertContextNotice(out, undefined);
  // As insertContextNotice(out, anchor) places it, without a second walk and copy.
  out.splice(gap, 0, contextNoticeItem());
  return out;
}

/** The layout kind of an item, read from it. */
function kindOf(item: PromptItem): number {
  if (isContextNotice(item)) return LAYOUT_NOTICE;
  if (item.type === 'message') return LAYOUT_MESSAGE;
  return item.type === 'function_call' ? LAYOUT_CALL : LAYOUT_OUTPUT;
}

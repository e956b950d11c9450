import type { PromptItem, PromptMessageItem } from '../items.ts';

/** The text of the context-management notice. */
export const CONTEXT_NOTICE_TEXT =
  'Context management notice: to keep this conversation within limits, the results (and some ' +
  'arguments) of older tool calls above have been shortened into compacted accounts or hidden. ' +
  'A missing or shortened result does not mean that the tool never ran. Do not repeat a tool ' +
  'call only because its earlier result is not visible here; call it again only if you need ' +
  'fresh data.';

/**
 * The synthetic user message an epoch strategy adds when it compacted or dropped anything: one
 * frozen object, so that a turn's receipt finds the hash of the block that holds it kept from
 * the turn before (lib/prompt-shape.ts hashes a frozen item once per process).
 */
export function contextNoticeItem(): PromptMessageItem {
  return CONTEXT_NOTICE;
}

const CONTEXT_NOTICE: PromptMessageItem = Object.freeze({
  type: 'message',
  role: 'user',
  content: CONTEXT_NOTICE_TEXT,
  synthetic: 'context_notice',
});

export function isContextNotice(item: PromptItem): boolean {
  return item.synthetic === 'context_notice';
}

/**
 * Inserts the notice into `items` (a new array) at the latest position at or before
 * `anchor` that splits no call/output pair. `anchor` is the index of the first item of the
 * kept-whole region, or undefined to mean the end, before any trailing synthetic items
 * (delivered inbox notices stay last).
 */
export function insertContextNotice(items: readonly PromptItem[], anchor: number | undefined): PromptItem[] {
  let limit = anchor;
  if (limit === undefined) {
    limit = items.length;
    while (limit > 0 && items[limit - 1]!.synthetic !== undefined) limit -= 1;
  }
  const open = new Set<string>();
  let gap = 0;
  for (let index = 0; index <= limit; index += 1) {
    if (open.size === 0) gap = index;
    const item = items[index];
    if (item === undefined) break;
    if (item.type === 'function_call') open.add(item.call_id);
    else if (item.type === 'function_call_output') open.delete(item.call_id);
  }
  return [...items.slice(0, gap), contextNoticeItem(), ...items.slice(gap)];
}

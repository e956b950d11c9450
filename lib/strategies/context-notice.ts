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
  const gaps = new PairGaps();
  for (let index = 0; index < limit && index < items.length; index += 1) gaps.next(items[index]!);
  const gap = gaps.latest();
  return [...items.slice(0, gap), contextNoticeItem(), ...items.slice(gap)];
}

/**
 * Follows items in order, from the first, and knows the latest position so far that splits
 * no call/output pair (where the notice may go): a position at which every call before it has
 * had its output (by call_id).
 */
export class PairGaps {
  private readonly open = new Set<string>();
  private gap = 0;
  private position = 0;

  /** Takes the next item. */
  next(item: PromptItem): void {
    if (this.open.size === 0) this.gap = this.position;
    this.position += 1;
    if (item.type === 'function_call') this.open.add(item.call_id);
    else if (item.type === 'function_call_output') this.open.delete(item.call_id);
  }

  /** Takes the next item, known to be a message (which opens and closes no call). */
  skip(): void {
    if (this.open.size === 0) this.gap = this.position;
    this.position += 1;
  }

  /** The latest such position up to the one after the last item taken (0 before any). */
  latest(): number {
    return this.open.size === 0 ? this.position : this.gap;
  }
}

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
 * `anchor` that splits no call from an output answering it right after it (PairGaps).
 * `anchor` is the index of the first item of the kept-whole region, or undefined to mean the
 * end, before any trailing synthetic items (delivered inbox notices stay last).
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
 * Follows items in order, from the first, and knows the latest position so far where the
 * notice may go: one that splits no call from an output that answers it as a tool result.
 * A provider takes a result only among the outputs right after its call's assistant message
 * (its calls and assistant text; lib/models/convert-to-model-messages.ts, adjacentAnswers), so
 * a call is open from it until its output, or until an item that is neither an output of that
 * run nor, before the run's outputs, another call or assistant text. A call answered later,
 * or never, is sent with a placeholder result wherever the notice stands: the notice's place
 * does not wait for its output, and stays where it was when the output comes.
 */
export class PairGaps {
  /** The calls of the current run with no output yet, by call_id. */
  private readonly open = new Set<string>();
  /** Whether the current run's outputs have begun. */
  private outputs = false;
  private gap = 0;
  private position = 0;

  /** Takes the next item. */
  next(item: PromptItem): void {
    if (item.type === 'message') {
      this.skip(item);
      return;
    }
    const continues = item.type === 'function_call' ? !this.outputs : this.open.has(item.call_id);
    if (!continues) this.endRun();
    this.take();
    if (item.type === 'function_call') this.open.add(item.call_id);
    else {
      this.open.delete(item.call_id);
      this.outputs = true;
    }
  }

  /** Takes the next item, known to be a message (read only while a call is open). */
  skip(item: PromptItem): void {
    // Assistant text before the run's outputs goes in the assistant message of its calls.
    if (this.open.size > 0 && (this.outputs || item.type !== 'message' || item.role !== 'assistant')) this.endRun();
    this.take();
  }

  /** The latest such position up to the one after the last item taken (0 before any). */
  latest(): number {
    return this.open.size === 0 ? this.position : this.gap;
  }

  private take(): void {
    if (this.open.size === 0) this.gap = this.position;
    this.position += 1;
  }

  private endRun(): void {
    this.open.clear();
    this.outputs = false;
  }
}

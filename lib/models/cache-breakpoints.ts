import type { PromptItem } from '../items.ts';

/** Anthropic accepts at most four `cache_control` breakpoints in one request. */
export const MAX_CACHE_BREAKPOINTS = 4;

/** Where the breakpoints of one request go. */
export interface CacheBreakpoints {
  /** Whether the last tool definition carries one (it caches all of the tools). */
  tools: boolean;
  /** Indices into the prompt of the items whose blocks carry one, ascending. */
  items: number[];
}

/**
 * Places Anthropic's prompt-cache breakpoints for a request, at most `MAX_CACHE_BREAKPOINTS`:
 *
 * 1. the last tool definition (when there are tools): the tools stay cached even when the rest changes;
 * 2. the last system message of the leading run of system messages (the instructions);
 * 3. the last two items that make a content block (sliding anchors): each turn writes its whole
 *    prompt to the cache, and the next turn, which appends a few blocks to it, reads it back
 *    within Anthropic's 20-block lookback. The second-to-last anchor still matches when the last
 *    item is one the next prompt does not repeat (a delivered inbox notice);
 * 4. `stableEnd` (the end of the strategies' stable prefix, `ModelRequest.cacheBreakpoint`), which the
 *    next prompt may share after the sliding anchors no longer match (an image boundary move of
 *    `shorten_images` behind the context notice changes the prompt only after it). With tools
 *    offered no slot is left; it then takes the instructions' one when an item after it is
 *    compacted (by `shorten_images`: without it, the prompt after the notice only grows, which
 *    the anchors cover). Its prefix holds the instructions, so an image boundary move re-writes
 *    the prompt from the stable end instead of from the instructions; only a change before it
 *    (an epoch move of the tool strategies) re-writes the instructions too. An item compacted
 *    without a byte of it changing (an image the provider got as its placeholder already,
 *    lib/models/media-parts.ts) moves it as well: no loss, as Anthropic's cache is keyed by the
 *    blocks, not by where breakpoints stand, and the stable end is cached before a move does change.
 *
 * An empty assistant message makes no block (the converter drops it), so it never carries one.
 * The bench's Anthropic cost model (bench/cache-billing.ts) places its breakpoints with this function.
 */
export function anthropicCacheBreakpoints(
  prompt: PromptItem[],
  hasTools: boolean,
  stableEnd?: number,
): CacheBreakpoints {
  const items = new Set<number>();
  const system = leadingSystemEnd(prompt);
  if (system !== undefined) items.add(system);
  const anchors: number[] = [];
  for (let index = prompt.length - 1; index >= 0 && anchors.length < 2; index--) {
    if (makesBlock(prompt[index]!)) anchors.push(index);
  }
  for (const anchor of anchors) items.add(anchor);
  const slots = MAX_CACHE_BREAKPOINTS - (hasTools ? 1 : 0);
  if (stableEnd !== undefined && !items.has(stableEnd) && stableEnd < prompt.length && makesBlock(prompt[stableEnd]!)) {
    // No slot left: it takes the instructions' one when a strategy shortened an item after it
    // (`shorten_images`), so the prompt can change there while its prefix, instructions included, stays.
    const worthMore = system !== undefined && system < stableEnd && !anchors.includes(system);
    if (items.size >= slots && worthMore && compactedAfter(prompt, stableEnd)) items.delete(system);
    if (items.size < slots) items.add(stableEnd);
  }
  return { tools: hasTools, items: [...items].sort((a, b) => a - b) };
}

/** The index of the last system message of the prompt's leading system messages, if it opens with one. */
function leadingSystemEnd(prompt: PromptItem[]): number | undefined {
  let end: number | undefined;
  for (const [index, item] of prompt.entries()) {
    if (item.type !== 'message' || item.role !== 'system') break;
    end = index;
  }
  return end;
}

/** Whether an item after `index` was shortened by a strategy. */
function compactedAfter(prompt: PromptItem[], index: number): boolean {
  for (let at = index + 1; at < prompt.length; at++) if (prompt[at]!.compacted) return true;
  return false;
}

/**
 * Whether the converter makes a content block from the item: it drops a user or assistant
 * message with no text but whitespace and no image or file.
 */
export function makesBlock(item: PromptItem): boolean {
  if (item.type !== 'message' || item.role === 'system') return true;
  const content = item.content;
  // The Messages API refuses a text block that is empty or only whitespace.
  return typeof content === 'string'
    ? content.trim() !== ''
    : content.some((part) => part.type !== 'input_text' || part.text.trim() !== '');
}

import { z } from 'zod';
import { loopStart, type PromptItem, type Tool } from '../items.ts';
import type { TokenBudget } from '../tokens/model-limits.ts';
import { countToolTokens, promptItemTokens } from '../tokens/token-counter.ts';
import { checkPromptFits } from './check-prompt-fits.ts';

/** What `truncation: "auto"` (or the overflow safety net) dropped from a prompt to make it fit. */
export const truncationSchema = z.object({
  /** Tool calls dropped with their outputs. */
  tool_pairs: z.number().int(),
  /** Messages dropped (oldest first, never the newest user turn). */
  messages: z.number().int(),
  /** Seqs of the dropped stored items (absent for a prompt that is not stored). */
  dropped_seqs: z.array(z.number().int()),
  /** The prompt's tokens before and after. */
  prompt_tokens_before: z.number().int(),
  prompt_tokens: z.number().int(),
});
export type Truncation = z.infer<typeof truncationSchema>;

/**
 * Where a session's prompt starts after the overflow safety net dropped its oldest items:
 * tool pairs whose call is older than `tool_start_seq`, and messages older than
 * `message_start_seq`, stay out of the prompt (docs/STORAGE.md, `overflow`).
 */
export interface PromptBoundary {
  tool_start_seq: number;
  message_start_seq: number;
}

export interface TruncateOptions {
  /** Once over the limit, drop until the prompt needs at most this many tokens (default: the limit). */
  target?: number;
  /**
   * The first seq of the newest turn (its input): from there on nothing is dropped, and the items
   * before it may go, its last user message too (a tool loop's, whose input is an output).
   */
  keepFromSeq?: number;
  /**
   * Given (null: none yet), the drop is expressed as a boundary: what `boundary` names goes
   * first, whether or not the prompt fits; only stored items (with a seq) are dropped; and
   * the result's `boundary` is where later prompts start.
   */
  boundary?: PromptBoundary | null;
}

/**
 * OpenAI's `truncation: "auto"` on a prepared prompt: when it needs more than the budget's
 * prompt limit, drop the oldest tool pairs (a call with its outputs), then the oldest
 * messages, until it fits. The leading system messages (the instructions) and the newest
 * turn (from `keepFromSeq` on, else from the last user message on) are never dropped;
 * when the prompt still does not fit, ContextTooLargeError as without truncation.
 * `cacheBreakpoint` moves with the items before it. With `options.boundary`, this is the
 * overflow safety net of a stored session (see TruncateOptions). `promptTokens`: the tokens of
 * the prompt returned (countPromptTokens of it; each item is counted once). `omitted`: the seqs
 * of every item left out (absent: none). The messages older than a stored boundary's message
 * start go uncounted (not in `truncation`, nor in its `prompt_tokens_before`): a prompt built
 * from the boundary on holds them only when its strategies' tail starts earlier, which depends
 * on the newest items (a tool loop's next input, an output, moves it), not on what is left out.
 */
export function truncatePrompt(
  prompt: readonly PromptItem[],
  tools: readonly Tool[],
  budget: TokenBudget,
  cacheBreakpoint?: number,
  options: TruncateOptions = {},
): {
  prompt: PromptItem[];
  promptTokens: number;
  cacheBreakpoint?: number;
  truncation?: Truncation;
  boundary?: PromptBoundary | null;
  omitted?: number[];
} {
  const itemTokens = promptItemTokens(prompt, budget.counter);
  let before = countToolTokens(tools, budget.counter);
  for (const tokens of itemTokens) before += tokens;
  const persistent = options.boundary !== undefined;
  const stored = options.boundary ?? null;
  const kept = () => ({
    prompt: [...prompt],
    promptTokens: before,
    ...(cacheBreakpoint !== undefined ? { cacheBreakpoint } : {}),
    ...(persistent ? { boundary: stored } : {}),
  });
  if (before <= budget.promptLimit && !stored) return kept();
  let first = 0;
  while (
    first < prompt.length &&
    prompt[first]!.type === 'message' &&
    (prompt[first] as { role: string }).role === 'system'
  )
    first += 1;
  const lastUser = loopStart(prompt);
  const inputStart =
    options.keepFromSeq === undefined
      ? -1
      : prompt.findIndex((item) => item.seq !== undefined && item.seq >= options.keepFromSeq!);
  // The newest turn: its input whole (an output answering a call before it included), else from
  // its last user message on.
  const end = Math.max(inputStart === -1 ? lastUser : inputStart, first);
  // The outputs of each call, by place (as answeredCalls pairs them: the latest call before an
  // output with its call_id), so a call never goes without its outputs or they without it. In
  // typed arrays, a chain per call: a warm turn's prompt under a boundary has thousands of items.
  const firstOutput = new Int32Array(prompt.length).fill(-1);
  const nextOutput = new Int32Array(prompt.length).fill(-1);
  const lastOutput = new Int32Array(prompt.length);
  const latestCall = new Map<string, number>();
  for (let index = 0; index < prompt.length; index++) {
    const item = prompt[index]!;
    if (item.type === 'function_call') latestCall.set(item.call_id, index);
    else if (item.type === 'function_call_output') {
      const call = latestCall.get(item.call_id);
      if (call === undefined) continue;
      if (firstOutput[call] === -1) firstOutput[call] = index;
      else nextOutput[lastOutput[call]!] = index;
      lastOutput[call] = index;
    }
  }
  // 1: dropped; 2: dropped uncounted (a message older than the stored boundary's message start).
  const dropped = new Uint8Array(prompt.length);
  let droppedCount = 0;
  let unread = 0;
  let tokens = before;
  let pairs = 0;
  let messages = 0;
  let lastCall = 0;
  let lastMessage = 0;
  /** Drops the item at `index` (a call with its outputs); false when it must stay. */
  const drop = (index: number, kept = end): boolean => {
    const item = prompt[index]!;
    if (dropped[index] !== 0 || (persistent && item.seq === undefined)) return false;
    if (item.type === 'function_call_output') return false;
    // A call whose output is in the newest turn (from `kept` on) stays with it.
    for (let at = firstOutput[index]!; at !== -1; at = nextOutput[at]!) if (at >= kept) return false;
    dropped[index] = 1;
    droppedCount += 1;
    tokens -= itemTokens[index]!;
    for (let at = firstOutput[index]!; at !== -1; at = nextOutput[at]!) {
      dropped[at] = 1;
      droppedCount += 1;
      tokens -= itemTokens[at]!;
    }
    if (item.type === 'function_call') {
      pairs += 1;
      lastCall = Math.max(lastCall, item.seq ?? 0);
    } else {
      messages += 1;
      lastMessage = Math.max(lastMessage, item.seq ?? 0);
    }
    return true;
  };
  // What an earlier turn's boundary names goes first, so the prompt keeps its start: before the
  // newest turn, or without an input (the preview) wherever it is, the last user message too (in a
  // tool loop a turn's input is a call's output: the boundary may pass that message).
  if (stored) {
    const named = options.keepFromSeq === undefined ? prompt.length : end;
    for (let index = first; index < named; index += 1) {
      const { type, seq } = prompt[index]!;
      if (seq === undefined) continue;
      if (type === 'message' && seq < stored.message_start_seq) {
        dropped[index] = 2;
        unread += 1;
        tokens -= itemTokens[index]!;
        before -= itemTokens[index]!;
      } else if (type === 'function_call' && seq < stored.tool_start_seq) drop(index, named);
    }
  }
  // Still over the limit: the oldest pairs, then the oldest messages, down to the target.
  const moved = tokens > budget.promptLimit;
  const goal = moved ? Math.min(options.target ?? budget.promptLimit, budget.promptLimit) : tokens;
  for (let index = first; index < end && tokens > goal; index += 1) {
    if (prompt[index]!.type === 'function_call') drop(index);
  }
  for (let index = first; index < end && tokens > goal; index += 1) {
    if (prompt[index]!.type === 'message') drop(index);
  }
  if (droppedCount + unread === 0) {
    if (before > budget.promptLimit) checkPromptFits(prompt, tools, budget);
    return kept();
  }
  // The items kept, the seqs dropped (in place order) and the places dropped up to the breakpoint.
  const result: PromptItem[] = [];
  const droppedSeqs: number[] = [];
  const omitted: number[] = [];
  let droppedBefore = 0;
  for (let index = 0; index < prompt.length; index++) {
    const item = prompt[index]!;
    if (dropped[index] === 0) result.push(item);
    else {
      if (item.seq !== undefined) omitted.push(item.seq);
      if (item.seq !== undefined && dropped[index] === 1) droppedSeqs.push(item.seq);
      if (cacheBreakpoint !== undefined && index <= cacheBreakpoint) droppedBefore += 1;
    }
  }
  // `tokens` is what counting `result` gives; counting again finds the largest item to name.
  if (tokens > budget.promptLimit) checkPromptFits(result, tools, budget);
  const shifted = cacheBreakpoint === undefined ? undefined : cacheBreakpoint - droppedBefore;
  const messageStart = Math.max(stored?.message_start_seq ?? 1, lastMessage + 1);
  // Once messages go, every older pair went before them.
  const toolStart = Math.max(stored?.tool_start_seq ?? 1, lastCall + 1, messages > 0 ? messageStart : 1);
  return {
    prompt: result,
    promptTokens: tokens,
    ...(shifted !== undefined && shifted >= 0 ? { cacheBreakpoint: shifted } : {}),
    omitted,
    ...(droppedCount > 0
      ? {
          truncation: {
            tool_pairs: pairs,
            messages,
            dropped_seqs: droppedSeqs,
            prompt_tokens_before: before,
            prompt_tokens: tokens,
          },
        }
      : {}),
    ...(persistent
      ? { boundary: moved ? { tool_start_seq: toolStart, message_start_seq: messageStart } : stored }
      : {}),
  };
}

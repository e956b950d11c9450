import { answeredCalls, type PromptFunctionCallItem, type PromptItem } from '../items.ts';
import { loopReasoning } from '../models/reasoning-parts.ts';
import { countItemTokens, reasoningTokens, type TokenCounter } from '../tokens/token-counter.ts';

/** Where a compaction cuts the current context, and what it hands the summarizer. */
export interface CompactionPlan {
  /** The first seq of the new context (everything before it is summarized). */
  startSeq: number;
  /** The items before the cut, in order. */
  summarized: PromptItem[];
  /** Calls before the cut that have no output anywhere in the context: noted as interrupted. */
  interrupted: PromptFunctionCallItem[];
  firstSeq: number;
  lastSeq: number;
}

export interface PlanCompactionOptions {
  /** The newest items kept whole take at most this many tokens (the cut moves older to keep pairs whole). */
  keepTokens: number;
  counter: TokenCounter;
  /** Items from this seq on are always kept (the turn's own input). */
  keepFromSeq?: number;
  /**
   * The new context should not start before this seq (what the newest record carries), so
   * later records carry the whole context. Moved past a pair rather than splitting it; ignored
   * when honouring it would summarize part of the kept input.
   */
  earliestStartSeq?: number;
  /**
   * The kept side's most tokens: a cut moved back to a call that would keep more (a parallel
   * step's output larger than the window) moves forward past its step instead, before the input.
   */
  maxKeptTokens?: number;
}

/**
 * Chooses the cut of a compaction over the current context (`items`: stored items in seq
 * order, synthetic ones ignored): the newest items worth at most `keepTokens` stay, the rest
 * is summarized. A cut never splits a call from its output: when a call before the cut has
 * its output after it, the cut moves back to the call. A call with no output at all stays on
 * the summarized side and is reported in `interrupted` (the summary notes it; it is never run
 * again). Returns null when nothing would be summarized. Pure and deterministic.
 *
 * @example planCompaction(items, { keepTokens: 500, counter: approximateTokenCounter })?.startSeq
 */
export function planCompaction(items: readonly PromptItem[], options: PlanCompactionOptions): CompactionPlan | null {
  const stored = items.filter((item) => item.seq !== undefined && item.synthetic === undefined);
  if (stored.length === 0) return null;
  let cut = stored.length;
  let kept = 0;
  // The reasoning of the current tool loop is sent with its items (loopReasoning), so it counts.
  const sent = loopReasoning(stored);
  // Each item is counted once: the walk's counts serve the kept side's weight below.
  const counts: number[] = [];
  const tokensAt = (index: number): number =>
    (counts[index] ??=
      countItemTokens(stored[index]!, options.counter) + reasoningTokens(sent.get(index), options.counter));
  while (cut > 0) {
    const item = stored[cut - 1]!;
    const tokens = tokensAt(cut - 1);
    const protectedItem = options.keepFromSeq !== undefined && item.seq! >= options.keepFromSeq;
    if (!protectedItem && kept + tokens > options.keepTokens) break;
    kept += tokens;
    cut -= 1;
  }
  // Each output with the call it answers, by place (answeredCalls).
  const pairs = answeredCalls(stored);
  const answered = new Set(pairs.values());
  const splits = (at: number): number | undefined => {
    for (const [output, callAt] of pairs) if (callAt < at && output >= at) return callAt;
    return undefined;
  };
  // The first place at or after `at` that splits no pair.
  const forwardFrom = (at: number): number => {
    let forward = at;
    for (let moved = true; moved; ) {
      moved = false;
      for (const [output, callAt] of pairs) {
        if (callAt < forward && output >= forward) {
          forward = output + 1;
          moved = true;
        }
      }
    }
    return forward;
  };
  const walked = cut;
  // Move the cut back until no call before it has its output at or after it.
  for (let callAt = splits(cut); callAt !== undefined; callAt = splits(cut)) cut = callAt;
  const protectedIndex =
    options.keepFromSeq === undefined ? stored.length : stored.findIndex((item) => item.seq! >= options.keepFromSeq!);
  const keptFrom = protectedIndex < 0 ? stored.length : protectedIndex;
  if (options.maxKeptTokens !== undefined && cut < walked) {
    let keptTokens = kept;
    for (let index = cut; index < walked; index++) keptTokens += tokensAt(index);
    const forward = forwardFrom(walked);
    if (keptTokens > options.maxKeptTokens && forward <= keptFrom) cut = forward;
  }
  const earliestIndex =
    options.earliestStartSeq === undefined ? 0 : stored.findIndex((item) => item.seq! >= options.earliestStartSeq!);
  if (cut < (earliestIndex < 0 ? stored.length : earliestIndex)) {
    // Start at the earliest allowed item instead, moved forward past any pair it would split.
    const forward = forwardFrom(earliestIndex < 0 ? stored.length : earliestIndex);
    if (forward <= keptFrom) cut = forward;
  }
  if (cut <= 0) return null;
  const summarized = stored.slice(0, cut);
  const interrupted = summarized.filter(
    (item, index): item is PromptFunctionCallItem => item.type === 'function_call' && !answered.has(index),
  );
  const next = stored[cut];
  const lastSeq = summarized[summarized.length - 1]!.seq!;
  return { startSeq: next ? next.seq! : lastSeq + 1, summarized, interrupted, firstSeq: summarized[0]!.seq!, lastSeq };
}

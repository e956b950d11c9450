import type { PromptItem, Tool } from '../items.ts';
import type { OverflowBoundary } from '../session/records.ts';
import type { TokenBudget } from '../tokens/model-limits.ts';
import { checkPromptFits } from './check-prompt-fits.ts';
import { truncatePrompt, type PromptBoundary, type Truncation } from './truncate-prompt.ts';

/**
 * The share of the prompt limit the overflow safety net drops down to when a prompt no longer
 * fits. Each move of the boundary costs one uncached prompt (about this share of the limit);
 * the room it leaves lasts (1 - ratio) of the limit of growth. 0.6 keeps most of the context
 * while a 32k window with 2 KB tool outputs moves it every few dozen turns (docs/CONFIGURATION.md, "When the
 * window is full").
 */
export const OVERFLOW_TARGET_RATIO = 0.6;

/** `context.overflow_dropped`: what the safety net left out of this prompt, and its boundary. */
export type OverflowDropped = Truncation & PromptBoundary & { moved: boolean };

export interface FitOptions {
  /** The request's option: `auto` drops just enough (OpenAI's semantics), `disabled` never drops. */
  truncation: 'auto' | 'disabled' | undefined;
  /** `compact` is in the list: compaction keeps the window, so no safety net by default. */
  compacting: boolean;
  /** The session's stored boundary (null: none). */
  boundary: PromptBoundary | null;
  /** The turn: its number (stored with a moved boundary) and its first input seq. */
  turn: number;
  keepFromSeq: number | undefined;
}

/** Whether the overflow safety net fits a turn's prompt: a known window, no `truncation`, no compaction. */
export function usesSafetyNet(budget: TokenBudget, options: Pick<FitOptions, 'truncation' | 'compacting'>): boolean {
  return Number.isFinite(budget.promptLimit) && options.truncation === undefined && !options.compacting;
}

interface Built {
  prepared: { items: PromptItem[] };
  hydrated: PromptItem[];
  cacheBreakpoint?: number | undefined;
}

/**
 * The prompt-fitting step of a stored turn, for a model with a known window:
 * - `truncation: "auto"`: the oldest items go until the prompt fits, this turn only;
 * - no `truncation` and no `compact` in the list: the overflow safety net. The items behind
 *   the session's boundary stay out; when the prompt still does not fit, the oldest tool
 *   pairs, then the oldest messages outside the newest turn go, down to
 *   OVERFLOW_TARGET_RATIO of the limit, and the boundary moves there (`moved`: store it), so
 *   later prompts start at the same place and their prefix stays cache-stable (later turns
 *   read their history from it: lib/turn/turn-prompt.ts `promptStart`);
 * - otherwise nothing is dropped.
 * A prompt that still does not fit is ContextTooLargeError (with the safety net: when the
 * newest turn alone, with the instructions and tools, does not fit).
 */
export function fitPrompt<Prompt extends Built>(
  built: Prompt,
  tools: readonly Tool[],
  budget: TokenBudget,
  options: FitOptions,
): {
  built: Prompt;
  promptTokens: number | undefined;
  context: { truncation?: Truncation; overflow_dropped?: OverflowDropped };
  moved?: OverflowBoundary;
} {
  if (!Number.isFinite(budget.promptLimit)) return { built, promptTokens: undefined, context: {} };
  const safetyNet = usesSafetyNet(budget, options);
  if (options.truncation !== 'auto' && !safetyNet)
    return { built, promptTokens: checkPromptFits(built.hydrated, tools, budget), context: {} };
  // Both keep the newest turn from its input on: in a tool loop (an output as the input) the calls
  // after the last user message may go, as with `truncation: "auto"` on OpenAI.
  const keep = options.keepFromSeq !== undefined ? { keepFromSeq: options.keepFromSeq } : {};
  const cut = truncatePrompt(
    built.hydrated,
    tools,
    budget,
    built.cacheBreakpoint,
    safetyNet
      ? { target: Math.floor(budget.promptLimit * OVERFLOW_TARGET_RATIO), boundary: options.boundary, ...keep }
      : keep,
  );
  const boundary = cut.boundary ?? null;
  const moved =
    boundary &&
    (boundary.tool_start_seq !== options.boundary?.tool_start_seq ||
      boundary.message_start_seq !== options.boundary?.message_start_seq)
      ? { ...boundary, turn: options.turn }
      : undefined;
  if (!cut.omitted) return { built, promptTokens: cut.promptTokens, context: {}, ...(moved ? { moved } : {}) };
  const { cacheBreakpoint: _previous, ...rest } = built;
  const fitted = {
    ...rest,
    prepared: { ...built.prepared, items: withoutSeqs(built.prepared.items, cut.omitted) },
    hydrated: cut.prompt,
    ...(cut.cacheBreakpoint !== undefined ? { cacheBreakpoint: cut.cacheBreakpoint } : {}),
  } as Prompt;
  // Only the messages behind the stored boundary's message start left out: nothing it counts.
  if (!cut.truncation)
    return { built: fitted, promptTokens: cut.promptTokens, context: {}, ...(moved ? { moved } : {}) };
  const context =
    safetyNet && boundary
      ? {
          overflow_dropped: {
            ...cut.truncation,
            tool_start_seq: boundary.tool_start_seq,
            message_start_seq: boundary.message_start_seq,
            moved: moved !== undefined,
          },
        }
      : { truncation: cut.truncation };
  return { built: fitted, promptTokens: cut.truncation.prompt_tokens, context, ...(moved ? { moved } : {}) };
}

/**
 * `items` without those whose seq is in `gone`; items without a seq stay. One merge walk while
 * the items' seqs and `gone` ascend, as a prompt's and a truncation's `dropped_seqs` do (the
 * safety net's drop on a warm turn names hundreds of them), a set otherwise.
 */
export function withoutSeqs(items: readonly PromptItem[], gone: readonly number[]): PromptItem[] {
  const bySet = () => {
    const dropped = new Set(gone);
    return items.filter((item) => item.seq === undefined || !dropped.has(item.seq));
  };
  for (let index = 1; index < gone.length; index++) if (gone[index - 1]! > gone[index]!) return bySet();
  const kept: PromptItem[] = [];
  let next = 0;
  let last = Number.NEGATIVE_INFINITY;
  for (const item of items) {
    const seq = item.seq;
    if (seq === undefined) {
      kept.push(item);
      continue;
    }
    if (seq < last) return bySet();
    last = seq;
    while (next < gone.length && gone[next]! < seq) next += 1;
    if (gone[next] !== seq) kept.push(item);
  }
  return kept;
}

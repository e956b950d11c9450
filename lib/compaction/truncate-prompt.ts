import { z } from 'zod';
import type { PromptItem, Tool } from '../items.ts';
import type { TokenBudget } from '../tokens/model-limits.ts';
import { countItemTokens, countPromptTokens } from '../tokens/token-counter.ts';
import { checkPromptFits } from './check-prompt-fits.ts';

/** What `truncation: "auto"` dropped from a prompt to make it fit. */
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
 * OpenAI's `truncation: "auto"` on a prepared prompt: when it needs more than the budget's
 * prompt limit, drop the oldest tool pairs (a call with its outputs), then the oldest
 * messages, until it fits. The leading system messages (the instructions) and the newest
 * user turn (from the last user message on) are never dropped; when the prompt still does
 * not fit, ContextTooLargeError as without truncation. `cacheBreakpoint` moves with the
 * items before it.
 */
export function truncatePrompt(
  prompt: readonly PromptItem[],
  tools: readonly Tool[],
  budget: TokenBudget,
  cacheBreakpoint?: number,
): { prompt: PromptItem[]; cacheBreakpoint?: number; truncation?: Truncation } {
  const before = countPromptTokens(prompt, tools, budget.counter);
  const kept = (): { prompt: PromptItem[]; cacheBreakpoint?: number } => ({
    prompt: [...prompt],
    ...(cacheBreakpoint !== undefined ? { cacheBreakpoint } : {}),
  });
  if (before <= budget.promptLimit) return kept();
  let first = 0;
  while (
    first < prompt.length &&
    prompt[first]!.type === 'message' &&
    (prompt[first] as { role: string }).role === 'system'
  )
    first += 1;
  const lastUser = prompt.findLastIndex(
    (item) => item.type === 'message' && item.role === 'user' && item.synthetic === undefined,
  );
  const end = Math.max(lastUser, first);
  const dropped = new Set<number>();
  let tokens = before;
  const drop = (indexes: number[]) => {
    for (const index of indexes) {
      dropped.add(index);
      tokens -= countItemTokens(prompt[index]!, budget.counter);
    }
  };
  let pairs = 0;
  for (let index = first; index < end && tokens > budget.promptLimit; index += 1) {
    const item = prompt[index]!;
    if (item.type !== 'function_call') continue;
    const outputs = prompt.flatMap((other, at) =>
      other.type === 'function_call_output' && other.call_id === item.call_id ? [at] : [],
    );
    // A call whose output is in the newest turn stays with it.
    if (outputs.some((at) => at >= end)) continue;
    drop([index, ...outputs]);
    pairs += 1;
  }
  let messages = 0;
  for (let index = first; index < end && tokens > budget.promptLimit; index += 1) {
    if (dropped.has(index) || prompt[index]!.type !== 'message') continue;
    drop([index]);
    messages += 1;
  }
  const result = prompt.filter((_, index) => !dropped.has(index));
  const promptTokens = checkPromptFits(result, tools, budget);
  const shifted =
    cacheBreakpoint === undefined
      ? undefined
      : cacheBreakpoint - [...dropped].filter((index) => index <= cacheBreakpoint).length;
  return {
    prompt: result,
    ...(shifted !== undefined && shifted >= 0 ? { cacheBreakpoint: shifted } : {}),
    truncation: {
      tool_pairs: pairs,
      messages,
      dropped_seqs: [...dropped]
        .sort((a, b) => a - b)
        .flatMap((index) => (prompt[index]!.seq !== undefined ? [prompt[index]!.seq!] : [])),
      prompt_tokens_before: before,
      prompt_tokens: promptTokens,
    },
  };
}

import type { PromptItem, Tool } from '../items.ts';
import { ContextTooLargeError } from '../errors.ts';
import type { TokenBudget } from '../tokens/model-limits.ts';
import { countItemTokens, countPromptTokens } from '../tokens/token-counter.ts';

/**
 * Throws ContextTooLargeError (naming the largest item) when the prompt needs more than the
 * budget's prompt limit; returns the prompt's tokens otherwise. An infinite limit (echo,
 * unconfigured) never refuses.
 */
export function checkPromptFits(prompt: readonly PromptItem[], tools: readonly Tool[], budget: TokenBudget): number {
  const tokens = countPromptTokens(prompt, tools, budget.counter);
  if (tokens <= budget.promptLimit) return tokens;
  let largest = { index: 0, seq: null as number | null, tokens: -1 };
  prompt.forEach((item, index) => {
    const itemTokens = countItemTokens(item, budget.counter);
    if (itemTokens > largest.tokens) largest = { index, seq: item.seq ?? null, tokens: itemTokens };
  });
  throw new ContextTooLargeError({
    prompt_tokens: tokens,
    prompt_limit: budget.promptLimit,
    context_limit: budget.contextLimit,
    response_reserve: budget.responseReserve,
    item: largest,
  });
}

import type { PromptItem, Tool } from '../items.ts';
import { TailgateError } from '../errors.ts';
import type { TokenBudget } from '../tokens/model-limits.ts';
import { countToolTokens, promptItemTokens } from '../tokens/token-counter.ts';

/**
 * Throws ContextTooLargeError (naming the largest item) when the prompt needs more than the
 * budget's prompt limit; returns the prompt's tokens otherwise. An infinite limit (echo,
 * unconfigured) never refuses.
 */
export function checkPromptFits(prompt: readonly PromptItem[], tools: readonly Tool[], budget: TokenBudget): number {
  const itemTokens = promptItemTokens(prompt, budget.counter);
  const tokens = itemTokens.reduce((sum, each) => sum + each, countToolTokens(tools, budget.counter));
  if (tokens <= budget.promptLimit) return tokens;
  let largest = { index: 0, seq: null as number | null, tokens: -1 };
  prompt.forEach((item, index) => {
    if (itemTokens[index]! > largest.tokens) largest = { index, seq: item.seq ?? null, tokens: itemTokens[index]! };
  });
  throw new ContextTooLargeError({
    prompt_tokens: tokens,
    prompt_limit: budget.promptLimit,
    context_limit: budget.contextLimit,
    response_reserve: budget.responseReserve,
    item: largest,
  });
}

/**
 * The prompt exceeds the model's window even after every strategy and compaction (one
 * enormous item, say): the turn is refused instead of sending a request that must fail.
 * `details` names the largest item (its seq, or its index in the prompt when synthetic).
 */
export class ContextTooLargeError extends TailgateError {
  constructor(details: {
    prompt_tokens: number;
    prompt_limit: number;
    context_limit: number;
    response_reserve: number;
    item: { index: number; seq: number | null; tokens: number };
  }) {
    const { item, prompt_limit: limit } = details;
    const which = item.seq !== null ? `item seq ${item.seq}` : `prompt item ${item.index}`;
    const window = `context_limit ${details.context_limit} - response_reserve ${details.response_reserve}`;
    // A reserve at or above the window (max_output_tokens raises it) leaves no room at all.
    const room = limit > 0 ? `more than the ${limit} the model can take (${window})` : `but ${window} leaves none`;
    // An empty prompt (its tools alone) has no largest item.
    const largest = item.tokens >= 0 ? `; the largest is ${which} (${item.tokens} tokens)` : '';
    super('context_too_large', `the prompt needs ${details.prompt_tokens} tokens, ${room}${largest}`, details);
    this.name = 'ContextTooLargeError';
  }
}

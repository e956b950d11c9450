import { outputLength, type PromptItem, reasoningText, type ReasoningItem, type Tool, unchanging } from '../items.ts';
import { contentText } from '../content.ts';
import { loopReasoning } from '../models/reasoning-parts.ts';
import { type ImageTokenRule, mediaTokens } from './media-tokens.ts';

/**
 * Counts the tokens of a text for one model family. A real tokenizer where one fits the
 * model (gpt-tokenizer's BPE ranks, injected by the runtime entry because the ranks are too
 * large for the Workers bundle), the {@link approximateTokenCounter} elsewhere.
 */
export interface TokenCounter {
  /** The encoding (`o200k_base`, `cl100k_base`) or `approximate`. */
  readonly name: string;
  /**
   * The tokens of `text`: a function of `text` alone (no `this`, no state), since counts are
   * kept per function (`countItemTokens`).
   */
  readonly count: (text: string) => number;
  /** How the model's provider counts images (lib/tokens/media-tokens.ts); Anthropic's when absent. */
  readonly images?: ImageTokenRule;
}

/** The BPE encodings a runtime may provide (gpt-tokenizer's module names). */
export type TokenEncoding = 'o200k_base' | 'cl100k_base';

/** Counting functions by encoding, as a runtime entry provides them. */
export type TokenEncoders = Partial<Record<TokenEncoding, (text: string) => number>>;

/** Characters per token of the approximation: about 4 for English text and code in BPE vocabularies. */
export const APPROXIMATE_CHARACTERS_PER_TOKEN = 4;

/**
 * The approximation used where no tokenizer fits (Anthropic, Workers AI, echo, and every
 * model on Workers): ceil(UTF-16 length / 4). It over-counts dense non-Latin text less than
 * it under-counts it, so budgets leave the response reserve and the trigger ratio as margin.
 *
 * @example approximateTokenCounter.count('hello world!') // 3
 */
export const approximateTokenCounter: TokenCounter = {
  name: 'approximate',
  count: (text) => Math.ceil(text.length / APPROXIMATE_CHARACTERS_PER_TOKEN),
};

/** Tokens a chat format spends around each item (role markers, separators): a fixed 4. */
export const ITEM_OVERHEAD_TOKENS = 4;

/** The text of an item as a model is sent it. */
export function itemText(item: PromptItem): string {
  if (item.type === 'message') return contentText(item.content);
  if (item.type === 'function_call') return `${item.name}(${item.arguments})`;
  return contentText(item.output);
}

/**
 * The counts of unchanging items (lib/items.ts `unchanging`), by counting function and image
 * rule (what a count depends on beside the item; a turn makes its counter anew, but with the
 * same function). A turn under `context_limit` counts its whole prompt, mostly the same frozen
 * items as the turn before (the view and record caches keep them), so each is counted once
 * per process, not once a turn: with a BPE counter (gpt-tokenizer's o200k), a 600 KB prompt
 * took about 17 ms a turn to count whole, and 0.1 ms so (bench/FINDINGS.md). Not for the
 * approximation, which counts faster than the lookups.
 */
const keptCounts = new WeakMap<TokenCounter['count'], Map<TokenCounter['images'], WeakMap<PromptItem, number>>>();

/**
 * Tokens of one prompt item, overhead included. An out-of-line output not fetched yet is
 * approximated from its length (its text is not at hand).
 */
export function countItemTokens(item: PromptItem, counter: TokenCounter): number {
  // The approximation costs less than a lookup (26 against 64 us for 1,700 items).
  if (counter.count === approximateTokenCounter.count || !unchanging(item)) return itemTokens(item, counter);
  let byRule = keptCounts.get(counter.count);
  if (!byRule) {
    byRule = new Map();
    keptCounts.set(counter.count, byRule);
  }
  let kept = byRule.get(counter.images);
  if (!kept) {
    kept = new WeakMap();
    byRule.set(counter.images, kept);
  }
  let tokens = kept.get(item);
  if (tokens === undefined) {
    tokens = itemTokens(item, counter);
    kept.set(item, tokens);
  }
  return tokens;
}

function itemTokens(item: PromptItem, counter: TokenCounter): number {
  if (item.type === 'function_call_output' && item.output_ref && item.output === '') {
    return (
      ITEM_OVERHEAD_TOKENS +
      approximateTokenCounter.count(item.output_ref.head) +
      Math.ceil(Math.max(0, outputLength(item) - item.output_ref.head.length) / APPROXIMATE_CHARACTERS_PER_TOKEN)
    );
  }
  const media =
    item.type === 'function_call'
      ? 0
      : mediaTokens(item.type === 'message' ? item.content : item.output, counter.images);
  return ITEM_OVERHEAD_TOKENS + counter.count(itemText(item)) + media;
}

/**
 * Tokens of each item of a prompt as it is sent: countItemTokens, and for the items of the
 * current tool loop the reasoning the provider gets with them (`loopReasoning`): each block's
 * text, or for one without (Anthropic's redacted thinking) its opaque payload, approximated.
 */
export function promptItemTokens(prompt: readonly PromptItem[], counter: TokenCounter): number[] {
  const sent = loopReasoning(prompt);
  return prompt.map((item, index) => countItemTokens(item, counter) + reasoningTokens(sent.get(index), counter));
}

/** Tokens of reasoning sent with an item (promptItemTokens). */
export function reasoningTokens(reasoning: readonly ReasoningItem[] | undefined, counter: TokenCounter): number {
  let total = 0;
  for (const item of reasoning ?? []) {
    const text = reasoningText(item);
    total += text !== '' ? counter.count(text) : approximateTokenCounter.count(item.encrypted_content ?? '');
  }
  return total;
}

/** Tokens of the tools offered (their JSON), as countPromptTokens counts them. */
export function countToolTokens(tools: readonly Tool[], counter: TokenCounter): number {
  return tools.length > 0 ? counter.count(JSON.stringify(tools)) : 0;
}

/**
 * Tokens of a prepared prompt: every item (text plus a fixed overhead, and the reasoning the
 * current tool loop is sent with: promptItemTokens) and the tools offered (their JSON). What
 * the turn compares with the context limit; the same for every runtime given the same counter.
 *
 * @example countPromptTokens([{ type: 'message', role: 'user', content: 'hello world!' }], [], approximateTokenCounter)
 * // 7
 */
export function countPromptTokens(
  prompt: readonly PromptItem[],
  tools: readonly Tool[],
  counter: TokenCounter,
): number {
  let total = countToolTokens(tools, counter);
  for (const tokens of promptItemTokens(prompt, counter)) total += tokens;
  return total;
}

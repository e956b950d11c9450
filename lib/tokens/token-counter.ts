import { outputLength, type PromptItem, reasoningText, type ReasoningItem, type Tool, unchanging } from '../items.ts';
import { type Content, type ContentPart, contentText, describePart } from '../content.ts';
import { adjacentAnswers } from '../models/convert-to-model-messages.ts';
import { type MediaSupport, partText, sentAsText } from '../models/media-parts.ts';
import { loopReasoning } from '../models/reasoning-parts.ts';
import { sentAfter } from '../models/tool-media.ts';
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
  /**
   * The characters a token of an approximation: a text not at hand (an out-of-line tool output
   * not fetched yet) is counted by it; 4 when absent.
   */
  readonly charactersPerToken?: number;
  /** How the model's provider counts images (lib/tokens/media-tokens.ts); Anthropic's when absent. */
  readonly images?: ImageTokenRule;
  /**
   * What the model takes as images and files (lib/models/media-parts.ts `mediaSupport`): one
   * it gets as a text placeholder (`sentAsText`) counts as that text, not as media. When
   * absent, every image and file counts as media.
   */
  readonly media?: MediaSupport;
}

/** The BPE encodings a runtime may provide (gpt-tokenizer's module names). */
export type TokenEncoding = 'o200k_base' | 'cl100k_base';

/** Counting functions by encoding, as a runtime entry provides them. */
export type TokenEncoders = Partial<Record<TokenEncoding, (text: string) => number>>;

/** Characters per token of the approximation: about 4 for English text and code in BPE vocabularies. */
export const APPROXIMATE_CHARACTERS_PER_TOKEN = 4;

/** An approximation of `charactersPerToken` characters a token: ceil(UTF-16 length / it). */
function approximation(charactersPerToken: number): TokenCounter {
  return { name: 'approximate', count: (text) => Math.ceil(text.length / charactersPerToken), charactersPerToken };
}

/**
 * The approximation used where no tokenizer fits (Workers AI, echo, and every model on Workers
 * but Claude): ceil(UTF-16 length / 4). It over-counts dense non-Latin text less than it
 * under-counts it, so budgets leave the response reserve and the trigger ratio as margin.
 *
 * @example approximateTokenCounter.count('hello world!') // 3
 */
export const approximateTokenCounter = approximation(APPROXIMATE_CHARACTERS_PER_TOKEN);

/**
 * Characters per token of Claude's estimate: 3. Claude's tokenizers take about 3.5 characters a
 * token of English and fewer of code and JSON, and newer models' tokenizer up to 35% more tokens
 * of the same text; 4 would undercount them, and a prompt fitted near the window would be
 * refused ("prompt is too long").
 */
export const CLAUDE_CHARACTERS_PER_TOKEN = 3;

/**
 * The approximation of Claude models (`claude-` names, lib/tokens/model-limits.ts), whose
 * tokenizer is not public: ceil(UTF-16 length / 3), an estimate over rather than under theirs.
 *
 * @example claudeTokenCounter.count('hello world!') // 4
 */
export const claudeTokenCounter = approximation(CLAUDE_CHARACTERS_PER_TOKEN);

/** Tokens a chat format spends around each item (role markers, separators): a fixed 4. */
export const ITEM_OVERHEAD_TOKENS = 4;

/** The text of an item as a model is sent it. */
export function itemText(item: PromptItem): string {
  if (item.type === 'message') return contentText(item.content);
  if (item.type === 'function_call') return `${item.name}(${item.arguments})`;
  return contentText(item.output);
}

/**
 * The counts of unchanging items (lib/items.ts `unchanging`), by counting function and by
 * what else a count depends on (`countKey`: the image rule, the model's media support, whether
 * a tool output with media goes as user text). A turn makes its counter anew, but with the
 * same function. A turn under `context_limit` counts its whole prompt, mostly the same frozen
 * items as the turn before (the view and record caches keep them), so each is counted once
 * per process, not once a turn: with a BPE counter (gpt-tokenizer's o200k), a 600 KB prompt
 * took about 17 ms a turn to count whole, and 0.1 ms so (bench/FINDINGS.md). Not for the
 * approximation, which counts faster than the lookups.
 */
const keptCounts = new WeakMap<TokenCounter['count'], Map<string, WeakMap<PromptItem, number>>>();

/** The kept counts of a counter (and of its tool outputs sent as user text), found once per counter. */
const countersKept = new WeakMap<
  TokenCounter,
  { results: WeakMap<PromptItem, number>; asUser?: WeakMap<PromptItem, number> }
>();

function countKey(counter: TokenCounter, asUser: boolean): string {
  const media = counter.media;
  const support = media
    ? (media.toolResultMedia === 'after' ? 'a' : Number(media.toolResultMedia)) +
      [media.fileUrls, media.imageBytesOnly, media.assistantMedia, media.textOnly].map(Number).join('') +
      (media.maxImageSide ?? '') +
      (media.maxImageBytes ? ` ${media.maxImageBytes}` : '')
    : '';
  return `${counter.images ?? 'anthropic'} ${support}${asUser ? ' user' : ''}`;
}

function keptOf(counter: TokenCounter, asUser: boolean): WeakMap<PromptItem, number> {
  let byKey = keptCounts.get(counter.count);
  if (!byKey) {
    byKey = new Map();
    keptCounts.set(counter.count, byKey);
  }
  const key = countKey(counter, asUser);
  let kept = byKey.get(key);
  if (!kept) {
    kept = new WeakMap();
    byKey.set(key, kept);
  }
  return kept;
}

/**
 * Whether `item` is a tool output with media whose count depends on where it is sent: as a
 * tool result, where the model takes no media (placeholders), or as user text.
 */
function sentWhereCounts(item: PromptItem, counter: TokenCounter): boolean {
  return (
    counter.media !== undefined &&
    !counter.media.toolResultMedia &&
    item.type === 'function_call_output' &&
    typeof item.output !== 'string' &&
    item.output.some((part) => part.type !== 'input_text')
  );
}

/**
 * Tokens of one prompt item, overhead included. An out-of-line output not fetched yet is
 * approximated from its length (its text is not at hand). `toolResult`: whether a tool output
 * goes as a tool result (lib/models/convert-to-model-messages.ts `adjacentAnswers`), asked
 * only of one with media where the model takes none in tool results; so by default.
 */
export function countItemTokens(
  item: PromptItem,
  counter: TokenCounter,
  toolResult: () => boolean = () => true,
): number {
  return countSentItem(item, counter, sentWhereCounts(item, counter) && !toolResult());
}

/** countItemTokens of an item sent as user text (`asUser`) or not. */
function countSentItem(item: PromptItem, counter: TokenCounter, asUser: boolean): number {
  // An approximation (its characters a token given) costs less than a lookup (26 against 64 us for 1,700 items).
  if (counter.charactersPerToken !== undefined || !unchanging(item)) return itemTokens(item, counter, asUser);
  let found = countersKept.get(counter);
  if (!found) {
    found = { results: keptOf(counter, false) };
    countersKept.set(counter, found);
  }
  if (asUser) found.asUser ??= keptOf(counter, true);
  const kept = asUser && found.asUser ? found.asUser : found.results;
  let tokens = kept.get(item);
  if (tokens === undefined) {
    tokens = itemTokens(item, counter, asUser);
    kept.set(item, tokens);
  }
  return tokens;
}

function itemTokens(item: PromptItem, counter: TokenCounter, asUser: boolean): number {
  if (item.type === 'function_call_output' && item.output_ref && item.output === '') {
    const perToken = counter.charactersPerToken ?? APPROXIMATE_CHARACTERS_PER_TOKEN;
    const { head } = item.output_ref;
    return (
      ITEM_OVERHEAD_TOKENS +
      Math.ceil(head.length / perToken) +
      Math.ceil(Math.max(0, outputLength(item) - head.length) / perToken)
    );
  }
  if (item.type === 'function_call') return ITEM_OVERHEAD_TOKENS + counter.count(itemText(item));
  const content = item.type === 'message' ? item.content : item.output;
  if (typeof content === 'string' || !counter.media) {
    return ITEM_OVERHEAD_TOKENS + counter.count(itemText(item)) + mediaTokens(content, counter.images);
  }
  return ITEM_OVERHEAD_TOKENS + sentTokens(content, item, counter, counter.media, asUser);
}

/**
 * Tokens of a content's parts as the model gets them: each image or file it gets as a text
 * placeholder (`sentAsText`) as that text, the rest as in `itemText` and by `mediaTokens`. A tool
 * result's sent after the tool messages (`toolResultMedia: 'after'`, lib/models/tool-media.ts) as
 * its placeholder there, and its label in the user message that carries them, whose overhead is
 * counted with each tool output that has any (a little over for a run of several).
 */
function sentTokens(
  content: Exclude<Content, string>,
  item: PromptItem,
  counter: TokenCounter,
  media: MediaSupport,
  asUser: boolean,
): number {
  const asText = sentAsText(media, item, () => !asUser);
  const after = media.toolResultMedia === 'after' && item.type === 'function_call_output' && !asUser;
  const numbers = { image: 0, file: 0 };
  const labels: string[] = [];
  const sent: ContentPart[] = [];
  const text = content.map((part) => {
    if (part.type === 'input_text') return part.text;
    if (asText(part)) return partText(part, item.seq);
    sent.push(part);
    if (!after) return describePart(part);
    const kind = part.type === 'input_image' ? 'image' : 'file';
    numbers[kind] += 1;
    const { placeholder, label } = sentAfter(kind, numbers[kind], (item as { call_id: string }).call_id);
    labels.push(label);
    return placeholder;
  });
  const carried = labels.length > 0 ? ITEM_OVERHEAD_TOKENS + counter.count(labels.join('\n')) : 0;
  return counter.count(text.join('\n')) + carried + mediaTokens(sent, counter.images);
}

/**
 * Tokens of each item of a prompt as it is sent: countItemTokens (a tool output as a tool
 * result or as user text, as `adjacentAnswers` sends it), and for the items of the
 * current tool loop the reasoning the provider gets with them (`loopReasoning`): each block's
 * text, or for one without (Anthropic's redacted thinking) its opaque payload, approximated.
 */
export function promptItemTokens(prompt: readonly PromptItem[], counter: TokenCounter): number[] {
  const sent = loopReasoning(prompt);
  // Where tool outputs go as tool results, found only when an item's count depends on it. One
  // loop with no function made per item: a warm turn counts a prompt of thousands of items.
  let results: Map<number, number> | undefined;
  const tokens: number[] = [];
  for (let index = 0; index < prompt.length; index++) {
    const item = prompt[index]!;
    let asUser = false;
    if (sentWhereCounts(item, counter)) {
      results ??= adjacentAnswers(prompt);
      asUser = !results.has(index);
    }
    const reasoning = sent.get(index);
    tokens.push(
      countSentItem(item, counter, asUser) + (reasoning === undefined ? 0 : reasoningTokens(reasoning, counter)),
    );
  }
  return tokens;
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

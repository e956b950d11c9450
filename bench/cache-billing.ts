import type { PromptItem } from '../lib/items.ts';
import { anthropicCacheBreakpoints, makesBlock } from '../lib/models/cache-breakpoints.ts';

/**
 * Input cost as the providers bill it, per model call of a simulated session, beside the
 * longest-common-prefix upper bound of bench/prompt-cache.ts. Tokens are estimated at 4
 * characters of the serialized wire JSON each (`estimateTokens`), plus, where the billing is
 * given a `mediaTokensOf`, each block's images by that rule; costs are in tokens at the
 * provider's base input price (1.0 = one uncached input token), so compare strategies within a
 * provider, not across providers.
 *
 * - Anthropic (`AnthropicBilling`): the prompt is a list of blocks (the tool definitions as one
 *   block, then one block per prompt item, the system message included). The breakpoints are
 *   where the adapter puts them (`anthropicCacheBreakpoints`, or one breakpoint at the end of the
 *   stable prefix, the placement before the sliding anchors). A call reads the longest cached
 *   prefix that ends at a breakpoint or at one of the `ANTHROPIC_LOOKBACK - 1` blocks before it,
 *   writes the prefix from there to its last breakpoint (1.25x), pays the rest at 1.0x, and
 *   caches the prefix at each breakpoint for `ANTHROPIC_CACHE_TTL_MS` (a read refreshes it). A
 *   prefix under `ANTHROPIC_MIN_TOKENS` is never cached.
 * - OpenAI (`OpenAiBilling`): automatic prefix caching. The cached part is the common prefix with
 *   the previous prompt (tool definitions first), counted in 128-token steps from 1,024 tokens,
 *   billed at `OPENAI_CACHED_MULTIPLIER`; no write premium. The previous prompt stands for every
 *   prompt still cached: an older prompt shares no longer prefix with the new one in these sessions.
 */

export const ANTHROPIC_READ_MULTIPLIER = 0.1;
export const ANTHROPIC_WRITE_MULTIPLIER = 1.25;
export const ANTHROPIC_LOOKBACK = 20;
export const ANTHROPIC_MIN_TOKENS = 1_024;
export const ANTHROPIC_CACHE_TTL_MS = 5 * 60_000;
/**
 * OpenAI's cached-input price relative to input. It depends on the model (OpenAI's prompt
 * caching guide: "up to 90%" off); 0.5x is the GPT-4o rate, the least favourable one.
 */
export const OPENAI_CACHED_MULTIPLIER = 0.5;
export const OPENAI_MIN_TOKENS = 1_024;
export const OPENAI_STEP_TOKENS = 128;
/** Assumed time between two model calls of the tool loop (generation plus the tool run). */
export const TURN_INTERVAL_MS = 30_000;

export const estimateTokens = (characters: number): number => Math.ceil(characters / 4);

/** One model call as billed. */
export interface BilledCall {
  tokens: number;
  read: number;
  written: number;
  /** In tokens at the base input price. */
  cost: number;
}

export interface BillingTotals {
  calls: number;
  tokens: number;
  read: number;
  written: number;
  cost: number;
  /** Share of all input tokens read from the cache. */
  readShare: number;
  /** Cost over the cost with no cache at all (1.0 x tokens). */
  costRatio: number;
}

export function billingTotals(calls: readonly BilledCall[]): BillingTotals {
  const sum = (pick: (call: BilledCall) => number) => calls.reduce((total, call) => total + pick(call), 0);
  const tokens = sum((call) => call.tokens);
  const cost = sum((call) => call.cost);
  return {
    calls: calls.length,
    tokens,
    read: sum((call) => call.read),
    written: sum((call) => call.written),
    cost,
    readShare: tokens === 0 ? 0 : sum((call) => call.read) / tokens,
    costRatio: tokens === 0 ? 0 : cost / tokens,
  };
}

/** The wire fields of an item in a fixed key order, as the provider receives them. */
export function wireItem(item: PromptItem): unknown {
  if (item.type === 'message') return { type: 'message', role: item.role, content: item.content };
  if (item.type === 'function_call')
    return { type: 'function_call', call_id: item.call_id, name: item.name, arguments: item.arguments };
  return { type: 'function_call_output', call_id: item.call_id, output: item.output };
}

/** Where the Anthropic model puts its breakpoints. */
export type AnthropicPlacement = 'adapter' | 'stable_end';

/**
 * Gives every distinct block an id and every distinct prefix (a chain of block ids) an id, so
 * two prompts share a prefix up to a block exactly when their prefix ids there are equal.
 */
class PrefixIds {
  private readonly byItem = new WeakMap<PromptItem, { id: number; tokens: number }>();
  private readonly byText = new Map<string, number>();
  private readonly chains = new Map<string, number>();
  private readonly mediaTokensOf: (item: PromptItem) => number;

  constructor(mediaTokensOf: (item: PromptItem) => number) {
    this.mediaTokensOf = mediaTokensOf;
  }

  block(item: PromptItem): { id: number; tokens: number } {
    const known = this.byItem.get(item);
    if (known) return known;
    const text = JSON.stringify(wireItem(item));
    let id = this.byText.get(text);
    if (id === undefined) {
      id = this.byText.size + 1;
      this.byText.set(text, id);
    }
    const block = { id, tokens: estimateTokens(text.length) + this.mediaTokensOf(item) };
    this.byItem.set(item, block);
    return block;
  }

  chain(previous: number, block: number): number {
    const key = `${previous},${block}`;
    let id = this.chains.get(key);
    if (id === undefined) {
      id = this.chains.size + 1;
      this.chains.set(key, id);
    }
    return id;
  }
}

export class AnthropicBilling {
  readonly calls: BilledCall[] = [];
  private readonly ids: PrefixIds;
  /** Prefix id -> when its cache entry expires. */
  private readonly entries = new Map<number, number>();
  private now = 0;

  private readonly placement: AnthropicPlacement;
  private readonly toolTokens: number;

  /** `mediaTokensOf`: the tokens of an item's images and files, beside its text (none by default). */
  constructor(
    placement: AnthropicPlacement,
    toolTokens: number,
    mediaTokensOf: (item: PromptItem) => number = () => 0,
  ) {
    this.placement = placement;
    this.toolTokens = toolTokens;
    this.ids = new PrefixIds(mediaTokensOf);
  }

  /** Bills one model call; `stableEnd` is the request's `cacheBreakpoint`. */
  bill(prompt: readonly PromptItem[], stableEnd: number | undefined): BilledCall {
    const hasTools = this.toolTokens > 0;
    const prefixIds: number[] = [];
    const prefixTokens: number[] = [];
    const blockOfItem = new Map<number, number>();
    let chain = 0;
    let tokens = 0;
    const push = (id: number, blockTokens: number) => {
      chain = this.ids.chain(chain, id);
      tokens += blockTokens;
      prefixIds.push(chain);
      prefixTokens.push(tokens);
    };
    if (hasTools) push(0, this.toolTokens);
    for (const [index, item] of prompt.entries()) {
      if (!makesBlock(item)) continue;
      const block = this.ids.block(item);
      blockOfItem.set(index, prefixIds.length);
      push(block.id, block.tokens);
    }
    const breakpoints = this.breakpoints(prompt, hasTools, stableEnd, blockOfItem);
    const live = (end: number) => (this.entries.get(prefixIds[end]!) ?? -1) > this.now;
    let readEnd = -1;
    for (const breakpoint of breakpoints) {
      for (let end = breakpoint; end >= Math.max(0, breakpoint - ANTHROPIC_LOOKBACK + 1); end--) {
        if (live(end)) {
          readEnd = Math.max(readEnd, end);
          break;
        }
      }
    }
    const read = readEnd < 0 ? 0 : prefixTokens[readEnd]!;
    const cacheable = breakpoints.filter((end) => prefixTokens[end]! >= ANTHROPIC_MIN_TOKENS);
    const lastWrite = cacheable.at(-1);
    const written = lastWrite === undefined ? 0 : Math.max(0, prefixTokens[lastWrite]! - read);
    const expires = this.now + ANTHROPIC_CACHE_TTL_MS;
    if (readEnd >= 0) this.entries.set(prefixIds[readEnd]!, expires);
    for (const end of cacheable) this.entries.set(prefixIds[end]!, expires);
    this.now += TURN_INTERVAL_MS;
    const call = {
      tokens,
      read,
      written,
      cost: ANTHROPIC_READ_MULTIPLIER * read + ANTHROPIC_WRITE_MULTIPLIER * written + (tokens - read - written),
    };
    this.calls.push(call);
    return call;
  }

  /** Block indices (ascending) carrying a breakpoint. */
  private breakpoints(
    prompt: readonly PromptItem[],
    hasTools: boolean,
    stableEnd: number | undefined,
    blockOfItem: Map<number, number>,
  ): number[] {
    if (this.placement === 'stable_end') {
      // The placement before the sliding anchors: one breakpoint, at the end of the stable
      // prefix or, without one, on the instructions (the first item).
      const block = blockOfItem.get(stableEnd ?? 0);
      return block === undefined ? [] : [block];
    }
    const placed = anthropicCacheBreakpoints([...prompt], hasTools, stableEnd);
    const blocks = placed.items.map((index) => blockOfItem.get(index)!);
    return hasTools ? [0, ...blocks] : blocks;
  }
}

export class OpenAiBilling {
  readonly calls: BilledCall[] = [];

  /** Bills one model call from its serialized size and its common prefix with the previous call (characters). */
  bill(characters: number, commonPrefix: number): BilledCall {
    const tokens = estimateTokens(characters);
    const common = Math.floor(commonPrefix / 4);
    const read =
      common < OPENAI_MIN_TOKENS ? 0 : Math.min(tokens, Math.floor(common / OPENAI_STEP_TOKENS) * OPENAI_STEP_TOKENS);
    const call = { tokens, read, written: 0, cost: OPENAI_CACHED_MULTIPLIER * read + (tokens - read) };
    this.calls.push(call);
    return call;
  }
}

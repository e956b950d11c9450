import type { Item, PromptItem } from '../lib/items.ts';
import type { SequencedItem } from '../lib/strategies/aggregates.ts';
import { preparePrompt, type StrategySpec } from '../lib/strategies/prepare-prompt.ts';
import { defaultStrategyConfig, type StrategyConfig } from '../lib/strategies/strategy-config.ts';
import { agentHistoryWithCalls, type AgentSessionOptions } from './agent-session.ts';
import {
  AnthropicBilling,
  billingTotals,
  estimateTokens,
  OpenAiBilling,
  wireItem,
  type BillingTotals,
} from './cache-billing.ts';
import { clearToolUsesBaseline } from './clear-tool-uses.ts';

/**
 * Prompt-cache stability: replays a simulated agent session turn by turn and, for each
 * strategy, serializes every prompt as a provider would receive it and measures how much of
 * it is a byte-identical prefix of the previous prompt (what a prompt cache can reuse).
 */

/** Anthropic's multipliers on the base input price. */
export const CACHE_READ_MULTIPLIER = 0.1;
export const CACHE_WRITE_MULTIPLIER = 1.25;

export interface CacheTurn {
  /** Bytes of the serialized prompt. */
  size: number;
  /** Longest common byte prefix with the previous turn's prompt. */
  reusable: number;
}

export interface CacheTotals {
  turns: number;
  bytesSent: number;
  bytesReusable: number;
  reusableShare: number;
  maxPromptBytes: number;
  /** Input cost with no cache, in bytes at the base price (1.0 x bytes sent). */
  costUncached: number;
  /** 0.1 x reusable + 1.25 x (sent - reusable), in bytes at the base price. */
  costCached: number;
  /** Milliseconds spent preparing all prompts (strategy CPU over the full history). */
  prepareMs: number;
}

/** The same prompts billed by each provider's matching rule (bench/cache-billing.ts). */
export interface CacheBilling {
  /** Anthropic, breakpoints as the adapter places them. */
  anthropic: BillingTotals;
  /** Anthropic, one breakpoint at the end of the stable prefix (the placement before the sliding anchors). */
  anthropicStableEnd: BillingTotals;
  openai: BillingTotals;
  meanPromptTokens: number;
  maxPromptTokens: number;
}

export interface CacheRun {
  name: string;
  label: string;
  turns: CacheTurn[];
  totals: CacheTotals;
  billing: CacheBilling;
}

export interface PromptCacheOptions {
  toolCalls?: number;
  seed?: number;
  session?: Omit<AgentSessionOptions, 'seed'>;
  /** Characters of the system instructions that open every prompt. */
  instructionsCharacters?: number;
  /** Characters of the tool definitions sent before the prompt (billing models only); default `TOOLS_CHARACTERS`. */
  toolsCharacters?: number;
  /** Only the first this many model calls of the session. */
  maxCalls?: number;
  /** The strategy configuration; default `defaultStrategyConfig()`. */
  config?: StrategyConfig;
}

/** Tool definitions of the simulated agent, about 1,000 tokens (a handful of tools with JSON schemas). */
export const TOOLS_CHARACTERS = 4_000;

export interface Candidate {
  name: string;
  label: string;
  spec: StrategySpec;
}

export const PROMPT_CACHE_CANDIDATES: readonly Candidate[] = [
  { name: 'none', label: 'none', spec: 'none' },
  { name: 'shorten_tools', label: 'shorten_tools', spec: 'shorten_tools' },
  { name: 'shorten_tools_epoch', label: 'shorten_tools_epoch', spec: 'shorten_tools_epoch' },
  {
    name: 'shorten_tools_epoch_increment',
    label: 'shorten_tools_epoch_increment (default)',
    spec: 'shorten_tools_epoch_increment',
  },
  {
    name: 'clear_tool_uses',
    label: 'baseline: Anthropic clear_tool_uses (keep 3, trigger 400k chars)',
    spec: clearToolUsesBaseline(),
  },
];

/** The agent session the simulation replays: a system message, then the generated items. */
export function simulatedSession(options: PromptCacheOptions = {}): SequencedItem[] {
  const instructions = 'You are a coding agent. '
    .repeat(Math.ceil((options.instructionsCharacters ?? 4_000) / 24))
    .slice(0, options.instructionsCharacters ?? 4_000);
  const items: Item[] = [
    { type: 'message', role: 'system', content: instructions },
    ...agentHistoryWithCalls(options.toolCalls ?? 1_000, { seed: options.seed ?? 20_261_129, ...options.session }),
  ];
  return items.map((item, index) => ({ ...item, seq: index + 1, created_at: '2026-01-01T00:00:00.000Z' }));
}

/**
 * The model calls of the session: the model is asked after every user message and after
 * every tool output (it answers with the next call or, at the end of a run, a message).
 * Returns the history length at each call.
 */
export function modelCallPoints(items: readonly Item[]): number[] {
  const points: number[] = [];
  items.forEach((item, index) => {
    if ((item.type === 'message' && item.role === 'user') || item.type === 'function_call_output')
      points.push(index + 1);
  });
  return points;
}

/**
 * The prompt as the provider sees it, as stable JSON: only the wire fields, in a fixed key
 * order (no seq, timestamps or tailgate markers).
 */
export function serializePrompt(prompt: readonly PromptItem[]): string {
  return JSON.stringify(prompt.map(wireItem));
}

/** Length of the longest common prefix of two byte arrays (native compares per chunk). */
export function commonPrefixLength(a: Uint8Array, b: Uint8Array): number {
  const length = Math.min(a.length, b.length);
  const chunk = 16_384;
  let offset = 0;
  const left = Buffer.from(a.buffer, a.byteOffset, a.byteLength);
  const right = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  while (offset + chunk <= length && left.compare(right, offset, offset + chunk, offset, offset + chunk) === 0)
    offset += chunk;
  while (offset < length && a[offset] === b[offset]) offset++;
  return offset;
}

/** Input cost in base-price bytes: cache reads at 0.1x, the rest written to the cache at 1.25x. */
export function cachedCost(turn: CacheTurn): number {
  return CACHE_READ_MULTIPLIER * turn.reusable + CACHE_WRITE_MULTIPLIER * (turn.size - turn.reusable);
}

export function simulatePromptCache(
  options: PromptCacheOptions = {},
  candidates: readonly Candidate[] = PROMPT_CACHE_CANDIDATES,
): CacheRun[] {
  const session = simulatedSession(options);
  const points = modelCallPoints(session).slice(0, options.maxCalls);
  const config = options.config ?? defaultStrategyConfig();
  const encoder = new TextEncoder();
  const toolsCharacters = options.toolsCharacters ?? TOOLS_CHARACTERS;
  return candidates.map((candidate) => {
    const turns: CacheTurn[] = [];
    let previous = new Uint8Array(0);
    let prepareMs = 0;
    const anthropic = new AnthropicBilling('adapter', estimateTokens(toolsCharacters));
    const anthropicStableEnd = new AnthropicBilling('stable_end', estimateTokens(toolsCharacters));
    const openai = new OpenAiBilling();
    for (const point of points) {
      const start = performance.now();
      const prepared = preparePrompt(session.slice(0, point), candidate.spec, { config });
      prepareMs += performance.now() - start;
      const prompt = prepared.items;
      const bytes = encoder.encode(serializePrompt(prompt));
      const reusable = commonPrefixLength(previous, bytes);
      turns.push({ size: bytes.length, reusable });
      previous = bytes;
      const stableEnd = prepared.stablePrefixLength > 0 ? prepared.stablePrefixLength - 1 : undefined;
      anthropic.bill(prompt, stableEnd);
      anthropicStableEnd.bill(prompt, stableEnd);
      // The tool definitions open every prompt, so they add to both the size and the common prefix.
      openai.bill(toolsCharacters + bytes.length, turns.length === 1 ? 0 : toolsCharacters + reusable);
    }
    const bytesSent = turns.reduce((total, turn) => total + turn.size, 0);
    const bytesReusable = turns.reduce((total, turn) => total + turn.reusable, 0);
    return {
      name: candidate.name,
      label: candidate.label,
      turns,
      totals: {
        turns: turns.length,
        bytesSent,
        bytesReusable,
        reusableShare: bytesSent === 0 ? 0 : bytesReusable / bytesSent,
        maxPromptBytes: Math.max(...turns.map((turn) => turn.size)),
        costUncached: bytesSent,
        costCached: turns.reduce((total, turn) => total + cachedCost(turn), 0),
        prepareMs,
      },
      billing: {
        anthropic: billingTotals(anthropic.calls),
        anthropicStableEnd: billingTotals(anthropicStableEnd.calls),
        openai: billingTotals(openai.calls),
        meanPromptTokens: anthropic.calls.reduce((total, call) => total + call.tokens, 0) / Math.max(1, turns.length),
        maxPromptTokens: Math.max(...anthropic.calls.map((call) => call.tokens)),
      },
    };
  });
}

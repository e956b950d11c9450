import type { MediaSupport } from '../models/media-parts.ts';
import {
  approximateTokenCounter,
  claudeTokenCounter,
  type TokenCounter,
  type TokenEncoders,
  type TokenEncoding,
} from './token-counter.ts';

/** What is known of a model family: its context window, a default response reserve, its tokenizer. */
export interface ModelFamily {
  /** Matched against the model name (the part after `provider:`), lowercased. */
  pattern: RegExp;
  contextLimit: number;
  responseReserve: number;
  encoding: TokenEncoding | null;
  /** The approximation of a family without an encoding; approximateTokenCounter when absent. */
  approximation?: TokenCounter;
}

/**
 * Known model families, first match wins. Unknown models get {@link FALLBACK_CONTEXT_LIMIT}
 * and {@link FALLBACK_RESPONSE_RESERVE}; `echo` has no window (no limit unless configured).
 */
export const MODEL_FAMILIES: readonly ModelFamily[] = [
  { pattern: /^gpt-4\.1/, contextLimit: 1_047_576, responseReserve: 32_768, encoding: 'o200k_base' },
  { pattern: /^gpt-5/, contextLimit: 400_000, responseReserve: 32_768, encoding: 'o200k_base' },
  { pattern: /^(gpt-4o|chatgpt-4o)/, contextLimit: 128_000, responseReserve: 16_384, encoding: 'o200k_base' },
  { pattern: /^o[134](-|$)/, contextLimit: 200_000, responseReserve: 32_768, encoding: 'o200k_base' },
  { pattern: /^gpt-oss/, contextLimit: 131_072, responseReserve: 16_384, encoding: 'o200k_base' },
  { pattern: /^gpt-4-(turbo|\d{4}-preview)/, contextLimit: 128_000, responseReserve: 4_096, encoding: 'cl100k_base' },
  { pattern: /^gpt-4-32k/, contextLimit: 32_768, responseReserve: 4_096, encoding: 'cl100k_base' },
  { pattern: /^gpt-4/, contextLimit: 8_192, responseReserve: 2_048, encoding: 'cl100k_base' },
  { pattern: /^gpt-3\.5/, contextLimit: 16_385, responseReserve: 4_096, encoding: 'cl100k_base' },
  {
    pattern: /^claude-/,
    contextLimit: 200_000,
    responseReserve: 16_384,
    encoding: null,
    approximation: claudeTokenCounter,
  },
];

/** The context window assumed for a model no family matches. */
export const FALLBACK_CONTEXT_LIMIT = 32_768;
/** The response reserve assumed for a model no family matches. */
export const FALLBACK_RESPONSE_RESERVE = 4_096;

/** The family of a `provider:name` id (or null: echo and unknown models). */
export function modelFamily(modelId: string): ModelFamily | null {
  const name = modelId.includes(':') ? modelId.slice(modelId.indexOf(':') + 1) : modelId;
  const lower = name.toLowerCase().replace(/^.*\//, '');
  return MODEL_FAMILIES.find((family) => family.pattern.test(lower)) ?? null;
}

/** A turn's token budget: the window, what stays free for the answer, and the counter. */
export interface TokenBudget {
  /** Tokens of the model's window; Infinity when unknown and unconfigured (echo). */
  contextLimit: number;
  responseReserve: number;
  /** contextLimit - responseReserve: a prompt above it is refused (context_too_large). */
  promptLimit: number;
  counter: TokenCounter;
}

/**
 * Resolves a turn's budget: `context_limit` and `response_reserve` from the resolved
 * strategy config (0 = the model's default), else the model family's, else the fallback
 * (echo: no limit); a default reserve is at most a quarter of the window. The response reserve
 * is at least the request's `max_output_tokens`.
 *
 * @example resolveTokenBudget('openai:gpt-4o', { context_limit: 0, response_reserve: 0 }).contextLimit // 128000
 */
export function resolveTokenBudget(
  modelId: string,
  config: { context_limit: number; response_reserve: number },
  options: { maxOutputTokens?: number; encoders?: TokenEncoders; media?: MediaSupport } = {},
): TokenBudget {
  const family = modelFamily(modelId);
  const echo = modelId === 'echo' || modelId.startsWith('echo:');
  const contextLimit =
    config.context_limit > 0
      ? config.context_limit
      : family
        ? family.contextLimit
        : echo
          ? Number.POSITIVE_INFINITY
          : FALLBACK_CONTEXT_LIMIT;
  // A default reserve takes at most a quarter of a set or unknown window, so a small
  // `context_limit` (12,000 on Claude, whose reserve is 16,384) still leaves the prompt room.
  const defaultReserve = family ? family.responseReserve : FALLBACK_RESPONSE_RESERVE;
  const baseReserve =
    config.response_reserve > 0
      ? config.response_reserve
      : Number.isFinite(contextLimit)
        ? Math.min(defaultReserve, Math.floor(contextLimit / 4))
        : 0;
  const responseReserve = Math.max(baseReserve, options.maxOutputTokens ?? 0);
  return {
    contextLimit,
    responseReserve,
    promptLimit: contextLimit - responseReserve,
    counter: tokenCounterFor(modelId, options.encoders, options.media),
  };
}

/**
 * The tokens a window of `contextLimit` leaves the answer to a prompt of `promptTokens()`
 * (estimated by the budget's counter): what a model call may ask for at most
 * (`ModelRequest.outputRoom`). Undefined, the prompt not counted, when the window has no end.
 */
export function outputRoom(contextLimit: number, promptTokens: () => number): number | undefined {
  return Number.isFinite(contextLimit) ? contextLimit - promptTokens() : undefined;
}

/**
 * The counter for a model: its family's BPE encoding when the runtime provided it, the
 * approximation otherwise (Claude's, claudeTokenCounter, for `claude-` models). The OpenAI
 * families (those with an encoding) count images by OpenAI's rule, every other model by
 * Anthropic's (lib/tokens/media-tokens.ts). With `media` (the model's, lib/models/media-parts.ts
 * `mediaSupport`), an image or file the model gets as a text placeholder counts as that text
 * (`TokenCounter.media`).
 */
export function tokenCounterFor(modelId: string, encoders: TokenEncoders = {}, media?: MediaSupport): TokenCounter {
  const family = modelFamily(modelId);
  const encoding = family?.encoding;
  const withMedia = media ? { media } : {};
  if (!encoding) {
    const approximation = family?.approximation ?? approximateTokenCounter;
    return media ? { ...approximation, ...withMedia } : approximation;
  }
  const count = encoders[encoding];
  return count
    ? { name: encoding, count, images: 'openai', ...withMedia }
    : { ...approximateTokenCounter, images: 'openai', ...withMedia };
}

import { z } from 'zod';

/**
 * What each model costs, in USD per million tokens: `input` (uncached input), `cached_input`
 * (input read from the provider's prompt cache), `cache_write` (input written to it) and
 * `output` (reasoning included). The defaults are the providers' dated list prices for the
 * models docs/CONFIGURATION.md lists ("What it cost"); the `MODEL_PRICES` setting (JSON, the
 * same shape by model id) adds entries and overrides these. A model with no entry has no known
 * price: its turns cost `null`, never 0.
 */

export const modelPriceSchema = z
  .object({
    input: z.number().nonnegative().finite(),
    /** Absent: as `input`. */
    cached_input: z.number().nonnegative().finite().optional(),
    /** Absent: as `input`. */
    cache_write: z.number().nonnegative().finite().optional(),
    output: z.number().nonnegative().finite(),
  })
  .strict();
export type ModelPrice = z.infer<typeof modelPriceSchema>;

export const modelPricesSchema = z.record(z.string().min(1).max(300), modelPriceSchema);
export type ModelPrices = z.infer<typeof modelPricesSchema>;

/** The providers' list prices as published on 2025-10-01 (their price pages). */
export const DEFAULT_PRICES: ModelPrices = {
  // The offline model costs nothing.
  echo: { input: 0, output: 0 },
  'anthropic:claude-sonnet-4-5': { input: 3, cached_input: 0.3, cache_write: 3.75, output: 15 },
  'openai:gpt-4.1-mini': { input: 0.4, cached_input: 0.1, output: 1.6 },
  'openai:gpt-4o': { input: 2.5, cached_input: 1.25, output: 10 },
  'openai:gpt-4o-mini': { input: 0.15, cached_input: 0.075, output: 0.6 },
  'workers-ai:@cf/meta/llama-3.3-70b-instruct-fp8-fast': { input: 0.293, output: 2.253 },
};

/**
 * The price table: the defaults with `MODEL_PRICES` over them. Throws a message naming the
 * problem for text that is not such a JSON object (the service config answers 503 with it).
 *
 * @example priceTable('{"openai:o3":{"input":2,"output":8}}')['openai:o3'] // { input: 2, output: 8 }
 */
export function priceTable(text: string | undefined): ModelPrices {
  if (text === undefined) return DEFAULT_PRICES;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error('is not JSON');
  }
  const parsed = modelPricesSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`${issue?.path.join('.') || 'value'}: ${issue?.message ?? 'invalid'}`);
  }
  return { ...DEFAULT_PRICES, ...parsed.data };
}

/** The tokens a cost is computed from (input includes cache reads and writes; output includes reasoning). */
export interface PricedTokens {
  input_tokens: number;
  cached_input_tokens: number;
  cache_write_tokens: number;
  output_tokens: number;
}

/**
 * The cost in USD of one call's tokens at `price` (null: no known price), rounded to the
 * nano-dollar, so sums of costs stay exact (and the session index stores them as integers).
 *
 * @example
 * const tokens = { input_tokens: 1000, cached_input_tokens: 0, cache_write_tokens: 0, output_tokens: 0 };
 * costOf(tokens, { input: 3, output: 15 }) // 0.003
 */
export function costOf(tokens: PricedTokens, price: ModelPrice | undefined): number | null {
  if (!price) return null;
  const uncached = Math.max(0, tokens.input_tokens - tokens.cached_input_tokens - tokens.cache_write_tokens);
  const perMillion =
    uncached * price.input +
    tokens.cached_input_tokens * (price.cached_input ?? price.input) +
    tokens.cache_write_tokens * (price.cache_write ?? price.input) +
    tokens.output_tokens * price.output;
  return roundUsd(perMillion / 1_000_000);
}

/** USD rounded to 1e-9 (a nano-dollar), the precision of every stored cost. */
export function roundUsd(value: number): number {
  return Math.round(value * NANO) / NANO;
}

export const NANO = 1e9;

/**
 * The most USD a ledger a client supplies (an import's) may hold: its nano-dollars stay a safe
 * integer, as the session index stores them (lib/session/log/session-index.ts).
 */
export const MAX_LEDGER_COST_USD = 9_000_000;

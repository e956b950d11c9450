import { z } from 'zod';
import type { ModelUsage } from '../models/model.ts';
import { costOf, MAX_LEDGER_COST_USD, roundUsd, type ModelPrice } from './prices.ts';

/**
 * The usage ledger: what one turn used (`TurnUsage`, in its receipt and response) and the
 * running totals of a session (`Ledger`), carried by every record and completion like the
 * counts, so the newest record and its completion say what the session spent without another
 * read (docs/STORAGE.md).
 */

const tokens = z.number().int().nonnegative();

/** One turn's usage as the API shows it: every token kind the provider reported, and its cost. */
export const turnUsageSchema = z
  .object({
    input_tokens: tokens.meta({ description: 'Every input token, cache reads and writes included.' }),
    cached_input_tokens: tokens.meta({ description: "Input tokens read from the provider's prompt cache." }),
    cache_write_tokens: tokens.meta({ description: "Input tokens written to the provider's prompt cache." }),
    output_tokens: tokens.meta({ description: 'Every output token, reasoning included.' }),
    reasoning_tokens: tokens.meta({ description: 'Output tokens spent on reasoning.' }),
    cost_usd: z
      .number()
      .nonnegative()
      .nullable()
      .meta({ description: "USD at the model's price (MODEL_PRICES); null when the model has no known price." }),
  })
  .meta({ id: 'TurnUsage' });
export type TurnUsage = z.infer<typeof turnUsageSchema>;

/**
 * A receipt's usage as stored: receipts written before the ledger hold input and output tokens
 * only (and maybe cached ones); what they lack reads as 0 tokens and an unknown cost.
 */
export const storedTurnUsageSchema = z
  .object({
    input_tokens: z.number(),
    output_tokens: z.number(),
    cached_input_tokens: z.number().optional(),
    cache_write_tokens: z.number().optional(),
    reasoning_tokens: z.number().optional(),
    cost_usd: z.number().nullable().optional(),
  })
  .transform(
    (usage): TurnUsage => ({
      input_tokens: usage.input_tokens,
      cached_input_tokens: usage.cached_input_tokens ?? 0,
      cache_write_tokens: usage.cache_write_tokens ?? 0,
      output_tokens: usage.output_tokens,
      reasoning_tokens: usage.reasoning_tokens ?? 0,
      cost_usd: usage.cost_usd ?? null,
    }),
  );

/**
 * A provider's usage with the cost at `price` (undefined: no known price). Each count is taken as
 * the whole, non-negative number the ledger, the receipts and the token spend are read back with
 * (`tokens`): a provider's fraction rounds, a negative or non-finite count is 0. An
 * OpenAI-compatible backend's usage is any JSON number, and a count stored otherwise would leave
 * the completion carrying it unreadable. Cached input tokens count at most the input tokens (they
 * are some of them): a session's totals stay what its export's header takes back
 * (`suppliedLedgerSchema`), and its cache_read_share at most 1.
 */
export function turnUsage(usage: ModelUsage, price: ModelPrice | undefined): TurnUsage {
  const input = tokenCount(usage.input_tokens);
  const counted = {
    input_tokens: input,
    cached_input_tokens: Math.min(tokenCount(usage.cached_input_tokens), input),
    cache_write_tokens: tokenCount(usage.cache_write_tokens),
    output_tokens: tokenCount(usage.output_tokens),
    reasoning_tokens: tokenCount(usage.reasoning_tokens),
  };
  return { ...counted, cost_usd: costOf(counted, price) };
}

/**
 * Whether a model call's usage is one its provider reported: not `unreported` (an answer with no
 * input count, a backend that left its usage out, is estimated). A count of 0 it gave is its count.
 */
export function usageReported(usage: ModelUsage): boolean {
  return usage.unreported !== true;
}

/** A reported token count as `tokens` takes it: rounded, at least 0, at most a safe integer. */
function tokenCount(value: number | undefined): number {
  if (value === undefined || !Number.isFinite(value) || value <= 0) return 0;
  return Math.min(Math.round(value), Number.MAX_SAFE_INTEGER);
}

/**
 * A session's running totals as stored: completed turns and the sum of their usage, with the
 * summaries its compactions made (in a turn or by POST /compact). `cost_usd` sums the model
 * calls with a known price; `unpriced_turns` counts the others (a compaction's among them).
 */
export const ledgerSchema = z
  .object({
    turns: tokens,
    input_tokens: tokens,
    cached_input_tokens: tokens,
    cache_write_tokens: tokens,
    output_tokens: tokens,
    reasoning_tokens: tokens,
    cost_usd: z.number().nonnegative(),
    unpriced_turns: tokens,
  })
  .strict();
export type Ledger = z.infer<typeof ledgerSchema>;

/**
 * A ledger a client supplies (an import's header): a cost of at most MAX_LEDGER_COST_USD, and no
 * more cached input tokens than input tokens (its cache_read_share stays at most 1).
 */
export const suppliedLedgerSchema = ledgerSchema
  .extend({ cost_usd: z.number().nonnegative().max(MAX_LEDGER_COST_USD) })
  .refine((ledger) => ledger.cached_input_tokens <= ledger.input_tokens, {
    message: 'must be at most input_tokens',
    path: ['cached_input_tokens'],
  });

/** No usage, at a known price: added, it changes no total but `turns`. */
export const NO_USAGE: TurnUsage = Object.freeze({
  input_tokens: 0,
  cached_input_tokens: 0,
  cache_write_tokens: 0,
  output_tokens: 0,
  reasoning_tokens: 0,
  cost_usd: 0,
});

export const EMPTY_LEDGER: Ledger = Object.freeze({ turns: 0, ...NO_USAGE, cost_usd: 0, unpriced_turns: 0 });

/**
 * The totals after one more completed turn (`turns` 1), or after a summary made for a
 * compaction (`turns` 0: its tokens and cost count, and an unknown price counts as unpriced).
 * `turns` -1 with NO_USAGE takes back a turn counted before its completion, which then did not
 * land (lib/turn/background-charge.ts): the caller checks the totals (`ledgerSchema`) still hold.
 */
export function addToLedger(ledger: Ledger, usage: TurnUsage, turns: -1 | 0 | 1 = 1): Ledger {
  return {
    turns: ledger.turns + turns,
    input_tokens: ledger.input_tokens + usage.input_tokens,
    cached_input_tokens: ledger.cached_input_tokens + usage.cached_input_tokens,
    cache_write_tokens: ledger.cache_write_tokens + usage.cache_write_tokens,
    output_tokens: ledger.output_tokens + usage.output_tokens,
    reasoning_tokens: ledger.reasoning_tokens + usage.reasoning_tokens,
    cost_usd: roundUsd(ledger.cost_usd + (usage.cost_usd ?? 0)),
    unpriced_turns: ledger.unpriced_turns + (usage.cost_usd === null ? 1 : 0),
  };
}

/** Whether the totals hold anything: a ledger that does not is left out of what is stored. */
export function hasUsage(ledger: Ledger): boolean {
  return ledger.turns > 0 || ledger.input_tokens > 0 || ledger.output_tokens > 0 || ledger.unpriced_turns > 0;
}

/** A session's totals as the API shows them (`usage` of a session and of a listing row). */
export const sessionUsageSchema = z
  .object({
    turns: tokens.meta({ description: 'Completed model turns counted (failed and closed turns used nothing stored).' }),
    input_tokens: tokens.meta({ description: "Input tokens of the turns and of compactions' summaries." }),
    cached_input_tokens: tokens,
    cache_write_tokens: tokens,
    output_tokens: tokens.meta({ description: "Output tokens of the turns and of compactions' summaries." }),
    reasoning_tokens: tokens,
    total_tokens: tokens.meta({ description: 'input_tokens + output_tokens (what max_total_tokens limits).' }),
    cost_usd: z.number().nonnegative().nullable().meta({
      description: 'USD of all counted turns and summaries; null when one had no known price (see unpriced_turns).',
    }),
    priced_cost_usd: z
      .number()
      .nonnegative()
      .meta({ description: 'USD of the turns and summaries with a known price.' }),
    unpriced_turns: tokens.meta({
      description: "Turns and compactions' summaries whose model had no known price.",
    }),
    cache_read_share: z
      .number()
      .min(0)
      .max(1)
      .nullable()
      .meta({ description: 'cached_input_tokens / input_tokens; null before any input.' }),
  })
  .meta({ id: 'SessionUsage' });
export type SessionUsage = z.infer<typeof sessionUsageSchema>;

export function sessionUsage(ledger: Ledger): SessionUsage {
  return {
    turns: ledger.turns,
    input_tokens: ledger.input_tokens,
    cached_input_tokens: ledger.cached_input_tokens,
    cache_write_tokens: ledger.cache_write_tokens,
    output_tokens: ledger.output_tokens,
    reasoning_tokens: ledger.reasoning_tokens,
    total_tokens: totalTokens(ledger),
    cost_usd: ledger.unpriced_turns > 0 ? null : ledger.cost_usd,
    priced_cost_usd: ledger.cost_usd,
    unpriced_turns: ledger.unpriced_turns,
    cache_read_share: ledger.input_tokens > 0 ? ledger.cached_input_tokens / ledger.input_tokens : null,
  };
}

export function totalTokens(usage: Pick<Ledger, 'input_tokens' | 'output_tokens'>): number {
  return usage.input_tokens + usage.output_tokens;
}

/**
 * A session's budget: limits on what its completed turns spent (its `Ledger`), checked by
 * lib/ledger/budget.ts. A limit of 0 is reached at once: an operator's stop for the next turn.
 */
export const budgetSchema = z
  .object({
    max_cost_usd: z
      .number()
      .nonnegative()
      .finite()
      .optional()
      .meta({ description: 'USD of the turns with a known price (a model without one adds nothing).' }),
    max_turns: z.number().int().nonnegative().optional().meta({ description: 'Completed model turns.' }),
    max_total_tokens: z
      .number()
      .int()
      .nonnegative()
      .optional()
      .meta({ description: 'Input plus output tokens of the completed turns.' }),
  })
  .strict()
  .meta({ id: 'Budget' });
export type Budget = z.infer<typeof budgetSchema>;

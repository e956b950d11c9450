import { BudgetExhaustedError } from '../errors.ts';
import { roundUsd } from './prices.ts';
import { totalTokens, type Budget, type Ledger, type SessionUsage } from './usage.ts';

const LIMITS = ['max_cost_usd', 'max_turns', 'max_total_tokens'] as const;

/** What `ledger` spent, by the budget limit that bounds it. */
function spentBy(ledger: Ledger): Record<(typeof LIMITS)[number], number> {
  return { max_cost_usd: ledger.cost_usd, max_turns: ledger.turns, max_total_tokens: totalTokens(ledger) };
}

/**
 * What each limit of `budget` leaves after `ledger`: the limit less what was spent, 0 once it
 * is reached (the next turn is refused). Only the limits the budget sets.
 */
export function budgetRemaining(budget: Budget, ledger: Ledger): Budget {
  const spent = spentBy(ledger);
  const remaining: Budget = {};
  for (const limit of LIMITS) {
    const value = budget[limit];
    if (value === undefined) continue;
    // A cost is rounded as stored costs are (no float residue); counts are whole already.
    const left = limit === 'max_cost_usd' ? roundUsd(value - spent[limit]) : value - spent[limit];
    remaining[limit] = Math.max(0, left);
  }
  return remaining;
}

/**
 * Checked when a turn is claimed, from the head the claim reads anyway, before anything is
 * stored or any model called: a turn is refused once a limit is reached, so the turn that
 * crosses a limit still finishes and the next one is refused.
 *
 * A scoped token's budget (`holder: 'token'`, lib/ledger/token-spend.ts) is checked the same
 * way against what the token's turns spent across its sessions.
 *
 * Throws BudgetExhaustedError (the first limit reached, what was spent and the limit).
 */
export function checkBudget(
  budget: Budget | null | undefined,
  ledger: Ledger,
  holder: 'session' | 'token' = 'session',
): void {
  if (!budget) return;
  const spent = spentBy(ledger);
  for (const limit of LIMITS) {
    const value = budget[limit];
    if (value !== undefined && spent[limit] >= value)
      throw new BudgetExhaustedError(limit, spent[limit], value, holder);
  }
}

/**
 * The refusal a session's next turn meets from its `budget`, judged as its claim's `checkBudget`
 * judges it, by the totals the session shows (`usage`, SessionLog.get: what stopped turns and
 * charges stored counted, as the claim counts them; the cost its priced turns add up to); null
 * while the budget leaves room.
 */
export function budgetRefusal(budget: Budget | null | undefined, usage: SessionUsage): BudgetExhaustedError | null {
  try {
    checkBudget(budget, { ...usage, cost_usd: usage.priced_cost_usd });
    return null;
  } catch (error) {
    if (error instanceof BudgetExhaustedError) return error;
    throw error;
  }
}

import { BudgetExhaustedError } from '../errors.ts';
import { totalTokens, type Budget, type Ledger } from './usage.ts';

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
  const spent = {
    max_cost_usd: ledger.cost_usd,
    max_turns: ledger.turns,
    max_total_tokens: totalTokens(ledger),
  };
  for (const limit of ['max_cost_usd', 'max_turns', 'max_total_tokens'] as const) {
    const value = budget[limit];
    if (value !== undefined && spent[limit] >= value)
      throw new BudgetExhaustedError(limit, spent[limit], value, holder);
  }
}

import { NotFoundError, TurnClosedError } from '../errors.ts';
import { tokenBudgetSchema, type TokenSpend } from '../ledger/token-spend.ts';
import type { TurnUsage } from '../ledger/usage.ts';
import { ClosedByItsCompletionError } from '../session/log/owner-closed.ts';
import type { OpenTurn } from '../session/log/types.ts';
import type { TurnServices } from './types.ts';

/** The spend record of the token a background turn's record names, if any (checked as read). */
export function backgroundSpend(services: TurnServices, turn: OpenTurn): TokenSpend | undefined {
  const named = (turn.request as { token_budget?: unknown } | undefined)?.token_budget;
  if (named === undefined) return undefined;
  const budget = tokenBudgetSchema.safeParse(named);
  if (budget.success) return services.spendOf?.(budget.data);
  services.log('tailgate: a background turn names a token budget that does not parse; charged to no token', {
    turn: turn.turn,
  });
  return undefined;
}

/** The turns charged before their completion was stored (chargeBeforeClose): a close that then fails charges none. */
const chargedBefore = new WeakSet<OpenTurn>();

/** Whether `turn` was charged before its completion was stored. */
export function chargedBeforeClose(turn: OpenTurn): boolean {
  return chargedBefore.has(turn);
}

/**
 * A background turn's charge, which lands before its completion (`close`) is stored, so a client
 * that polls the turn sees it completed only once charged: the token's record is read now, beside
 * the turn's own reads (no round trip of its own), and the charge puts over that read once the
 * model answered (a get and another put when something else charged meanwhile). A completion
 * that then does not land (refused by a close: a cancel, an interrupt, another run's; or its put
 * failed) takes the turn back, its usage left (the provider billed the call): one put more,
 * so the turn counts as a stopped or failed one does, and once when the queue runs it again.
 * No budget named: undefined.
 */
export function chargeBeforeClose(
  services: TurnServices,
  turn: OpenTurn,
): (<T>(usage: TurnUsage, summary: TurnUsage | undefined, close: () => Promise<T>) => Promise<T>) | undefined {
  const spend = backgroundSpend(services, turn);
  if (!spend) return undefined;
  const read = spend.read().catch(() => undefined);
  return async (usage, summary, close) => {
    await read;
    // Not landed (logged): a close that then fails charges what the turn spent, as any failed or stopped one.
    const charged = await spend.chargeNow(services, usage, 1, summary);
    if (charged) chargedBefore.add(turn);
    try {
      return await close();
    } catch (error) {
      // Landed, only its webhook event failed: the turn stands completed.
      if (charged && !(error instanceof ClosedByItsCompletionError) && !(await landed(services, turn, error)))
        await takeBack(services, spend);
      throw error;
    }
  };
}

/**
 * Whether the completion that threw `error` landed all the same: refused by another close, no; a
 * store failure (its put's answer lost, its read back failed) reads the turn: completed only by it.
 */
async function landed(services: TurnServices, turn: OpenTurn, error: unknown): Promise<boolean> {
  if (error instanceof TurnClosedError || error instanceof NotFoundError) return false;
  const read = await services.sessions.getTurn(turn.scope.id, turn.turn).catch(() => null);
  return read?.status === 'completed';
}

/** Takes back the turn `spend` last charged, landed before the answer (as `chargeNow`); a failure is logged. */
async function takeBack(services: TurnServices, spend: TokenSpend): Promise<void> {
  const taking = spend.takeBackTurn().catch((error: unknown) => {
    services.log('tailgate: could not take back a turn charged before its completion', error);
  });
  services.background(taking);
  await taking;
}

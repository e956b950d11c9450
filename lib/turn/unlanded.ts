import { afterResponse, thenListed } from './after-response.ts';
import { chargeToken, type Attempt } from './close-turn.ts';
import type { Seen } from './observe.ts';
import type { CallMeter } from './stopped-spend.ts';
import type { TurnServices } from './types.ts';

/**
 * What a turn attempt whose claim's put failed (its record's, or that of an attachment before
 * it) spent: the turn calls its model while that put runs (lib/turn/pipeline.ts), so the call was
 * made, then aborted, and nothing of the turn is stored. The provider bills it all the same, unless
 * its request never reached the model: once the call settled, it is charged to the turn's token
 * (as no turn) and stored as a charge of the session (lib/session/log/charges.ts), which its next
 * write counts in its totals before its budget check: the usage its provider reported when it
 * answered before the abort, else estimated as any aborted call (lib/turn/stopped-spend.ts). The
 * turn's log line and metrics count it as known when the turn is answered.
 *
 * @example
 * await landed.catch(unlanded(services, attempt)); // rethrows the put's failure
 */
export function unlanded(services: TurnServices, attempt: Attempt): (failure: unknown) => never {
  return (failure) => {
    const { plan, meter, turn } = attempt;
    const price = plan && services.config.modelPrices[plan.model.id];
    const known = plan && meter.spent(price);
    if (known) attempt.stopped = known;
    if (plan)
      afterResponse(services, async () => {
        await meter.settled();
        const spent = meter.spent(price);
        if (!spent) return;
        const charge = { usage: spent.usage, estimated: spent.estimated };
        await Promise.all([
          chargeToken(services, turn, spent.usage, 0, undefined),
          thenListed(services, turn.scope.id, services.sessions.storeCharge(turn, charge)),
        ]);
      });
    throw failure;
  };
}

/**
 * Charges what the attempts whose claims were lost aborted (carried on in `meter`,
 * lib/turn/stopped-spend.ts CallMeter.next) when no later attempt runs to count it: the turn
 * replays the stored turn of its idempotency key, which another request took meanwhile, or its
 * claim is refused. The provider bills those calls all the same: once the last of them settled,
 * their spend is charged to the turn's token (as no turn) and stored as a charge of the session
 * of `lost`, the last attempt whose claim was lost, as unlanded does; the turn's log line and
 * metrics (`seen`) count it as known when the turn is answered.
 */
export function chargeCarried(
  services: TurnServices,
  lost: Attempt | undefined,
  meter: CallMeter,
  seen: Pick<Seen, 'stopped'>,
): void {
  if (!lost) return;
  const price = lost.plan && services.config.modelPrices[lost.plan.model.id];
  const known = meter.spent(price);
  if (known) seen.stopped = known.usage;
  afterResponse(services, async () => {
    await lost.meter.settled();
    const spent = meter.spent(price);
    if (!spent) return;
    const charge = { usage: spent.usage, estimated: spent.estimated };
    await Promise.all([
      chargeToken(services, lost.turn, spent.usage, 0, undefined),
      thenListed(services, lost.turn.scope.id, services.sessions.storeCharge(lost.turn, charge)),
    ]);
  });
}

/** chargeCarried when the next claim is refused: rethrows its failure. */
export function carried(
  services: TurnServices,
  lost: Attempt | undefined,
  meter: CallMeter,
  seen: Pick<Seen, 'stopped'>,
) {
  return (failure: unknown): never => {
    chargeCarried(services, lost, meter, seen);
    throw failure;
  };
}

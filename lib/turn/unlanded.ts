import { afterResponse } from './after-response.ts';
import { chargeToken, type Attempt } from './close-turn.ts';
import type { TurnServices } from './types.ts';

/**
 * What a turn attempt whose claim's put failed (its record's, or that of an attachment before
 * it) spent: the turn calls its model while that put runs (lib/turn/pipeline.ts), so the call was
 * made, then aborted, and nothing of the turn is stored. The provider bills it all the same, unless
 * its request never reached the model: it is charged to the turn's token (as no turn), once the
 * call settled: the usage its provider reported when it answered before the abort, else estimated
 * as any aborted call (lib/turn/stopped-spend.ts). The session's totals do not count it: no record
 * of the turn names it.
 *
 * @example
 * await landed.catch(unlanded(services, attempt)); // rethrows the put's failure
 */
export function unlanded(services: TurnServices, attempt: Attempt): (failure: unknown) => never {
  return (failure) => {
    const { plan, meter, turn } = attempt;
    if (plan)
      afterResponse(services, async () => {
        await meter.settled();
        const spent = meter.spent(services.config.modelPrices[plan.model.id]);
        if (spent) chargeToken(services, turn, spent.usage, 0, undefined);
      });
    throw failure;
  };
}

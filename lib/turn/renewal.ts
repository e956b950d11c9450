import { LeaseHeldError } from '../errors.ts';
import { renewalMs } from '../session/log/lease.ts';
import type { OpenTurn } from '../session/log/types.ts';
import type { HeldLease, TurnServices } from './types.ts';
import { closedError } from './running.ts';

/**
 * A running turn's lease (docs/STORAGE.md, "Turn" and "Background turn"): its renewals, and
 * what a turn learns from them (that someone else closed it). A background turn's runner takes the lease first
 * (`SessionLog.takeLease`, from lib/turn/pipeline.ts).
 */

/**
 * Gives a held lease up (`SessionLog.releaseHeldLease`): the next runner of the turn takes it
 * over at once instead of waiting a renewal for it. A failure is logged: the lease then runs out
 * as it would have.
 */
export async function releaseLease(services: TurnServices, held: HeldLease): Promise<void> {
  const { turn, etag } = held;
  if (!turn || etag === undefined) return;
  held.etag = undefined;
  await services.sessions
    .releaseHeldLease(turn, etag)
    .catch((error: unknown) => services.log('tailgate: could not release a turn lease', error));
}

/**
 * Renews the lease of a claimed turn while it runs, every third of the lease, but only as long
 * as a working turn can take (a summary and an answer, each within the model timeout): a turn
 * hung on a call that never returns lets its session go. With `stop`, each renewal also asks
 * whether someone else closed the turn (a cancel, an `interrupt`, a delete of its session):
 * then `stop` is aborted with what its completion would have been refused with, and the model
 * call with it (a close written in this process has aborted it before: lib/turn/running.ts).
 * A foreground turn asks before each renewal's put, so a turn whose session was deleted writes
 * no lease into it (a turn shorter than a renewal asks nothing). A background
 * turn (`held`, whose runner took the lease already: its receipt says in_progress) asks at once
 * and after each renewal. Its renewals match the lease it holds (`held`, whose etag each
 * renewal moves on): one refused because another runner took the lease over stops it too
 * (LeaseHeldError).
 */
export function renewLease(
  services: TurnServices,
  turn: OpenTurn,
  stop?: AbortController,
  held?: HeldLease,
): LeaseRenewal {
  const renewUntil = Date.now() + 2 * services.config.modelTimeoutMs + services.config.turnLeaseMs;
  const closed = async (kept = true) => {
    if (!stop || stop.signal.aborted) return;
    // A lease lost stops the turn even when its completion cannot be read: no renewal follows
    // to ask again, and the turn is another runner's either way.
    const closer = await services.sessions.closedBy(turn).catch((error: unknown) => {
      if (kept) throw error;
      failed(error);
      return null;
    });
    if (closer !== null) stop.abort(closedError(turn, closer.code, closer.details));
    else if (!kept) stop.abort(new LeaseHeldError(turn.scope.id, turn.turn));
  };
  // Whether the lease is still this runner's.
  const renewed = async () => {
    if (!held) {
      await services.sessions.renewLease(turn);
      return true;
    }
    const next = held.etag === undefined ? null : await services.sessions.renewHeldLease(turn, held.etag);
    if (next === null) clearInterval(renewal);
    held.etag = next ?? undefined;
    return next !== null;
  };
  const failed = (error: unknown) => services.log('tailgate: could not renew a turn lease', error);
  // The renewals under way (one slower than the interval overlaps the next), which `stop` waits for.
  const inFlight = new Set<Promise<unknown>>();
  const track = (work: Promise<unknown>) => {
    inFlight.add(work);
    void work.finally(() => inFlight.delete(work));
  };
  const renew = () => {
    if (Date.now() > renewUntil) return clearInterval(renewal);
    if (held) return track(renewed().then(closed).catch(failed));
    // A read that failed leaves the lease to be renewed all the same: the next renewal asks again.
    const asked = closed().catch(failed);
    track(asked.then(() => (stop?.signal.aborted ? undefined : renewed())).catch(failed));
  };
  let due = false;
  const renewal = setInterval(() => {
    due = true;
    renew();
  }, renewalMs(services.config.turnLeaseMs));
  if (held) track(closed().catch(failed));
  return {
    due: () => due,
    stop: () => {
      clearInterval(renewal);
      return Promise.all(inFlight).then(() => undefined);
    },
  };
}

/**
 * A running turn's renewals: `stop` ends them at once, and answers once every renewal under way
 * ended (never, while one's store call does not answer: nobody's answer waits for it).
 */
export interface LeaseRenewal {
  /** Whether a renewal came due (its interval fired) since the renewals began. */
  due(): boolean;
  stop(): Promise<void>;
}

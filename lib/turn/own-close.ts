import type { OpenTurn } from '../session/log/types.ts';
import type { TurnNotices } from './notices.ts';
import type { LeaseRenewal } from './renewal.ts';
import type { TurnServices } from './types.ts';

/** What afterOwnClose reads of an attempt (lib/turn/close-turn.ts `Attempt`). */
interface ClosedAttempt {
  turn: OpenTurn;
  notices?: TurnNotices;
  background?: true;
  earlierRun?: true;
  leaseAt?: number;
  renewal?: LeaseRenewal;
}

/**
 * After a background run's own close of its turn landed (completed, failed or aborted by it): a
 * run of the turn it took the lease over from, or one that took its lease over meanwhile, may
 * have moved notices for the turn before the close, and died. Their records name the turn, which
 * this close shows nothing of and which no later turn looks for (the close is the turn's own, so
 * it names no lost turn): so this run gives back to the inbox each notice a record naming the
 * turn holds that its close neither showed nor carries on, any run's, on the record's chain of
 * decision keys (as a run stopped by a close it read does: lib/inbox/carry.ts `giveBack`). A run
 * of the turn that still runs gives the same ones back when it learns of the close; the chain
 * gives each to one. A run that took the lease over moves notices only once its read of the
 * turn's completion found none (log/held-lease.ts `takeLease`): so one whose move landed before
 * this close holds the lease by then, and the lease read after the close tells it. Costs a head
 * of the lease (none for a run that took the lease over, nor for one that closed within a renewal
 * of taking it: log/held-lease.ts holdsLease); then, a listing of `inbox_removed/`
 * and a give-back per notice found (docs/STORAGE.md, "Notices"). A failure is logged: the close
 * stands.
 */
export async function afterOwnClose(services: TurnServices, sessionId: string, attempt: ClosedAttempt): Promise<void> {
  if (!attempt.background) return;
  const { turn, notices } = attempt;
  const accounted = new Set(
    [
      ...(notices?.delivered ?? []),
      ...(notices?.undelivered ?? turn.undelivered).notices,
      ...(notices?.abort ? [notices.abort] : []),
    ].map((notice) => notice.stored_as),
  );
  try {
    // A run that closed its turn within a renewal of taking the lease, none due meanwhile, holds it still: no read.
    const since = attempt.renewal?.due() === false ? attempt.leaseAt : undefined;
    if (!attempt.earlierRun && (await services.sessions.holdsLease(turn, since))) return;
    await services.inbox.giveBack(
      sessionId,
      { since: turn.claimedAt, accounted },
      turn.turn,
      { created_at: turn.session.created_at, incarnation: turn.scope.incarnation },
      { anyRun: true },
    );
  } catch (error) {
    services.log('tailgate: could not give back the notices another run of a closed background turn moved', error);
  }
}

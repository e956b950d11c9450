import { CorruptObjectError, NotFoundError, TurnInProgressError } from '../errors.ts';
import { RecordMissingError } from '../session/log/head.ts';
import { budgetRefusal } from '../ledger/budget.ts';
import { mapLimit } from '../store/object-store.ts';
import { pickUp } from './pickup.ts';
import type { SessionLog, SessionRecord } from '../session/session-log.ts';
import type { TurnServices } from './types.ts';

/** What a sweep of the queues did: the sessions it looked at, the markers it removed, the sessions it failed on. */
export interface QueueSweep {
  checked: number;
  unmarked: number;
  failed: { id: string; error: unknown }[];
}

/** Whether the session's budget refuses a turn, by the totals it shows (as its claim checks them). */
function budgetSpent(session: SessionRecord): boolean {
  return budgetRefusal(session.budget, session.usage) !== null;
}

/** Sessions a sweep takes at once. */
const SWEEP_CONCURRENCY = 4;

/**
 * The periodic sweep of queues (docs/STORAGE.md, "Queued inputs"): for each session marked as
 * one an input was queued in, or whose background turn its queue gave up or a Node or Deno
 * process runs (lib/session/log/queue-markers.ts), the pickup a closer runs, whose claim closes
 * a turn whose lease ran out and takes the oldest input up (a session whose turn runs is left to
 * that turn's close); then, with nothing queued, the close of an open turn whose lease ran out
 * (failed, `lease_expired`, as a reader closes it: its webhook event, and the pickup after it);
 * then the marker's removal once nothing is queued and no open turn's lease runs (put back when a
 * turn was claimed between the look and the delete: its mark came before). So an input
 * queued behind a turn whose process died, a given-up turn, and a background turn whose process
 * died, that no client came to close, run or close all the same. A session whose spent budget
 * refused the pickup is unmarked too (while its budget stays spent): its inputs wait, listed,
 * for a PATCH of the budget, which marks the session again before it is stored. A session that
 * fails is told in `failed`, and the others go on; one whose head is corrupt (its open turn can
 * be neither read nor closed) is told and, with nothing queued, unmarked all the same, so it is
 * not tried, and told, at every sweep.
 */
export async function sweepQueues(
  services: TurnServices & {
    sessions: Pick<SessionLog, 'markedQueues' | 'unmarkQueue' | 'unmarkSpentQueue' | 'get' | 'markForSweep'>;
  },
): Promise<QueueSweep> {
  const sweep: QueueSweep = { checked: 0, unmarked: 0, failed: [] };
  const { sessions } = services;
  await mapLimit(await sessions.markedQueues(), SWEEP_CONCURRENCY, async (id) => {
    sweep.checked++;
    try {
      // A session deleted since: its marker goes below.
      const picked = await pickUp(services, id).catch((error: unknown) => {
        if (!(error instanceof NotFoundError)) throw error;
      });
      // Its turn runs: the session stays marked for that turn, whose close takes the queue up.
      if (picked === 'busy') return;
      // A head no reader can parse (a corrupt newest record) is told once: with nothing queued the
      // session is unmarked, left to its readers, as a queued input keeps it marked (its claim fails).
      const lease = await leaseRuns(services, id).catch((error: unknown) => {
        if (!(error instanceof CorruptObjectError)) throw error;
        sweep.failed.push({ id, error });
        return false;
      });
      if (lease) return;
      // A queue the spent budget holds is no longer swept: a budget raise, or an enqueue, marks it again.
      if (picked === 'budget_spent') {
        if (await sessions.unmarkSpentQueue(id, async () => budgetSpent(await sessions.get(id)))) sweep.unmarked++;
        return;
      }
      if (!(await sessions.unmarkQueue(id))) return;
      // A background turn claimed since the look above marked the session before the delete: its
      // marker is put back (so it is when that look fails), lest its process die with the turn unswept.
      const claimedSince = await leaseRuns(services, id).catch(
        (error: unknown) => !(error instanceof CorruptObjectError),
      );
      if (claimedSince) await sessions.markForSweep(id);
      else sweep.unmarked++;
    } catch (error) {
      sweep.failed.push({ id, error });
    }
  });
  return sweep;
}

/**
 * Whether session `id`'s open turn still runs its lease: one whose lease ran out (its runner
 * gone, a queue's delivery given up, and no input queued whose claim would close it) is closed
 * as a newcomer closes it (failed, `lease_expired`; the session log's `onLeaseClosed` then takes
 * up the inputs queued behind it). False for a session with no open turn, or none at all.
 */
async function leaseRuns(services: TurnServices, id: string): Promise<boolean> {
  try {
    await services.sessions.closeIfExpired(id);
    return false;
  } catch (error) {
    if (error instanceof TurnInProgressError) return true;
    // Its close packed since it was read (closed), or the session was deleted since.
    if (error instanceof RecordMissingError || error instanceof NotFoundError) return false;
    throw error;
  }
}

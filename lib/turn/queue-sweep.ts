import { NotFoundError } from '../errors.ts';
import { mapLimit } from '../store/object-store.ts';
import { pickUp } from './busy.ts';
import type { SessionLog } from '../session/session-log.ts';
import type { TurnServices } from './types.ts';

/** What a sweep of the queues did: the sessions it looked at, the markers it removed, the sessions it failed on. */
export interface QueueSweep {
  checked: number;
  unmarked: number;
  failed: { id: string; error: unknown }[];
}

/** Sessions a sweep takes at once. */
const SWEEP_CONCURRENCY = 4;

/**
 * The periodic sweep of queues (docs/STORAGE.md, "Queued inputs"): for each session marked as
 * one an input was queued in (lib/session/log/queue-markers.ts), the pickup a closer runs,
 * whose claim closes a turn whose lease ran out and takes the oldest input up (a session whose
 * turn runs is left to that turn's close), then the marker's removal once nothing is queued.
 * So an input queued behind a turn whose process died, and that no client came to close, runs
 * all the same. A session that fails is told in `failed`, and the others go on.
 */
export async function sweepQueues(
  services: TurnServices & { sessions: Pick<SessionLog, 'markedQueues' | 'unmarkQueue'> },
): Promise<QueueSweep> {
  const sweep: QueueSweep = { checked: 0, unmarked: 0, failed: [] };
  await mapLimit(await services.sessions.markedQueues(), SWEEP_CONCURRENCY, async (id) => {
    sweep.checked++;
    try {
      // A session deleted since: its marker goes below.
      await pickUp(services, id).catch((error: unknown) => {
        if (!(error instanceof NotFoundError)) throw error;
      });
      if (await services.sessions.unmarkQueue(id)) sweep.unmarked++;
    } catch (error) {
      sweep.failed.push({ id, error });
    }
  });
  return sweep;
}

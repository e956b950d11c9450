import { sweepQueues } from '../lib/turn/index.ts';
import { loggable } from '../lib/loggable.ts';
import { schedulePeriodic } from './retention.ts';
import type { AppServices } from './services.ts';

/**
 * The sweep of the queues no closer took up, and of the background turns a Workers queue gave
 * up or whose Node or Deno process died (lib/turn/queue-sweep.ts), with a deployment's services,
 * those a request would have (functions/app.ts `createOutsideServices`), so a turn it takes up
 * goes to a runner as any background turn, and a close it makes sends its webhook event: on
 * Workers from the Cron Trigger (`scheduled` in functions/worker.ts), on Node and Deno from
 * `scheduleQueueSweep`'s timer.
 */

/**
 * How often Node and Deno sweep the queues by default (QUEUE_SWEEP_MS, functions/local-server.ts):
 * an input queued behind a turn whose process died, and a background turn whose process died,
 * run or close at most about a minute after that turn's lease ran out (TURN_LEASE_MS, 30 s by
 * default). A minute, not a lease: a sweep with nothing marked costs one listing, and a lease may
 * be set to hours.
 */
export const QUEUE_SWEEP_MS = 60_000;

/**
 * One sweep with `services` (built when it starts); a session it failed on is logged, and the
 * next sweep tries it again.
 */
export async function sweepQueuedSessions(services: () => AppServices): Promise<void> {
  try {
    const sweep = await sweepQueues(services());
    for (const { id, error } of sweep.failed)
      console.error(`tailgate: the queue sweep of session ${id} failed`, loggable(error));
  } catch (error) {
    console.error('tailgate: queue sweep failed', loggable(error));
  }
}

/** Node and Deno: `sweep` every `everyMs` (QUEUE_SWEEP_MS), one at a time. Returns a stop. */
export function scheduleQueueSweep(sweep: () => Promise<void>, everyMs = QUEUE_SWEEP_MS): () => void {
  return schedulePeriodic(sweep, everyMs, everyMs);
}

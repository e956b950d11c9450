import { NotFoundError } from '../../errors.ts';
import { idSchema } from '../../items.ts';
import { queueMarkerKey, queueMarkersPrefix, queuedPrefix, type LogScope } from '../keys.ts';
import { sessionScope } from './config-object.ts';
import type { LogContext } from './context.ts';

/**
 * The index of the sessions inputs were queued in (docs/STORAGE.md, "Queued inputs"), for the
 * periodic sweep that takes up the queues no closer took up (lib/turn/queue-sweep.ts):
 * `queues/<id>`, empty, put unconditionally by every enqueue before its entry, so no entry is
 * stored without its session's marker, whichever process dies between the two. A marker with
 * nothing queued (its enqueue died before its entry, or the queue was taken up since) is stale:
 * the sweep removes it. So is one whose queue waits for the session's budget (unmarkWhileSpent):
 * a budget raise marks the session again (markIfQueued, before the budget is stored), and so
 * does every enqueue. The Workers queue consumer marks a session whose background turn it gave
 * up at its last delivery (markQueue, nothing queued): the sweep keeps the marker while the
 * session's open turn runs its lease, and closes the turn once it ran out; so does a Node or
 * Deno process for each background turn it runs itself, before its runner starts
 * (functions/services.ts), so a turn whose process died is closed too. A foreground turn
 * touches no marker.
 */

/** Marks session `id` as one an input is queued in (log/queue.ts, before the entry), or whose turn was given up. */
export async function markQueue(log: LogContext, id: string): Promise<void> {
  await log.store.put(queueMarkerKey(log.keyPrefix, id), '');
}

/**
 * The ids of the marked sessions, in key order. Listed by `/`: a key deeper under `queues/` is
 * no marker (another deployment's, whose KEY_PREFIX is this one's and `queues/`), nor is one
 * whose name is no session id; neither is swept, nor listed object by object.
 */
export async function markedQueues(log: LogContext): Promise<string[]> {
  const prefix = queueMarkersPrefix(log.keyPrefix);
  const ids: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await log.store.list(prefix, { delimiter: '/', ...(cursor === undefined ? {} : { cursor }) });
    for (const { key } of page.objects) {
      const id = key.slice(prefix.length);
      if (idSchema.safeParse(id).success) ids.push(id);
    }
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor !== undefined);
  return ids;
}

/**
 * Removes session `id`'s marker when nothing is queued in it, or it no longer exists: whether
 * it did. No store deletes conditionally, so an enqueue may put the marker again, and then its
 * entry, between the look and the delete: a second look after the delete puts the marker back
 * when an entry is there. (An enqueue whose entry lands after that second look has its own
 * pickup, or the running turn's close, as before the marker.)
 */
export async function unmarkIfEmpty(log: LogContext, id: string): Promise<boolean> {
  if (await anyQueued(log, id)) return false;
  const key = queueMarkerKey(log.keyPrefix, id);
  await log.store.delete(key);
  if (!(await anyQueued(log, id))) return true;
  await log.store.put(key, '');
  return false;
}

/**
 * Removes session `id`'s marker while its queue waits for the session's budget (the sweep's
 * pickup was refused for it): whether it did. `spent` looks at the budget once more after the
 * delete, and the marker is put back unless it is still spent (or the look failed): a PATCH
 * raising it may have marked the session between the pickup and the delete, and its own pickup
 * may die. An enqueue meanwhile needs no marker: its input waits for the budget as the others do.
 */
export async function unmarkWhileSpent(log: LogContext, id: string, spent: () => Promise<boolean>): Promise<boolean> {
  const key = queueMarkerKey(log.keyPrefix, id);
  await log.store.delete(key);
  if (await spent().catch(() => false)) return true;
  await log.store.put(key, '');
  return false;
}

/**
 * Marks session `id` when an input is queued in it, before a change that may let its queue go
 * on (a PATCH of its budget, whose pickup follows the response): whether it did.
 */
export async function markIfQueued(log: LogContext, id: string): Promise<boolean> {
  if (!(await anyQueued(log, id))) return false;
  await markQueue(log, id);
  return true;
}

/** Whether an input is queued in session `id`: under its generation or one in its `queued_in` (log/queue.ts). */
async function anyQueued(log: LogContext, id: string): Promise<boolean> {
  let scope: LogScope;
  try {
    scope = await sessionScope(log, id);
  } catch (error) {
    if (error instanceof NotFoundError) return false;
    throw error;
  }
  const generations = [scope.generation, ...(scope.queuedIn ?? [])];
  const pages = await Promise.all(
    generations.map((generation) => log.store.list(queuedPrefix({ ...scope, generation }), { limit: 1 })),
  );
  // A page may be empty while truncated (R2): something may be under the prefix.
  return pages.some((page) => page.objects.length > 0 || page.truncated);
}

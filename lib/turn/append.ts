import type { Item } from '../items.ts';
import type { SessionLog } from '../session/session-log.ts';
import { packOptions, sessionStrategyPlan } from './plan.ts';
import type { TurnServices } from './types.ts';

/** How often (in log records) a completed turn or append starts packing in the background. */
export const PACK_EVERY_RECORDS = 4;

/**
 * Appends items without a model turn (POST /items) and, every few records, packs the log in
 * the background as turns do, so the next turn finds a recent view.
 */
export async function appendItems(
  services: Pick<TurnServices, 'env' | 'background'> & {
    sessions: Pick<SessionLog, 'append' | 'get' | 'pack' | 'refreshIndex' | 'storeAttachments'>;
  },
  sessionId: string,
  items: Item[],
): Promise<{ first_seq: number; last_seq: number }> {
  const stored = await services.sessions.storeAttachments(sessionId, items);
  const { first_seq, last_seq, record } = await services.sessions.append(sessionId, stored);
  afterResponse(services, async () => services.sessions.refreshIndex(sessionId));
  if (record % PACK_EVERY_RECORDS === 0) {
    afterResponse(services, async () => {
      const session = await services.sessions.get(sessionId);
      await services.sessions.pack(sessionId, packOptions(sessionStrategyPlan(services.env, session)));
    });
  }
  return { first_seq, last_seq };
}

/**
 * Hands `task` to `background` (waitUntil on Workers) to start on a timer, so its storage
 * calls come after the response has been produced, not among the request's own.
 */
export function afterResponse(services: Pick<TurnServices, 'background'>, task: () => Promise<unknown>): void {
  services.background(new Promise((resolve) => setTimeout(resolve, 0)).then(task));
}

import { sessionGone } from '../session/log/claimed-after-delete.ts';
import type { OpenTurn } from '../session/log/types.ts';
import type { TurnServices } from './types.ts';

/**
 * Hands `task` to `background` (waitUntil on Workers) to start on a timer, so its storage
 * calls come after the response has been produced, not among the request's own.
 */
export function afterResponse(services: Pick<TurnServices, 'background'>, task: () => Promise<unknown>): void {
  services.background(new Promise((resolve) => setTimeout(resolve, 0)).then(task));
}

/**
 * Refreshes the session's index entry (SessionLog.refreshIndex) once `stored`, what a stopped turn
 * or a charge spent (lib/session/log/unbilled.ts, charges.ts), landed where a read of the session
 * counts it: its listing row counts it too, not only from the session's next write.
 */
export async function thenListed(
  services: Pick<TurnServices, 'sessions'>,
  sessionId: string,
  stored: Promise<boolean>,
): Promise<boolean> {
  if (!(await stored)) return false;
  await services.sessions.refreshIndex(sessionId);
  return true;
}

/** Runs `store` after the response (afterResponse), then thenListed. */
export function storeThenList(
  services: Pick<TurnServices, 'background' | 'sessions'>,
  sessionId: string,
  store: () => Promise<boolean>,
): void {
  afterResponse(services, () => thenListed(services, sessionId, store()));
}

/**
 * After a turn's attempt: refreshes the session's index entry (its listing row, after whatever
 * the turn stored), and when that read finds the session gone (deleted, or created again) while
 * the turn's claim had `landed` (after the delete's sweep passed, so nothing fenced it), removes
 * what the turn stored once its lease renewals `stopped` (SessionLog.leaveGone).
 */
export async function listedAfterTurn(
  services: Pick<TurnServices, 'sessions'>,
  turn: OpenTurn,
  landed: Promise<boolean>,
  stopped: Promise<void> | undefined,
): Promise<void> {
  const config = await services.sessions.refreshIndex(turn.scope.id);
  if (!sessionGone(turn, config) || !(await landed.catch(() => false))) return;
  await stopped;
  await services.sessions.leaveGone(turn);
}

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

import type { ForkOptions, SessionLog, SessionRecord } from '../session/session-log.ts';
import { afterResponse } from './append.ts';
import { packOptions, sessionStrategyPlan } from './plan.ts';
import type { TurnServices } from './types.ts';

/**
 * Forks a session (POST /v1/sessions/{id}/fork) and, after the response, writes the fork's
 * first view, so its first turn reads no more than a turn of the parent would.
 */
export async function forkSession(
  services: Pick<TurnServices, 'env' | 'background'> & { sessions: Pick<SessionLog, 'fork' | 'pack'> },
  parentId: string,
  options: ForkOptions,
): Promise<SessionRecord> {
  const fork = await services.sessions.fork(parentId, options);
  afterResponse(services, async () =>
    services.sessions.pack(fork.id, { ...packOptions(sessionStrategyPlan(services.env, fork)), refresh: true }),
  );
  return fork;
}

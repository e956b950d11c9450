import { NotFoundError } from '../errors.ts';
import type { ForkOptions, RewindOptions, SessionLog, SessionRecord } from '../session/session-log.ts';
import { afterResponse } from './after-response.ts';
import { packOptions, sessionStrategyPlan } from './plan.ts';
import type { TurnServices } from './types.ts';

/** What a delete of the newest turn works with. */
export type RewindServices = Pick<TurnServices, 'env' | 'background'> & {
  sessions: Pick<SessionLog, 'deleteTurn' | 'pack'>;
  inbox: Pick<TurnServices['inbox'], 'tookNothing'>;
};

type ForkServices = RewindServices & { sessions: Pick<SessionLog, 'fork'> };

/**
 * Forks a session (POST /v1/sessions/{id}/fork) and, after the response, writes the fork's
 * first view, so its first turn reads no more than a turn of the parent would.
 */
export async function forkSession(
  services: ForkServices,
  parentId: string,
  options: ForkOptions,
): Promise<SessionRecord> {
  return withFirstView(services, await services.sessions.fork(parentId, options));
}

/**
 * Deletes a session's newest turn (DELETE /v1/sessions/{id}/turns/{turn}, DELETE
 * /v1/responses/{id}): the session goes back to the record before it, a fork of itself there
 * (lib/session/log/rewind.ts), whose first view is written after the response. Turns closed by
 * someone else refuse it only when the inbox says they consumed notices.
 */
export async function deleteNewestTurn(
  services: RewindServices,
  id: string,
  turn: number,
  options: RewindOptions = {},
): Promise<SessionRecord> {
  const tookNothing: RewindOptions['tookNothing'] = (lost) => services.inbox.tookNothing(id, lost);
  // A delete that flattens the history writes its first view itself, from what it read.
  const pack: RewindOptions['pack'] = (config) => packOptions(sessionStrategyPlan(services.env, config));
  return withFirstView(services, await services.sessions.deleteTurn(id, turn, { ...options, tookNothing, pack }));
}

function withFirstView(services: RewindServices, session: SessionRecord): SessionRecord {
  afterResponse(services, async () =>
    services.sessions
      .pack(session.id, { ...packOptions(sessionStrategyPlan(services.env, session)), refresh: true })
      .catch((error: unknown) => {
        // Deleted since (a conversation its failed first response started, lib/openai/sessions.ts
        // dropStartedConversation): a session that no longer exists needs no view.
        if (!(error instanceof NotFoundError)) throw error;
      }),
  );
  return session;
}

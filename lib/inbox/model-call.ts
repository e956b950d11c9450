import type { FetchedNotice } from './delivery-records.ts';
import type { Inbox } from './inbox.ts';
import type { ConsumeResult } from './types.ts';

/**
 * Consumes the notices of a session that was just read (so it exists) for model call `turn`
 * (0 for a chat completion): `fetched` is the inbox read ahead alongside a turn's claim. The one
 * way turns (lib/turn/notices.ts) and chat completions that name a session
 * (lib/openai/chat-completion.ts) consume the inbox. `session`: its creation time and, where its
 * config has one, its `incarnation` (ConsumeOptions). `room`: how many notices it takes at most
 * (ConsumeOptions), the inbox's `noticesPerTurn` when not given; `runner`: the random `writer` of
 * the turn's run (ConsumeOptions).
 */
export function consumeForModelCall(
  inbox: Pick<Inbox, 'consume'>,
  sessionId: string,
  session: { created_at: string; incarnation: string | undefined },
  turn: number,
  fetched?: Promise<FetchedNotice[]>,
  room?: number,
  runner?: string,
): Promise<ConsumeResult> {
  return inbox.consume(sessionId, {
    turn,
    sessionExists: true,
    since: session.created_at,
    incarnation: session.incarnation,
    ...(fetched ? { fetched } : {}),
    ...(room === undefined ? {} : { room }),
    ...(runner === undefined ? {} : { runner }),
  });
}

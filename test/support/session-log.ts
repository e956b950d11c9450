import type { Summarized } from '../../lib/session/log/compaction.ts';
import type { NewContext } from '../../lib/session/log/types.ts';
import { SessionLog as Log, type SessionLogOptions } from '../../lib/session/session-log.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { viewPolicy } from '../../lib/turn/view-policy.ts';

export type * from '../../lib/session/session-log.ts';

/**
 * The session log with the view policy the service gives it (lib/turn/view-policy.ts) unless
 * told otherwise, checking each view built from its base against the whole build (checkViews).
 */
export class SessionLog extends Log {
  constructor(store: ObjectStore, options: Partial<SessionLogOptions> = {}) {
    super(store, { viewPolicy, checkViews: true, ...options });
  }
}

/** A summarizer's answer for `SessionLog.compact`: `context`, made by a model call that used nothing. */
export function summarized(context: NewContext): Summarized {
  const usage = {
    input_tokens: 0,
    cached_input_tokens: 0,
    cache_write_tokens: 0,
    output_tokens: 0,
    reasoning_tokens: 0,
  };
  return { context, usage: { ...usage, cost_usd: 0 } };
}

/**
 * The inbox of services that have none (appendItems' `inbox`): a dead turn taken out of a session
 * (lib/turn/dead-turn.ts) consumed no notices.
 */
export const inbox = { tookNothing: async () => true };

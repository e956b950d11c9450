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

import { Inbox } from '../../lib/inbox/inbox.ts';
import type { InboxOptions } from '../../lib/inbox/types.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import type { SessionLogOptions } from '../../lib/session/session-log.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import type { TransferServices } from '../../lib/transfer.ts';
import { SessionLog } from './session-log.ts';

/**
 * A session log and an inbox over `store`, and the services an export or import runs with
 * (lib/transfer.ts), the inbox asking the store whether a session exists, as the service's does.
 */
export function transferWorld(
  store: ObjectStore,
  options: { log?: Partial<SessionLogOptions>; inbox?: Partial<Omit<InboxOptions, 'sessionExists'>> } = {},
) {
  const sessions = new SessionLog(store, options.log);
  const inbox = new Inbox(store, { sessionExists: sessionExistsIn(store, ''), ...options.inbox });
  const services: TransferServices = { sessions, inbox, env: {} };
  return { store, sessions, inbox, services };
}

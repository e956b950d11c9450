import type { ObjectInfo } from '../../store/object-store.ts';
import type { SessionConfig } from '../records.ts';

/** A session config as read: parsed, with the object's info (its etag for a conditional put). */
export interface ConfigRead {
  config: SessionConfig;
  info: ObjectInfo;
}

/**
 * One request's hand-off of a session config read: the read of a bound token's check
 * (SessionLog.tokenBinding, which the HTTP layer runs before the route: the turn limits and the
 * revocation check) is kept, and the next read of that session's config in the request takes
 * it instead of a get. Taken once: every later read, a retry after a conditional put lost, and
 * every read after a write of the request's own, gets the object again. The HTTP layer makes
 * one per request and clears it once the route has answered (functions/app.ts), so nothing
 * kept outlives the request's handling, nor reaches another request.
 */
export class ConfigHandoff {
  readonly #kept = new Map<string, ConfigRead>();

  keep(id: string, read: ConfigRead): void {
    this.#kept.set(id, read);
  }

  /** The read kept for session `id`, if any, which is then kept no more. */
  take(id: string): ConfigRead | undefined {
    const read = this.#kept.get(id);
    this.#kept.delete(id);
    return read;
  }

  clear(): void {
    this.#kept.clear();
  }
}

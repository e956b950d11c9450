import type { ObjectInfo, ObjectStore } from '../../store/object-store.ts';
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
 * it instead of a get. Taken once: every later read, a retry after a conditional put lost, gets
 * the object again; and a write of the request's own through the store `watch` gave (of any key:
 * a read after a write may be what checks that the session was not deleted meanwhile) drops
 * what is kept. The HTTP layer makes one per request, builds the request's services on its
 * watched store and clears it once the route has answered (functions/app.ts), so nothing kept
 * outlives the request's handling, nor reaches another request.
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

  /** `store`, each of whose writes (a put, a delete) first drops every read kept. */
  watch(store: ObjectStore): ObjectStore {
    return new WatchedStore(store, this);
  }
}

/** See ConfigHandoff.watch. It names the store it wraps `inner` (object-store.ts backendOf). */
class WatchedStore implements ObjectStore {
  readonly inner: ObjectStore;
  readonly #handoff: ConfigHandoff;

  constructor(inner: ObjectStore, handoff: ConfigHandoff) {
    this.inner = inner;
    this.#handoff = handoff;
  }

  get(...args: Parameters<ObjectStore['get']>): ReturnType<ObjectStore['get']> {
    return this.inner.get(...args);
  }

  head(...args: Parameters<ObjectStore['head']>): ReturnType<ObjectStore['head']> {
    return this.inner.head(...args);
  }

  list(...args: Parameters<ObjectStore['list']>): ReturnType<ObjectStore['list']> {
    return this.inner.list(...args);
  }

  put(...args: Parameters<ObjectStore['put']>): ReturnType<ObjectStore['put']> {
    this.#handoff.clear();
    return this.inner.put(...args);
  }

  delete(...args: Parameters<ObjectStore['delete']>): ReturnType<ObjectStore['delete']> {
    this.#handoff.clear();
    return this.inner.delete(...args);
  }
}

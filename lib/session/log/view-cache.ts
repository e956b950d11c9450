import { deepFreeze } from '../../deep-readonly.ts';
import { BoundedCache, perBackend } from './bounded-cache.ts';
import type { LogView } from '../view-records.ts';

/**
 * Parsed views, kept for the life of the process (the isolate on Workers) so that a turn does
 * not fetch and parse again the view it or the packer before it already has: at a million
 * items a view is megabytes of JSON, the largest object a turn reads. Exact by construction:
 * a view's key is written once (create-only) and never names anything else; a session
 * deleted and created again gets a new generation, so new keys. The cache only saves the
 * read; what the turn does with the view is the same.
 *
 * Bounded by the bytes of the views' JSON (about as much heap again once parsed), and it
 * keeps one view per session: a newer view of a session evicts the older one. Cached views are
 * frozen, so code that would change one in place fails at once.
 */
export class ViewCache {
  readonly #entries: BoundedCache<LogView>;
  /** A session's views are siblings: the same key up to the record part. Session -> its view's key. */
  readonly #bySession = new Map<string, string>();

  constructor(maxBytes: number) {
    this.#entries = new BoundedCache(maxBytes, (key) => this.#forgetSession(key));
  }

  get maxSize(): number {
    return this.#entries.maxSize;
  }

  get bytes(): number {
    return this.#entries.size;
  }

  get(key: string): LogView | undefined {
    return this.#entries.get(key);
  }

  /** The view this cache keeps of the session of the view under `key` (a view key). */
  sessionView(key: string): LogView | undefined {
    const held = this.#bySession.get(sessionOf(key));
    return held === undefined ? undefined : this.#entries.get(held);
  }

  /** Keeps `view`, stored as `bytes` of JSON under `key`. */
  set(key: string, view: LogView, bytes: number): void {
    if (bytes > this.maxSize || this.#entries.has(key)) return;
    const session = sessionOf(key);
    const older = this.#bySession.get(session);
    if (older !== undefined) this.#entries.delete(older);
    this.#bySession.set(session, key);
    deepFreeze(view);
    this.#entries.set(key, view, bytes);
  }

  #forgetSession(key: string): void {
    const session = sessionOf(key);
    if (this.#bySession.get(session) === key) this.#bySession.delete(session);
  }
}

function sessionOf(key: string): string {
  return key.slice(0, key.lastIndexOf('/') + 1);
}

/**
 * The cache of `store`'s backend (one per store under its wrappers, `backendOf`: two stores
 * never share views, two wrappers of one do), or null when `maxBytes` is 0.
 */
export const viewCacheOf = perBackend((maxBytes) => new ViewCache(maxBytes));

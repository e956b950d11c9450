import { deepFreeze } from '../../deep-readonly.ts';
import { backendOf, type ObjectStore } from '../../store/object-store.ts';
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
  readonly maxBytes: number;
  /** Oldest first (a Map keeps insertion order): key -> view and its size. */
  readonly #entries = new Map<string, { view: LogView; bytes: number; session: string }>();
  readonly #bySession = new Map<string, string>();
  #bytes = 0;

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  get bytes(): number {
    return this.#bytes;
  }

  get(key: string): LogView | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    // Most recently used last.
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    return entry.view;
  }

  /** Keeps `view`, stored as `bytes` of JSON under `key`. */
  set(key: string, view: LogView, bytes: number): void {
    if (bytes > this.maxBytes || this.#entries.has(key)) return;
    // A session's views are siblings: the same key up to the record part.
    const session = key.slice(0, key.lastIndexOf('/') + 1);
    const older = this.#bySession.get(session);
    if (older !== undefined) this.#evict(older);
    deepFreeze(view);
    this.#entries.set(key, { view, bytes, session });
    this.#bySession.set(session, key);
    this.#bytes += bytes;
    for (const [oldest] of this.#entries) {
      if (this.#bytes <= this.maxBytes) break;
      this.#evict(oldest);
    }
  }

  #evict(key: string): void {
    const entry = this.#entries.get(key);
    if (!entry) return;
    this.#entries.delete(key);
    if (this.#bySession.get(entry.session) === key) this.#bySession.delete(entry.session);
    this.#bytes -= entry.bytes;
  }
}

const caches = new WeakMap<ObjectStore, ViewCache>();

/**
 * The cache of `store`'s backend (one per store under its wrappers, `backendOf`: two stores
 * never share views, two wrappers of one do), or null when `maxBytes` is 0.
 */
export function viewCacheOf(store: ObjectStore, maxBytes: number): ViewCache | null {
  if (maxBytes <= 0) return null;
  const backend = backendOf(store);
  let cache = caches.get(backend);
  if (!cache || cache.maxBytes !== maxBytes) {
    cache = new ViewCache(maxBytes);
    caches.set(backend, cache);
  }
  return cache;
}

import { deepFreeze } from '../../deep-readonly.ts';
import { BoundedCache, perBackend } from './bounded-cache.ts';
import type { LogView } from '../view-records.ts';
import type { LogItem } from '../records.ts';

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

  /**
   * Keeps `view`, stored as `bytes` of JSON under `key`. `base`: the view it was built from,
   * whose tail items it mostly holds again.
   */
  set(key: string, view: LogView, bytes: number, base?: LogView | null): void {
    if (bytes > this.maxSize || this.#entries.has(key)) return;
    const session = sessionOf(key);
    const older = this.#bySession.get(session);
    if (older !== undefined) this.#entries.delete(older);
    this.#bySession.set(session, key);
    freezeView(view, base);
    this.#entries.set(key, view, bytes);
  }

  #forgetSession(key: string): void {
    const session = sessionOf(key);
    if (this.#bySession.get(session) === key) this.#bySession.delete(session);
  }
}

/**
 * Freezes `view` through (deepFreeze). The items of its tail that the tail of `base`, frozen
 * through already, holds in the same order are not looked at: a long history's tail is tens of
 * thousands of items scattered over the heap, nearly all of them its base's.
 */
function freezeView(view: LogView, base: LogView | null | undefined): void {
  const items = view.tail?.items as readonly LogItem[] | undefined;
  const held = base?.tail?.items as readonly LogItem[] | undefined;
  if (items && held && Object.isFrozen(held) && !Object.isFrozen(items)) {
    let at = 0;
    for (const item of items) {
      if (held[at] !== item) while (at < held.length && held[at]!.seq < item.seq) at++;
      if (held[at] === item) at++;
      else deepFreeze(item);
    }
    Object.freeze(items);
  }
  deepFreeze(view);
}

function sessionOf(key: string): string {
  return key.slice(0, key.lastIndexOf('/') + 1);
}

/**
 * The cache of `store`'s backend (one per store under its wrappers, `backendOf`: two stores
 * never share views, two wrappers of one do), or null when `maxBytes` is 0.
 */
export const viewCacheOf = perBackend((maxBytes) => new ViewCache(maxBytes));

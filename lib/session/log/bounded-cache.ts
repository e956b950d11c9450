import { backendOf, type ObjectStore } from '../../store/object-store.ts';

/**
 * What the log's process caches (views, records, repeat-index shards) have in common: entries
 * bounded by the sum of their sizes, the oldest going first (a Map keeps insertion order; `get`
 * makes an entry the newest, `peek` does not), and one cache per store backend.
 */
export class BoundedCache<V> {
  readonly maxSize: number;
  readonly #entries = new Map<string, { value: V; size: number }>();
  readonly #onEvict: ((key: string, value: V) => void) | undefined;
  #size = 0;
  /**
   * Where eviction goes on from: a Map iterator goes on past entries added and deleted since it
   * was made, and every entry it has passed was evicted (`get` moves an entry to the end), so
   * its next entry is the oldest. Made anew once it is done. One iterator, not one per
   * eviction: a new one steps over every entry deleted since the Map last compacted itself
   * (microseconds a `set` in a cache of thousands of entries).
   */
  #oldest: Iterator<[string, { value: V; size: number }]> | undefined;

  /** `onEvict` hears of each entry that room was made by dropping. */
  constructor(maxSize: number, onEvict?: (key: string, value: V) => void) {
    this.maxSize = maxSize;
    this.#onEvict = onEvict;
  }

  /** The sum of the sizes kept. */
  get size(): number {
    return this.#size;
  }

  has(key: string): boolean {
    return this.#entries.has(key);
  }

  /** The value under `key`, made the most recently used. */
  get(key: string): V | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    return entry.value;
  }

  /** The value under `key`, its place unchanged. */
  peek(key: string): V | undefined {
    return this.#entries.get(key)?.value;
  }

  /** Keeps `value` of `size` under `key` as the newest; a value larger than the bound is not kept. */
  set(key: string, value: V, size: number): void {
    if (size > this.maxSize) return;
    this.delete(key);
    this.#entries.set(key, { value, size });
    this.#size += size;
    while (this.#size > this.maxSize) {
      let next = this.#oldest?.next();
      if (!next || next.done) {
        this.#oldest = this.#entries.entries();
        next = this.#oldest.next();
      }
      // Not done: what is over the bound is in the cache.
      const [oldest, entry] = next.value as [string, { value: V; size: number }];
      this.delete(oldest);
      this.#onEvict?.(oldest, entry.value);
    }
  }

  delete(key: string): void {
    const entry = this.#entries.get(key);
    if (!entry) return;
    this.#entries.delete(key);
    this.#size -= entry.size;
  }
}

/**
 * A function giving the cache of a store's backend (`backendOf`: two stores never share one,
 * two wrappers of one store do), made by `make` and made anew when the bound asked for
 * changes; null for a bound of 0 (no cache).
 */
export function perBackend<C extends { readonly maxSize: number }>(
  make: (maxSize: number) => C,
): (store: ObjectStore, maxSize: number) => C | null {
  const caches = new WeakMap<ObjectStore, C>();
  return (store, maxSize) => {
    if (maxSize <= 0) return null;
    const backend = backendOf(store);
    let cache = caches.get(backend);
    if (!cache || cache.maxSize !== maxSize) {
      cache = make(maxSize);
      caches.set(backend, cache);
    }
    return cache;
  };
}

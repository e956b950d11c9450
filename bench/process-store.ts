import type {
  Body,
  GetOptions,
  ListOptions,
  ListResult,
  ObjectInfo,
  ObjectStore,
  PutOptions,
  StoredObject,
} from '../lib/store/object-store.ts';

/**
 * One process's view of a shared store: its own backend as far as `backendOf` sees (the inner
 * store is private), so the caches and schedules a process keeps per backend (view cache, pack
 * schedule) start empty for each. `end()` ends the process: every call it makes afterwards
 * fails, as its background work would once it is gone.
 */
export class ProcessStore implements ObjectStore {
  readonly #inner: ObjectStore;
  #ended = false;

  constructor(inner: ObjectStore) {
    this.#inner = inner;
  }

  end(): void {
    this.#ended = true;
  }

  get(key: string, options?: GetOptions): Promise<StoredObject | null> {
    return this.#run(() => this.#inner.get(key, options));
  }

  head(key: string): Promise<ObjectInfo | null> {
    return this.#run(() => this.#inner.head(key));
  }

  put(key: string, body: Body, options?: PutOptions): Promise<ObjectInfo | null> {
    return this.#run(() => this.#inner.put(key, body, options));
  }

  list(prefix: string, options?: ListOptions): Promise<ListResult> {
    return this.#run(() => this.#inner.list(prefix, options));
  }

  delete(keys: string | string[]): Promise<void> {
    return this.#run(() => this.#inner.delete(keys));
  }

  async #run<T>(call: () => Promise<T>): Promise<T> {
    if (this.#ended) throw new Error('the process has ended');
    return call();
  }
}

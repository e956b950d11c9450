import type { GetOptions, ListOptions, ObjectStore, PutOptions } from '../../lib/store/object-store.ts';

export type StoreOperation = 'get' | 'head' | 'put' | 'list' | 'delete';

/**
 * Wraps an ObjectStore: calls for which `shouldFail(operation, key)` is true throw, and
 * every call waits a random 0-`jitterMs` milliseconds first, so concurrent callers interleave
 * the way they do against a real server.
 */
export class FailingStore implements ObjectStore {
  readonly calls: Array<{ operation: StoreOperation; key: string }> = [];

  constructor(
    readonly inner: ObjectStore,
    public shouldFail: (operation: StoreOperation, key: string) => boolean = () => false,
    readonly jitterMs = 0,
  ) {}

  async #enter(operation: StoreOperation, key: string): Promise<void> {
    this.calls.push({ operation, key });
    if (this.jitterMs > 0) await new Promise((resolve) => setTimeout(resolve, Math.random() * this.jitterMs));
    if (this.shouldFail(operation, key)) throw new Error(`injected ${operation} failure on ${key}`);
  }

  async get(key: string, options?: GetOptions) {
    await this.#enter('get', key);
    return this.inner.get(key, options);
  }

  async head(key: string) {
    await this.#enter('head', key);
    return this.inner.head(key);
  }

  async put(key: string, body: Uint8Array | string, options?: PutOptions) {
    await this.#enter('put', key);
    return this.inner.put(key, body, options);
  }

  async list(prefix: string, options?: ListOptions) {
    await this.#enter('list', prefix);
    return this.inner.list(prefix, options);
  }

  async delete(keys: string | string[]) {
    await this.#enter('delete', Array.isArray(keys) ? keys.join(',') : keys);
    return this.inner.delete(keys);
  }
}

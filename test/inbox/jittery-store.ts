import type { Body, GetOptions, ListOptions, ObjectStore, PutOptions } from '../../lib/store/object-store.ts';

/**
 * Wraps an ObjectStore and delays every call by a random 0-`jitterMs` milliseconds, so
 * concurrent callers over the in-memory store interleave the way they do against a server.
 */
export class JitteryStore implements ObjectStore {
  readonly inner: ObjectStore;
  readonly jitterMs: number;

  constructor(inner: ObjectStore, jitterMs: number) {
    this.inner = inner;
    this.jitterMs = jitterMs;
  }

  async #wait(): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, Math.random() * this.jitterMs));
  }

  async get(key: string, options?: GetOptions) {
    await this.#wait();
    return this.inner.get(key, options);
  }

  async head(key: string) {
    await this.#wait();
    return this.inner.head(key);
  }

  async put(key: string, body: Body, options?: PutOptions) {
    await this.#wait();
    return this.inner.put(key, body, options);
  }

  async list(prefix: string, options?: ListOptions) {
    await this.#wait();
    return this.inner.list(prefix, options);
  }

  async delete(keys: string | string[]) {
    await this.#wait();
    return this.inner.delete(keys);
  }
}

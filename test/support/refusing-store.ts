import type { Body, ObjectInfo, ObjectStore, PutOptions } from '../../lib/store/object-store.ts';

/**
 * `inner`, whose next create-only put of a key `refused` picks, once armed, lands and is answered
 * as refused: what a store's retry meeting its own first attempt answers.
 */
export class LandsRefusedStore implements ObjectStore {
  armed = false;
  readonly inner: ObjectStore;
  readonly #refused: (key: string) => boolean;

  constructor(inner: ObjectStore, refused: (key: string) => boolean) {
    this.inner = inner;
    this.#refused = refused;
  }

  get: ObjectStore['get'] = (...args) => this.inner.get(...args);
  head: ObjectStore['head'] = (...args) => this.inner.head(...args);
  list: ObjectStore['list'] = (...args) => this.inner.list(...args);
  delete: ObjectStore['delete'] = (...args) => this.inner.delete(...args);

  async put(key: string, body: Body, options?: PutOptions): Promise<ObjectInfo | null> {
    const written = await this.inner.put(key, body, options);
    if (!this.armed || !options?.onlyIfAbsent || !this.#refused(key)) return written;
    this.armed = false;
    return null;
  }
}

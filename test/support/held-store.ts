import type { StoreOperation } from './counting-store.ts';
import type {
  Body,
  GetOptions,
  ListOptions,
  ListResult,
  ObjectInfo,
  ObjectStore,
  PutOptions,
  StoredObject,
} from '../../lib/store/object-store.ts';

/** One call as a hold's rule sees it: a delete of many keys is seen with all of them. */
export interface HeldCall {
  operation: StoreOperation;
  keys: string[];
  options?: PutOptions;
}

/** A call held: `reached` once it arrived (waiting), `release` lets it go on. */
export interface Hold {
  reached: Promise<void>;
  release: () => void;
}

/**
 * Wraps any ObjectStore (memory, file) and holds chosen calls before they reach it, for races
 * with several actors: `hold(when)` holds the first call `when` picks until its `release()`, so
 * a test runs what races that call in between.
 */
export class HeldStore implements ObjectStore {
  readonly inner: ObjectStore;
  readonly #holds: { when: (call: HeldCall) => boolean; arrived: () => void; released: Promise<void> }[] = [];

  constructor(inner: ObjectStore) {
    this.inner = inner;
  }

  hold(when: (call: HeldCall) => boolean): Hold {
    let arrived!: () => void;
    let release!: () => void;
    const reached = new Promise<void>((resolve) => (arrived = resolve));
    const released = new Promise<void>((resolve) => (release = resolve));
    this.#holds.push({ when, arrived, released });
    return { reached, release };
  }

  get(key: string, options?: GetOptions): Promise<StoredObject | null> {
    return this.#run({ operation: 'get', keys: [key] }, () => this.inner.get(key, options));
  }

  head(key: string): Promise<ObjectInfo | null> {
    return this.#run({ operation: 'head', keys: [key] }, () => this.inner.head(key));
  }

  put(key: string, body: Body, options?: PutOptions): Promise<ObjectInfo | null> {
    const call = { operation: 'put' as const, keys: [key], ...(options ? { options } : {}) };
    return this.#run(call, () => this.inner.put(key, body, options));
  }

  list(prefix: string, options?: ListOptions): Promise<ListResult> {
    return this.#run({ operation: 'list', keys: [prefix] }, () => this.inner.list(prefix, options));
  }

  delete(keys: string | string[]): Promise<void> {
    return this.#run({ operation: 'delete', keys: Array.isArray(keys) ? keys : [keys] }, () => this.inner.delete(keys));
  }

  async #run<T>(call: HeldCall, work: () => Promise<T>): Promise<T> {
    const index = this.#holds.findIndex((hold) => hold.when(call));
    if (index >= 0) {
      const [hold] = this.#holds.splice(index, 1);
      hold!.arrived();
      await hold!.released;
    }
    return work();
  }
}

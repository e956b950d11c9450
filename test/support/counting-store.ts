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
import { bodyLength } from '../../lib/store/object-store.ts';

/** The five ObjectStore operations, as counted and as matched by fault rules. */
export type StoreOperation = 'get' | 'head' | 'put' | 'list' | 'delete';

export interface StoreCounts {
  get: number;
  head: number;
  put: number;
  list: number;
  /** Calls to delete (a call with many keys counts once). */
  delete: number;
  /** Body bytes returned by get (the ranged bytes only, for a ranged get). */
  bytesRead: number;
  /** Body bytes handed to put, whether or not its precondition held. */
  bytesWritten: number;
}

/**
 * Wraps an ObjectStore and counts calls by operation and the body bytes moved, so tests and
 * benchmarks can check what a turn costs in storage operations and read amplification.
 * Failed calls count too: a request was made.
 *
 * @example
 * const store = new CountingStore(new MemoryStore());
 * await runTurn(store);
 * expect(store.operations).toBeLessThanOrEqual(8);
 */
export class CountingStore implements ObjectStore {
  readonly inner: ObjectStore;
  #counts: StoreCounts = emptyCounts();
  /** The key of each put since construction or the last reset, in order. */
  readonly putKeys: string[] = [];

  constructor(inner: ObjectStore) {
    this.inner = inner;
  }

  /** A snapshot of the counts since construction or the last reset. */
  get counts(): StoreCounts {
    return { ...this.#counts };
  }

  /** Total operations of every kind. */
  get operations(): number {
    const { get, head, put, list, delete: deletes } = this.#counts;
    return get + head + put + list + deletes;
  }

  reset(): void {
    this.#counts = emptyCounts();
    this.putKeys.length = 0;
  }

  async get(key: string, options?: GetOptions): Promise<StoredObject | null> {
    this.#counts.get += 1;
    const object = await this.inner.get(key, options);
    if (object) this.#counts.bytesRead += object.body.length;
    return object;
  }

  async head(key: string): Promise<ObjectInfo | null> {
    this.#counts.head += 1;
    return this.inner.head(key);
  }

  async put(key: string, body: Body, options?: PutOptions): Promise<ObjectInfo | null> {
    this.#counts.put += 1;
    this.putKeys.push(key);
    this.#counts.bytesWritten += bodyLength(body);
    return this.inner.put(key, body, options);
  }

  async list(prefix: string, options?: ListOptions): Promise<ListResult> {
    this.#counts.list += 1;
    return this.inner.list(prefix, options);
  }

  async delete(keys: string | string[]): Promise<void> {
    this.#counts.delete += 1;
    return this.inner.delete(keys);
  }
}

function emptyCounts(): StoreCounts {
  return { get: 0, head: 0, put: 0, list: 0, delete: 0, bytesRead: 0, bytesWritten: 0 };
}

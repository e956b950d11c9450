import { StorageError } from '../../lib/errors.ts';
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

/** One call as a fault rule sees it. */
export interface StoreCall {
  operation: StoreOperation;
  /** The object key; the prefix for list; each key in turn for a delete of many. */
  key: string;
  /** 1-based number of this call among calls of the same operation. */
  index: number;
  /** A put's options (`onlyIfAbsent`: a create-only put). */
  options?: PutOptions;
}

export interface FaultOptions {
  /**
   * Fail after the inner store has done the work (the write landed, the caller never hears),
   * instead of before it. This is the ambiguous outcome retries must survive.
   */
  after?: boolean;
  /** Fail at most this many matching calls, then let them through. Default: unlimited. */
  times?: number;
  /** The error to throw. Default: a StorageError naming the operation and key. */
  error?: (call: StoreCall) => Error;
}

/** How the store answers besides the faults: what the ObjectStore contract allows that a local store never does. */
export interface FaultyStoreOptions {
  /**
   * A delete of several keys removes them one call at a time, the last first, each call seen by
   * the rules on its own: a batch delete (S3's DeleteObjects, R2's) keeps no order, and a fault
   * on one key leaves the ones removed before it gone.
   */
  deleteEachLastFirst?: boolean;
  /** The most keys a page of a listing under `prefix` holds (R2 answers fewer than asked); undefined: as asked. */
  pageLimit?: (prefix: string) => number | undefined;
}

interface FaultRule extends FaultOptions {
  when: (call: StoreCall) => boolean;
  remaining: number;
}

/**
 * Wraps an ObjectStore and makes chosen calls fail, for fault tests: "the second put under
 * turn/ fails", "every list fails once", "this put lands but its response is lost".
 *
 * @example
 * const store = new FaultyStore(new MemoryStore())
 *   .failWhen(({ operation, key }) => operation === 'put' && key.includes('/turn/'), { times: 1 });
 */
export class FaultyStore implements ObjectStore {
  readonly inner: ObjectStore;
  readonly #options: FaultyStoreOptions;
  readonly #rules: FaultRule[] = [];
  readonly #calls: Record<StoreOperation, number> = { get: 0, head: 0, put: 0, list: 0, delete: 0 };
  /** Number of failures injected so far. */
  injected = 0;

  constructor(inner: ObjectStore, options: FaultyStoreOptions = {}) {
    this.inner = inner;
    this.#options = options;
  }

  /** Adds a rule; the first matching rule with failures left decides. Returns this. */
  failWhen(when: (call: StoreCall) => boolean, options: FaultOptions = {}): this {
    this.#rules.push({ ...options, when, remaining: options.times ?? Number.POSITIVE_INFINITY });
    return this;
  }

  /** Removes every rule; calls pass through again. */
  heal(): void {
    this.#rules.length = 0;
  }

  get(key: string, options?: GetOptions): Promise<StoredObject | null> {
    return this.#run('get', [key], () => this.inner.get(key, options));
  }

  head(key: string): Promise<ObjectInfo | null> {
    return this.#run('head', [key], () => this.inner.head(key));
  }

  put(key: string, body: Body, options?: PutOptions): Promise<ObjectInfo | null> {
    return this.#run('put', [key], () => this.inner.put(key, body, options), options);
  }

  list(prefix: string, options?: ListOptions): Promise<ListResult> {
    const limit = this.#options.pageLimit?.(prefix);
    const asked = limit === undefined ? options : { ...options, limit };
    return this.#run('list', [prefix], () => this.inner.list(prefix, asked));
  }

  delete(keys: string | string[]): Promise<void> {
    if (this.#options.deleteEachLastFirst && Array.isArray(keys)) return this.#deleteEach(keys);
    return this.#run('delete', Array.isArray(keys) ? keys : [keys], () => this.inner.delete(keys));
  }

  async #deleteEach(keys: string[]): Promise<void> {
    for (const key of [...keys].reverse()) await this.#run('delete', [key], () => this.inner.delete(key));
  }

  async #run<T>(operation: StoreOperation, keys: string[], work: () => Promise<T>, options?: PutOptions): Promise<T> {
    this.#calls[operation] += 1;
    const index = this.#calls[operation];
    let fault: { rule: FaultRule; call: StoreCall } | undefined;
    for (const key of keys) {
      const call: StoreCall = { operation, key, index, ...(options ? { options } : {}) };
      const rule = this.#rules.find((candidate) => candidate.remaining > 0 && candidate.when(call));
      if (rule) {
        fault = { rule, call };
        break;
      }
    }
    if (!fault) return work();
    fault.rule.remaining -= 1;
    this.injected += 1;
    const error =
      fault.rule.error?.(fault.call) ?? new StorageError(`injected fault: ${operation} ${fault.call.key}`, fault.call);
    if (fault.rule.after) await work();
    throw error;
  }
}

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

/** One storage call as a DepthStore saw it. */
export interface DepthCall {
  op: 'get' | 'head' | 'put' | 'list' | 'delete';
  key: string;
  /** 1 + the deepest call (since the last `mark`) that had completed when this one started. */
  depth: number;
  /** Calls (since the last `mark`) that had completed when this one started. */
  completedBefore: number;
  startedAt: number;
  endedAt?: number;
}

/**
 * Wraps an ObjectStore and records, for every call, how many sequential round trips lead up
 * to it: its depth is one more than the deepest call that had completed before it started.
 * Calls started together (Promise.all) share a depth; a call that waited for another is one
 * deeper. `delayMs` adds that much latency to every call, as a remote store would; `turns` adds
 * that many turns of the event loop instead (setImmediate), which no wall clock or load can reorder.
 *
 * @example
 * const store = new DepthStore(new MemoryStore());
 * store.mark();
 * await runTurn(...);
 * store.depth() // the longest chain of calls one after another
 */
export class DepthStore implements ObjectStore {
  readonly inner: ObjectStore;
  readonly delayMs: number;
  readonly turns: number;
  #calls: DepthCall[] = [];
  #completed: DepthCall[] = [];
  #inFlight = 0;

  constructor(inner: ObjectStore, options: { delayMs?: number; turns?: number } = {}) {
    this.inner = inner;
    this.delayMs = options.delayMs ?? 0;
    this.turns = options.turns ?? 0;
  }

  /** Starts counting afresh: later calls no longer see earlier ones. */
  mark(): void {
    this.#calls = [];
    this.#completed = [];
  }

  /** The calls since the last `mark`, in the order they started. */
  get calls(): readonly DepthCall[] {
    return [...this.#calls];
  }

  /** The deepest call since the last `mark` (0: none), among those `filter` keeps. */
  depth(filter: (call: DepthCall) => boolean = () => true): number {
    return Math.max(0, ...this.#calls.filter(filter).map((call) => call.depth));
  }

  /** Resolves once no call has been in flight for a timer tick (what a slow caller would find). */
  async idle(): Promise<void> {
    do await new Promise((resolve) => setTimeout(resolve, 1));
    while (this.#inFlight > 0);
  }

  async #track<Result>(op: DepthCall['op'], key: string, run: () => Promise<Result>): Promise<Result> {
    const depth = 1 + Math.max(0, ...this.#completed.map((call) => call.depth));
    const call: DepthCall = { op, key, depth, completedBefore: this.#completed.length, startedAt: performance.now() };
    this.#calls.push(call);
    const calls = this.#calls;
    this.#inFlight += 1;
    try {
      if (this.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.delayMs));
      for (let turn = 0; turn < this.turns; turn++) await new Promise((resolve) => setImmediate(resolve));
      return await run();
    } finally {
      this.#inFlight -= 1;
      call.endedAt = performance.now();
      // A call started before the last mark does not count after it.
      if (calls === this.#calls) this.#completed.push(call);
    }
  }

  get(key: string, options?: GetOptions): Promise<StoredObject | null> {
    return this.#track('get', key, () => this.inner.get(key, options));
  }

  head(key: string): Promise<ObjectInfo | null> {
    return this.#track('head', key, () => this.inner.head(key));
  }

  put(key: string, body: Body, options?: PutOptions): Promise<ObjectInfo | null> {
    return this.#track('put', key, () => this.inner.put(key, body, options));
  }

  list(prefix: string, options?: ListOptions): Promise<ListResult> {
    return this.#track('list', prefix, () => this.inner.list(prefix, options));
  }

  delete(keys: string | string[]): Promise<void> {
    return this.#track('delete', Array.isArray(keys) ? keys.join(',') : keys, () => this.inner.delete(keys));
  }
}

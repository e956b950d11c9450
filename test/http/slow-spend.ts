import { AsyncLocalStorage } from 'node:async_hooks';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { Body, GetOptions, ObjectStore, PutOptions } from '../../lib/store/object-store.ts';
import type { HttpHarness } from './http-suite.ts';

/** A request as the store sees it: answered once its answer was whole. */
const requests = new AsyncLocalStorage<{ answered: boolean }>();

/**
 * Holds each put of a token's spend record made by a request once its answer was (a charge after
 * the response), as a slow store would, until a read of the record asked after it was answered
 * (the value before the put), or until `release`. A put made before the answer goes through.
 */
export class SlowSpendStore implements ObjectStore {
  readonly inner = new MemoryStore();
  #waiting: (() => void)[] = [];

  release(): void {
    for (const go of this.#waiting.splice(0)) go();
  }

  async get(key: string, options?: GetOptions) {
    const waiting = key.includes('token-spend/') ? this.#waiting.splice(0) : [];
    const read = await this.inner.get(key, options);
    for (const go of waiting) go();
    return read;
  }

  async put(key: string, body: Body, options?: PutOptions) {
    if (requests.getStore()?.answered && key.includes('token-spend/'))
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    return this.inner.put(key, body, options);
  }

  head = (key: string) => this.inner.head(key);
  list = (...args: Parameters<ObjectStore['list']>) => this.inner.list(...args);
  delete = (keys: string | string[]) => this.inner.delete(keys);
}

/**
 * `harness`, its requests told apart by the SlowSpendStore under it: a JSON answer is whole once
 * made; a stream's, once read.
 */
export function answeredHarness(harness: HttpHarness): HttpHarness {
  return {
    ...harness,
    fetch: async (path, init) => {
      const request = { answered: false };
      const response = await requests.run(request, () => harness.fetch(path, init));
      if (response.headers.get('content-type')?.includes('json')) request.answered = true;
      else
        void response
          .clone()
          .text()
          .then(() => (request.answered = true));
      return response;
    },
  };
}

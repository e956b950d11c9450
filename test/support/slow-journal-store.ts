import { MemoryStore } from '../../lib/store/memory.ts';
import type { Body, GetOptions, ListOptions, PutOptions } from '../../lib/store/object-store.ts';
import { SeededRandom } from '../../bench/random.ts';

/**
 * A memory store whose event journal writes (`events/` keys) take a seeded random time before
 * they land, so readers list and read, connect and disconnect, while a batch is being written.
 * `inFlight` counts the journal writes under way; `readsDuringWrite`, the journal reads (gets
 * and lists) made while one was under way.
 */
export class SlowJournalStore extends MemoryStore {
  inFlight = 0;
  readsDuringWrite = 0;
  readonly #random: SeededRandom;
  readonly #maxMs: number;

  constructor(seed: number, maxMs = 600) {
    super();
    this.#random = new SeededRandom(seed);
    this.#maxMs = maxMs;
  }

  override async put(key: string, body: Body, options?: PutOptions) {
    if (!key.includes('/events/')) return super.put(key, body, options);
    this.inFlight += 1;
    try {
      await new Promise((resolve) => setTimeout(resolve, this.#random.integer(this.#maxMs / 2, this.#maxMs)));
      return await super.put(key, body, options);
    } finally {
      this.inFlight -= 1;
    }
  }

  override async get(key: string, options?: GetOptions) {
    this.#countRead(key);
    return super.get(key, options);
  }

  override async list(prefix: string, options?: ListOptions) {
    this.#countRead(prefix);
    return super.list(prefix, options);
  }

  #countRead(key: string): void {
    if (key.includes('/events/') && this.inFlight > 0) this.readsDuringWrite += 1;
  }
}

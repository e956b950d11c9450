import { MemoryStore } from '../../lib/store/memory.ts';

/**
 * A memory store whose puts of keys ending in `suffix` wait until `release()`: `reached`
 * resolves when the first one arrives, so a test runs what races that put in between.
 */
export class GatedStore extends MemoryStore {
  readonly reached: Promise<void>;
  readonly release: () => void;
  readonly #suffix: string;
  readonly #arrived: () => void;
  readonly #released: Promise<void>;

  constructor(suffix: string) {
    super();
    this.#suffix = suffix;
    let arrived!: () => void;
    this.reached = new Promise<void>((resolve) => (arrived = resolve));
    this.#arrived = arrived;
    let release!: () => void;
    this.#released = new Promise<void>((resolve) => (release = resolve));
    this.release = release;
  }

  override async put(...args: Parameters<MemoryStore['put']>) {
    if (args[0].endsWith(this.#suffix)) {
      this.#arrived();
      await this.#released;
    }
    return super.put(...args);
  }
}

/**
 * A small seeded PRNG (mulberry32) with the draws the benchmarks need, so every run builds
 * the same sessions byte for byte.
 */
export class SeededRandom {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  /** Where the sequence is: `new SeededRandom(random.state)` draws what `random` draws next. */
  get state(): number {
    return this.#state;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let value = this.#state;
    value = Math.imul(value ^ (value >>> 15), value | 1);
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61);
    return ((value ^ (value >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [min, max]. */
  integer(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** Standard normal (Box-Muller). */
  normal(): number {
    const u = 1 - this.next();
    const v = this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  /**
   * Log-normal with `min` and `max` as its 1st and 99th percentiles (median their geometric
   * mean), clamped to [min, max].
   */
  logNormalBetween(min: number, max: number): number {
    const mu = (Math.log(min) + Math.log(max)) / 2;
    const sigma = (Math.log(max) - Math.log(min)) / (2 * 2.326);
    const value = Math.exp(mu + sigma * this.normal());
    return Math.round(Math.min(max, Math.max(min, value)));
  }

  pick<T>(values: readonly T[]): T {
    return values[Math.floor(this.next() * values.length)]!;
  }
}

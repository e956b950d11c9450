/** Segment writes an import keeps in flight (log/import.ts). */
const MAX_WRITES_IN_FLIGHT = 2;

/**
 * Segment writes in flight while the next lines are read and checked: at most
 * MAX_WRITES_IN_FLIGHT (each holds a segment's bytes), so a store's latency overlaps the work.
 */
export class PendingWrites {
  readonly #writes: Promise<unknown>[] = [];

  /** Starts a write once fewer than MAX_WRITES_IN_FLIGHT are in flight; a failure is thrown by a later call. */
  async add(start: () => Promise<unknown>): Promise<void> {
    while (this.#writes.length >= MAX_WRITES_IN_FLIGHT) await this.#writes.shift();
    const write = start();
    // Observed now, thrown when awaited.
    write.catch(() => undefined);
    this.#writes.push(write);
  }

  /** Every write landed; the first failure is thrown. */
  async drain(): Promise<void> {
    while (this.#writes.length > 0) await this.#writes.shift();
  }

  /** Every write settled, landed or failed. */
  async settle(): Promise<void> {
    await Promise.allSettled(this.#writes.splice(0));
  }
}

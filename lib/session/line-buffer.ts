const encoder = new TextEncoder();

/**
 * Lines written into one buffer, grown by doubling: text is encoded in place (UTF-8: at most 3
 * bytes a UTF-16 unit), bytes are copied, and a line's newline is a byte (`${json}\n` would
 * copy every line once more).
 */
export class LineBuffer {
  #body: Uint8Array;
  /** Bytes written so far. */
  length = 0;

  constructor(capacity: number) {
    this.#body = new Uint8Array(Math.max(1, capacity));
  }

  /** Appends `line` (text, or its UTF-8 bytes), then a newline unless told not to; returns the new length. */
  append(line: string | Uint8Array, newline = true): number {
    if (typeof line === 'string') {
      this.#room(line.length * 3 + 1);
      this.length += encoder.encodeInto(line, this.#body.subarray(this.length)).written;
    } else {
      this.#room(line.length + 1);
      this.#body.set(line, this.length);
      this.length += line.length;
    }
    if (newline) this.#body[this.length++] = 10;
    return this.length;
  }

  /** What was written (a view of the buffer). */
  bytes(): Uint8Array {
    return this.#body.subarray(0, this.length);
  }

  #room(bytes: number): void {
    if (this.#body.length - this.length >= bytes) return;
    let size = this.#body.length * 2;
    while (size - this.length < bytes) size *= 2;
    const grown = new Uint8Array(size);
    grown.set(this.bytes());
    this.#body = grown;
  }
}

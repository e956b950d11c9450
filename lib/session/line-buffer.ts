import { concatBytes } from '../store/object-store.ts';

const encoder = new TextEncoder();

/** Room a new scratch array has at least (text and short byte lines are written into it). */
const SCRATCH_BYTES = 64 * 1024;
/** Byte lines at least this long are kept as views of their array, not copied. */
const VIEW_BYTES = 512;

/**
 * Lines gathered as the parts of one body (a store writes or copies parts once: see
 * ObjectStore.put): text is encoded in place into scratch arrays (UTF-8: at most 3 bytes a
 * UTF-16 unit), short byte lines are copied there, and longer byte lines are kept as views of
 * the array they come in, a run of them that lie one after another in it (a line's newline
 * included, when the byte after it in that array is one) as one view. A line's newline is a byte
 * (`${json}\n` would copy every line once more). The byte lines must not change until the body
 * is written.
 */
export class LineBuffer {
  readonly #parts: Uint8Array[] = [];
  #scratch: Uint8Array;
  /** Where the scratch's part not yet in `#parts` starts, and where its written bytes end. */
  #from = 0;
  #at = 0;
  /** The array of the open run of views (its whole buffer), and the run's byte range in it. */
  #source: Uint8Array | null = null;
  #start = 0;
  #end = 0;
  /** Bytes written so far. */
  length = 0;

  constructor(capacity = SCRATCH_BYTES) {
    this.#scratch = new Uint8Array(Math.max(1, capacity));
  }

  /** Appends `line` (text, or its UTF-8 bytes), then a newline unless told not to; returns the new length. */
  append(line: string | Uint8Array, newline = true): number {
    if (typeof line === 'string') {
      this.#room(line.length * 3 + 1);
      const { written } = encoder.encodeInto(line, this.#scratch.subarray(this.#at));
      this.#at += written;
      this.length += written;
    } else if (!this.#view(line)) {
      this.#room(line.length + 1);
      this.#scratch.set(line, this.#at);
      this.#at += line.length;
      this.length += line.length;
    }
    if (newline) this.#newline();
    return this.length;
  }

  /** What was written, in parts (views of the scratch arrays and of the byte lines kept). */
  parts(): Uint8Array[] {
    this.#close();
    return this.#parts.slice();
  }

  /** What was written, in one array. */
  bytes(): Uint8Array {
    const parts = this.parts();
    return parts.length === 1 ? parts[0]! : concatBytes(parts);
  }

  /** Takes `line` into the open run or a new one; false when it is to be copied. */
  #view(line: Uint8Array): boolean {
    const start = line.byteOffset;
    if (this.#source?.buffer === line.buffer && start === this.#end) {
      this.#end += line.length;
    } else {
      this.#closeRun();
      if (line.length < VIEW_BYTES) return false;
      this.#closeScratch();
      this.#source = new Uint8Array(line.buffer as ArrayBuffer);
      this.#start = start;
      this.#end = start + line.length;
    }
    this.length += line.length;
    return true;
  }

  #newline(): void {
    const source = this.#source;
    if (source && this.#end < source.length && source[this.#end] === 10) {
      this.#end += 1;
      this.length += 1;
      return;
    }
    this.#closeRun();
    this.#room(1);
    this.#scratch[this.#at++] = 10;
    this.length += 1;
  }

  #closeRun(): void {
    if (!this.#source) return;
    this.#parts.push(this.#source.subarray(this.#start, this.#end));
    this.#source = null;
  }

  #closeScratch(): void {
    if (this.#at > this.#from) this.#parts.push(this.#scratch.subarray(this.#from, this.#at));
    this.#from = this.#at;
  }

  #close(): void {
    this.#closeRun();
    this.#closeScratch();
  }

  /** Room for `bytes` more in the scratch: a new array when it lacks it (the parts already taken stay as they are). */
  #room(bytes: number): void {
    this.#closeRun();
    if (this.#scratch.length - this.#at >= bytes) return;
    this.#closeScratch();
    this.#scratch = new Uint8Array(Math.max(SCRATCH_BYTES, bytes));
    this.#from = 0;
    this.#at = 0;
  }
}

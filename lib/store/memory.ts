import {
  compareKeys,
  copiedBytes,
  cursorGroup,
  GROUP_END,
  resolveRange,
  type Body,
  type GetOptions,
  type ListOptions,
  type ListResult,
  type ObjectInfo,
  type ObjectStore,
  type PutOptions,
  type StoredObject,
} from './object-store.ts';
import { sha256Hex } from '../hash.ts';
import { canonicalEtag } from './etag.ts';

interface Entry {
  body: Uint8Array;
  info: Omit<ObjectInfo, 'etag'>;
  /** Of the body alone, made when first asked for (most objects' etags are never read). */
  etag?: string;
}

/** An in-memory ObjectStore for tests and benchmarks. Same semantics as the real adapters. */
export class MemoryStore implements ObjectStore {
  readonly #entries = new Map<string, Entry>();
  /** Every key in byte order, so a list costs O(log n + limit), not a sort of the store. */
  readonly #sorted = new SortedKeys();
  readonly #clock: () => Date;

  /** `clock` stamps `uploaded` (the store's own time, as a real store's clock would). */
  constructor(options: { clock?: () => Date } = {}) {
    this.#clock = options.clock ?? (() => new Date());
  }

  async get(key: string, options: GetOptions = {}): Promise<StoredObject | null> {
    const entry = this.#entries.get(key);
    if (!entry) return null;
    const [start, end] = options.range ? resolveRange(options.range, entry.body.length) : [0, entry.body.length];
    return copyInfo(entry, entry.body.slice(start, end));
  }

  async head(key: string): Promise<ObjectInfo | null> {
    const entry = this.#entries.get(key);
    return entry ? copyInfo(entry) : null;
  }

  async put(key: string, body: Body, options: PutOptions = {}): Promise<ObjectInfo | null> {
    const existing = this.#entries.get(key);
    if (options.onlyIfAbsent && existing) return null;
    if (options.ifMatch !== undefined && (!existing || etagOf(existing) !== canonicalEtag(options.ifMatch)))
      return null;
    const bytes = copiedBytes(body);
    const entry: Entry = {
      body: bytes,
      info: { key, size: bytes.length, uploaded: this.#clock(), metadata: { ...(options.metadata ?? {}) } },
    };
    if (!existing) this.#sorted.insert(key);
    this.#entries.set(key, entry);
    return copyInfo(entry);
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListResult> {
    const limit = Math.max(1, Math.min(options.limit ?? 1000, 1000));
    const after = options.cursor ?? options.startAfter;
    // Keys under a prefix are contiguous in byte order, starting where the prefix would sit.
    const keys =
      after !== undefined && compareKeys(after, prefix) >= 0
        ? this.#sorted.after(after, true)
        : this.#sorted.after(prefix, false);
    const page: string[] = [];
    const prefixes: string[] = [];
    let truncated = false;
    let last = '';
    // The group the previous page ended on: its keys were listed as it.
    const listed = cursorGroup(options.cursor, prefix, options.delimiter);
    for (let iterator = keys[Symbol.iterator](), next = iterator.next(); !next.done; next = iterator.next()) {
      const key = next.value;
      if (!key.startsWith(prefix)) break;
      // A group's keys after the bound its walk jumps to (U+10FFFF right after the delimiter).
      const skipped = prefixes.at(-1) ?? listed;
      if (skipped !== undefined && key.startsWith(skipped)) continue;
      if (page.length + prefixes.length === limit) {
        truncated = true;
        break;
      }
      const at = options.delimiter ? key.indexOf(options.delimiter, prefix.length) : -1;
      if (at < 0) {
        page.push(key);
        last = key;
        continue;
      }
      // A group: listed once, then the walk jumps past every key that starts with it.
      const group = key.slice(0, at + options.delimiter!.length);
      prefixes.push(group);
      last = `${group}${GROUP_END}`;
      iterator = this.#sorted.after(last, true)[Symbol.iterator]();
    }
    const objects = page.map((key) => copyInfo(this.#entries.get(key)!));
    const grouped = options.delimiter !== undefined ? { prefixes } : {};
    return truncated ? { objects, truncated, cursor: last, ...grouped } : { objects, truncated, ...grouped };
  }

  async delete(keys: string | string[]): Promise<void> {
    for (const key of Array.isArray(keys) ? keys : [keys]) {
      if (this.#entries.delete(key)) this.#sorted.remove(key);
    }
  }
}

const CHUNK_SIZE = 512;

/**
 * Keys in byte order, held in chunks of at most 2 * CHUNK_SIZE, so inserts and deletes cost
 * O(log n + CHUNK_SIZE) at any size and in any order (turn keys arrive in descending order,
 * which would make a single sorted array quadratic).
 */
class SortedKeys {
  readonly #chunks: string[][] = [];

  insert(key: string): void {
    if (this.#chunks.length === 0) {
      this.#chunks.push([key]);
      return;
    }
    const index = this.#chunkFor(key);
    const chunk = this.#chunks[index]!;
    chunk.splice(lowerBound(chunk, key), 0, key);
    if (chunk.length > 2 * CHUNK_SIZE) this.#chunks.splice(index + 1, 0, chunk.splice(CHUNK_SIZE));
  }

  remove(key: string): void {
    if (this.#chunks.length === 0) return;
    const index = this.#chunkFor(key);
    const chunk = this.#chunks[index]!;
    const position = lowerBound(chunk, key);
    if (chunk[position] !== key) return;
    chunk.splice(position, 1);
    if (chunk.length === 0) this.#chunks.splice(index, 1);
  }

  /** Keys >= `key` (> `key` when `exclusive`), ascending. */
  *after(key: string, exclusive: boolean): Generator<string> {
    if (this.#chunks.length === 0) return;
    const first = this.#chunkFor(key);
    const firstChunk = this.#chunks[first]!;
    for (let i = exclusive ? upperBound(firstChunk, key) : lowerBound(firstChunk, key); i < firstChunk.length; i++) {
      yield firstChunk[i]!;
    }
    for (let index = first + 1; index < this.#chunks.length; index++) yield* this.#chunks[index]!;
  }

  /** The last chunk whose first key is <= `key` (the first chunk when there is none). */
  #chunkFor(key: string): number {
    let low = 0;
    let high = this.#chunks.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (compareKeys(this.#chunks[middle]![0]!, key) <= 0) low = middle + 1;
      else high = middle;
    }
    return Math.max(0, low - 1);
  }
}

/** First index whose key is >= `key`. */
function lowerBound(sorted: string[], key: string): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (compareKeys(sorted[middle]!, key) < 0) low = middle + 1;
    else high = middle;
  }
  return low;
}

/** First index whose key is > `key`. */
function upperBound(sorted: string[], key: string): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (compareKeys(sorted[middle]!, key) <= 0) low = middle + 1;
    else high = middle;
  }
  return low;
}

/**
 * An entry's etag: of its body alone, as S3's and R2's (its MD5), so a rewrite that keeps the body
 * keeps the etag and an If-Match on the etag read before it lands (docs/STORAGE.md). Canonical
 * (./etag.ts): lower-case hex, unquoted.
 */
function etagOf(entry: Entry): string {
  entry.etag ??= sha256Hex(entry.body);
  return entry.etag;
}

/** A copy of an entry's info (and `body`, given one), its etag hashed only when read. */
function copyInfo(entry: Entry): ObjectInfo;
function copyInfo(entry: Entry, body: Uint8Array): StoredObject;
function copyInfo(entry: Entry, body?: Uint8Array): ObjectInfo | StoredObject {
  const { info } = entry;
  return {
    ...info,
    uploaded: new Date(info.uploaded),
    metadata: { ...info.metadata },
    ...(body ? { body } : {}),
    get etag() {
      return etagOf(entry);
    },
  };
}

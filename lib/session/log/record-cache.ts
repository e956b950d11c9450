import { Buffer } from 'node:buffer';
import { concatBytes, toBytes, type ObjectInfo } from '../../store/object-store.ts';
import { BoundedCache, perBackend } from './bounded-cache.ts';
import { deepFreeze, type DeepReadonly } from '../../deep-readonly.ts';
import type { LogItem, LogRecord } from '../records.ts';

/** A record as the cache shares it between requests: frozen, and typed so that nobody changes it. */
export type CachedRecord = DeepReadonly<LogRecord>;

/**
 * The records this process wrote or parsed, kept with their bytes, so that reading one again
 * (the next commit's head read, the packer) does not decode, parse and validate again what it
 * built or checked already: at 250 items a record with its carried `recent` is over a megabyte
 * of JSON, read at least twice. Exact by construction: a record is used only when the bytes
 * read are the bytes kept with it under that key (a tombstone, a record written again after a
 * delete, another process's record all differ), so the result is what parsing would give; or,
 * without reading it, when a listing shows the key with the etag and size the record was stored
 * or read with (`recallListed`): an etag names one stored content of its key (the memory store's
 * is its body's SHA-256, S3's and R2's its MD5, the file store's unique to each put), as the
 * conditional requests the log relies on take it to, so the listed object holds the bytes kept.
 * Kept for the life of the process (the isolate on Workers), one per store backend as the
 * view cache is, bounded by the bytes of the records' JSON (RECORD_CACHE_BYTES), the oldest
 * going first. A kept record is shared by every later read of its bytes, in any request, so
 * it is deep-frozen when kept: code that would change one in place throws at once instead of
 * corrupting the next reader's copy. Also here: the bytes of a record as a commit stores
 * them, its carried groups encoded once (`recordBody`).
 */
export class RecordCache {
  /** Oldest first; a recall does not make a record newer. */
  readonly #entries: BoundedCache<{ bytes: Uint8Array; record: CachedRecord; etag: string | undefined }>;

  constructor(maxBytes: number) {
    this.#entries = new BoundedCache(maxBytes);
  }

  get maxSize(): number {
    return this.#entries.maxSize;
  }

  /** The bytes of the records kept. */
  get bytes(): number {
    return this.#entries.size;
  }

  /**
   * Keeps `record`, stored as `bytes` under `key` with `etag` (as the put or the get that gave
   * the bytes returned it), and freezes it (and all it holds).
   */
  remember(key: string, bytes: Uint8Array, record: LogRecord | CachedRecord, etag: string | undefined): void {
    if (bytes.length > this.maxSize) return;
    this.#entries.set(key, { bytes, record: deepFreeze(record), etag: etag || undefined }, bytes.length);
  }

  /**
   * The record kept for `key` when `body` is the bytes stored with it; the etag of `read`, the
   * get's, is then the etag of those bytes (a rewrite of the same bytes may have given another).
   */
  recall(key: string, body: Uint8Array, read?: Pick<ObjectInfo, 'etag'>): CachedRecord | undefined {
    const entry = this.#entries.peek(key);
    if (!entry) return undefined;
    if (!sameBytes(entry.bytes, body)) {
      this.#entries.delete(key);
      return undefined;
    }
    // Read only here: a memory store's etag is hashed when read.
    if (read) entry.etag = read.etag || undefined;
    return entry.record;
  }

  /**
   * The record kept for `key` when a listing showed the key holding `listed`: the etag it was
   * stored or read with (an empty etag, which some S3-compatible services give, names nothing),
   * and its size. Otherwise undefined, the entry kept: the get that follows compares the bytes.
   */
  recallListed(key: string, listed: { etag: string; size: number }): CachedRecord | undefined {
    const entry = this.#entries.peek(key);
    // The size first: a memory store's listed etag is hashed when read.
    if (entry?.etag === undefined || entry.bytes.length !== listed.size || entry.etag !== listed.etag) return undefined;
    return entry.record;
  }
}

/**
 * The cache of `store`'s backend (two wrappers of one store share it), or null when
 * `maxBytes` is 0. A deployment whose RECORD_CACHE_BYTES changed starts a new one.
 */
export const recordCacheOf = perBackend((maxBytes) => new RecordCache(maxBytes));

/**
 * A carried group's items as JSON (its length, as the carry's budget counts) and as UTF-8
 * bytes, kept by the array: a group is carried from one record to the next as the same array
 * while this process writes them (log/record-cache.ts), so the carry is serialized and encoded
 * once, not once per record carrying it.
 */
const carriedOf = new WeakMap<readonly LogItem[], { length: number; bytes: Uint8Array }>();
export function carried(items: readonly LogItem[]): { length: number; bytes: Uint8Array } {
  let entry = carriedOf.get(items);
  if (entry === undefined) {
    const json = JSON.stringify(items);
    entry = { length: json.length, bytes: toBytes(json) };
    carriedOf.set(items, entry);
  }
  return entry;
}

/**
 * The UTF-8 bytes of JSON.stringify(record), its `recent` (last) from the carried groups' kept
 * bytes, and its `items` (in their place) from theirs (`carried`: an append's were serialized
 * already, for its view's schedule, and the next record carrying them takes them from there).
 */
export function recordBody(record: LogRecord): Uint8Array {
  const { recent, ...rest } = record;
  const parts = fieldsAround(rest, 'items', carried(record.items).bytes);
  if (!recent) return concatBytes(parts);
  parts[parts.length - 1] = toBytes(',"recent":[');
  recent.forEach((group, index) => {
    parts.push(toBytes(`${index > 0 ? ',' : ''}{"record":${group.record},"items":`), carried(group.items).bytes);
    parts.push(toBytes(group.repeats ? `,"repeats":${JSON.stringify(group.repeats)}}` : '}'));
  });
  parts.push(toBytes(']}'));
  return concatBytes(parts);
}

/**
 * JSON.stringify(object) as parts, the value of its field `key` (present) given as `value`, its
 * JSON's bytes: the object's JSON up to that value, the value, then the rest, the closing `}`
 * alone in the last part.
 */
function fieldsAround(object: object, key: string, value: Uint8Array): Uint8Array[] {
  const before: Record<string, unknown> = {};
  const after: Record<string, unknown> = {};
  let side = before;
  for (const [name, field] of Object.entries(object)) {
    if (name === key) side = after;
    else side[name] = field;
  }
  const head = JSON.stringify(before).slice(0, -1);
  const tail = JSON.stringify(after).slice(1, -1);
  return [
    toBytes(`${head}${head.length > 1 ? ',' : ''}${JSON.stringify(key)}:`),
    value,
    toBytes(tail.length > 0 ? `,${tail}` : ''),
    toBytes('}'),
  ];
}

/**
 * memcmp through node:buffer (Node, Deno, and Workers under nodejs_compat): several times a JS
 * loop's speed on the megabyte of a record.
 */
function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a === b || (a.length === b.length && Buffer.compare(a, b) === 0);
}

/**
 * The storage port. Everything above lib/store/ talks to this interface and never knows
 * which backend (R2 binding, S3, memory) is underneath.
 *
 * Semantics every adapter must keep (checked by test/store/object-store-conformance.ts):
 * - `put` with `onlyIfAbsent` is create-only: exactly one of N racing puts to one key wins;
 *   the others get `null`. With `ifMatch`, the put succeeds only when the current etag
 *   matches, else `null`. A plain put overwrites.
 * - `get` with a range returns those bytes only; `{ suffix: n }` is the last n bytes (the
 *   whole object when n >= size). A range starting at or past the end gives an empty body.
 *   `size` is always the whole object's size. A missing key gives `null` (never throws for
 *   absence).
 * - `list` returns keys under `prefix` in ascending byte order, at most `limit` (default
 *   1000), with a `cursor` to continue while `truncated`. `startAfter` skips keys <= it.
 *   A page may hold fewer than `limit` keys while `truncated` (R2 does this). With a
 *   `delimiter`, keys sharing a prefix up to it come back once, in `prefixes`.
 *   Listed objects carry key, size, etag and uploaded; their `metadata` may be empty (S3's
 *   ListObjectsV2 returns none, and a HEAD per listed object would be too costly). Callers
 *   that need metadata call `head`.
 * - `delete` of a missing key is not an error. Many keys are deleted in batches.
 * - etags are opaque strings, compared only for equality, in the one canonical form of
 *   ./etag.ts (`canonicalEtag`: unquoted, no `W/`, hex in lower case) whatever form the service
 *   writes in an answer or a listing; `ifMatch` takes any etag `put`, `head`, `get` or `list`
 *   returned, and the store sends it in the form its service compares. An etag names one content of its
 *   key: the etag a put returns is the one `get`, `head` and `list` report until the key is
 *   written again, and other bytes under the key have another (the session log takes a record
 *   it keeps on a listing's etag and size, lib/session/log/record-cache.ts).
 * - Metadata keys should be lowercase ASCII and values ASCII: S3 sends them as headers and
 *   lowercases the keys.
 * - Backend failures (network, 5xx, throttling, unresolved conflicts) throw StorageError.
 */
export interface ObjectInfo {
  key: string;
  size: number;
  etag: string;
  uploaded: Date;
  metadata: Record<string, string>;
}

export interface StoredObject extends ObjectInfo {
  body: Uint8Array;
}

export type ByteRange = { offset: number; length?: number } | { suffix: number };

export interface GetOptions {
  range?: ByteRange;
}

export interface PutOptions {
  /** Create-only: fail (return null) when the key exists. */
  onlyIfAbsent?: boolean;
  /** Conditional overwrite: fail (return null) unless the current etag is this one. */
  ifMatch?: string;
  metadata?: Record<string, string>;
  contentType?: string;
}

export interface ListOptions {
  limit?: number;
  cursor?: string;
  startAfter?: string;
  /**
   * Group keys that hold `delimiter` after `prefix`: each group is returned once in
   * `prefixes` (up to and including the delimiter) instead of its objects, and counts once
   * against `limit`.
   */
  delimiter?: string;
}

export interface ListResult {
  objects: ObjectInfo[];
  truncated: boolean;
  cursor?: string;
  /** With `delimiter`: the common prefixes of this page, ascending. */
  prefixes?: string[];
}

/**
 * What a put stores: bytes, a string (stored as its UTF-8), or parts whose bytes, one after
 * another, are the object's (a body built of pieces is never joined by its caller: a store
 * copies or writes the parts as they are, at most once). A store may read the bytes until the
 * put settles, never after: they must not change meanwhile.
 */
export type Body = Uint8Array | string | readonly Uint8Array[];

export interface ObjectStore {
  get(key: string, options?: GetOptions): Promise<StoredObject | null>;
  head(key: string): Promise<ObjectInfo | null>;
  /** Returns the written object's info, or null when a precondition failed. */
  put(key: string, body: Body, options?: PutOptions): Promise<ObjectInfo | null>;
  list(prefix: string, options?: ListOptions): Promise<ListResult>;
  delete(keys: string | string[]): Promise<void>;
}

const encoder = new TextEncoder();
// ignoreBOM: false is the default; the Workers types ask for it to be spelled out.
const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

export function toBytes(body: Uint8Array | string): Uint8Array {
  return typeof body === 'string' ? encoder.encode(body) : body;
}

/** Whether `body` is a list of parts. */
function isParts(body: Body): body is readonly Uint8Array[] {
  return Array.isArray(body);
}

/** The parts of `body`: a string encoded, bytes as the only part. */
export function partsOf(body: Body): readonly Uint8Array[] {
  return isParts(body) ? body : [toBytes(body)];
}

/** The bytes of `body` in one array: its own when it has them so (not a copy), else joined once. */
export function bodyBytes(body: Body): Uint8Array {
  if (!isParts(body)) return toBytes(body);
  return body.length === 1 ? body[0]! : concatBytes(body);
}

/** The bytes of `body` in a new array of their own (copied once; a string's encoding is already new). */
export function copiedBytes(body: Body): Uint8Array {
  if (typeof body === 'string') return toBytes(body);
  // new Uint8Array, not slice: a Node Buffer's slice is a view of the same memory.
  return isParts(body) ? concatBytes(body) : new Uint8Array(body);
}

/** The number of bytes `body` stores. */
export function bodyLength(body: Body): number {
  return isParts(body) ? partsLength(body) : toBytes(body).length;
}

function partsLength(parts: readonly Uint8Array[]): number {
  let total = 0;
  for (const part of parts) total += part.length;
  return total;
}

/** The bytes of `parts`, one after another, in one new array. */
export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  const bytes = new Uint8Array(partsLength(parts));
  let offset = 0;
  for (const part of parts) {
    bytes.set(part, offset);
    offset += part.length;
  }
  return bytes;
}

/** Decodes UTF-8 strictly: invalid bytes throw a TypeError instead of becoming U+FFFD. */
export function decodeUtf8(bytes: Uint8Array): string {
  return decoder.decode(bytes);
}

/** Resolves a ByteRange against an object size to [start, end) offsets. */
export function resolveRange(range: ByteRange, size: number): [number, number] {
  if ('suffix' in range) return [Math.max(0, size - range.suffix), size];
  const start = Math.min(range.offset, size);
  const end = range.length === undefined ? size : Math.min(size, start + range.length);
  return [start, end];
}

/** Every object under `prefix`, page after page (one list call per 1,000 keys). */
export async function listAll(store: ObjectStore, prefix: string): Promise<ObjectInfo[]> {
  const objects: ObjectInfo[] = [];
  let cursor: string | undefined;
  do {
    const page = await store.list(prefix, cursor === undefined ? {} : { cursor });
    objects.push(...page.objects);
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor !== undefined);
  return objects;
}

/**
 * Maps `values` through `task` with at most `limit` tasks in flight (a Worker has six
 * simultaneous connections), keeping the order of `values` in the result. The one
 * concurrency limiter of the storage callers (the session log, the inbox).
 *
 * @example await mapLimit(keys, 6, (key) => store.get(key))
 */
export async function mapLimit<Value, Result>(
  values: readonly Value[],
  limit: number,
  task: (value: Value, index: number) => Promise<Result>,
): Promise<Result[]> {
  const results = new Array<Result>(values.length);
  let next = 0;
  const worker = async () => {
    while (next < values.length) {
      const index = next++;
      results[index] = await task(values[index]!, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, values.length) }, worker));
  return results;
}

/**
 * The store under any wrappers that expose what they wrap as `inner` (counting, faults): what
 * per-store state (the write probe's verdict, the view cache) is kept for, so a wrapper made
 * per request shares it with every other wrapper of the same store.
 */
export function backendOf(store: ObjectStore): ObjectStore {
  let current = store;
  for (;;) {
    const inner = (current as { inner?: unknown }).inner;
    if (typeof inner !== 'object' || inner === null || typeof (inner as ObjectStore).put !== 'function') return current;
    current = inner as ObjectStore;
  }
}

/** After a group's key, past every key of the group in byte order: the cursor of a page that ended on a group. */
export const GROUP_END = '\u{10FFFF}';

/**
 * The group a delimited listing's `cursor` ends past (`<group>` GROUP_END, a group being a key's
 * start up to its first `delimiter` after `prefix`), whose keys the next page skips: a key of
 * the group may sort after the cursor (one with U+10FFFF right after the delimiter).
 * Undefined for any other cursor (an object key holds no delimiter after `prefix`).
 */
export function cursorGroup(
  cursor: string | undefined,
  prefix: string,
  delimiter: string | undefined,
): string | undefined {
  if (cursor === undefined || delimiter === undefined || !cursor.endsWith(GROUP_END)) return undefined;
  const group = cursor.slice(0, -GROUP_END.length);
  return group.indexOf(delimiter, prefix.length) === group.length - delimiter.length ? group : undefined;
}

/**
 * Byte order of UTF-8 keys, as object stores list them, without encoding: UTF-8 byte order
 * is code point order, and UTF-16 code unit order differs from it only where a surrogate
 * (a code point above U+FFFF) meets a unit in U+E000..U+FFFF.
 */
export function compareKeys(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const left = a.charCodeAt(i);
    const right = b.charCodeAt(i);
    if (left === right) continue;
    const leftSurrogate = left >= 0xd800 && left <= 0xdfff;
    const rightSurrogate = right >= 0xd800 && right <= 0xdfff;
    if (leftSurrogate !== rightSurrogate) return leftSurrogate ? 1 : -1;
    return left - right;
  }
  return a.length - b.length;
}

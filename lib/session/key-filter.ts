/**
 * The Bloom filter of a repeat-index shard (lib/session/log/key-shards.ts): a view carries one
 * per shard it names (view-records.ts `keyIndexSchema`, `filters`), so a reader tells a key
 * that no shard holds without reading the shard. A filter never rejects a key its shard holds;
 * it accepts a key its shard does not hold with a probability under 1% (a read of the shard,
 * as without the filter, then tells).
 *
 * A filter is one character of the base64 alphabet saying its bits per key b (FILTER_BITS_PER_KEY
 * to FILTER_MAX_BITS_PER_KEY: the character of that value), then b x n bits for a shard of n keys,
 * rounded up to whole characters of that alphabet (6 bits each, the first bit of a character its
 * lowest), so its length tells n (filterKeys). A key sets round(b ln 2) bits, derived from its own
 * hex digits (a call key is a hash already): two 24-bit halves, by enhanced double hashing.
 * Any filter of a shard tells of its keys alike, whatever its b: a process keeps one per shard.
 */

/**
 * An index carries filters only while its shards hold at most this many keys (about 110 KiB of
 * filters at FILTER_BITS_PER_KEY): past it they would cost every read of a view more bytes than
 * the shard gets they spare, and a turn reads the shards of its new calls as without them.
 */
export const FILTER_MAX_KEYS = 65_536;
/** The fewest bits of filter per key: 7 bits set per key, about 0.8% false positives. */
export const FILTER_BITS_PER_KEY = 10;
/** The most bits of filter per key: 11 bits set per key, about 0.05% false positives. */
export const FILTER_MAX_BITS_PER_KEY = 16;
/**
 * A flush's filters take more than FILTER_BITS_PER_KEY bits a key while they stay within this
 * share of its view's tail bytes, and within FILTER_MAX_KEYS x FILTER_BITS_PER_KEY bits in all
 * (filterBitsFor): a view as large as its prompt takes them from its read budget's slack.
 */
export const FILTER_VIEW_SHARE = 1 / 16;
/** Hex characters of a call key the repeat index keeps (lib/session/log/key-shards.ts), and the filter reads. */
export const INDEX_KEY_CHARS = 12;

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const VALUES = new Int8Array(128).fill(-1);
for (let at = 0; at < ALPHABET.length; at++) VALUES[ALPHABET.charCodeAt(at)] = at;

/** A filter's characters: the base64 alphabet, unpadded. */
export const FILTER_PATTERN = /^[A-Za-z0-9+/]*$/;

/** `FILTER_PATTERN.test(filter)`, in about half the time on a view's filters (a lookup a character). */
export function isFilterText(filter: string): boolean {
  for (let at = 0; at < filter.length; at++) if (!((VALUES[filter.charCodeAt(at)] ?? -1) >= 0)) return false;
  return true;
}

/**
 * The bits per key of the filters of a flush whose shards hold `sharded` keys, its view's tail
 * `tailBytes` of stored items: as many as FILTER_VIEW_SHARE of those bytes allow (a character of
 * filter per 6 bits) and FILTER_MAX_KEYS x FILTER_BITS_PER_KEY bits in all, between
 * FILTER_BITS_PER_KEY and FILTER_MAX_BITS_PER_KEY.
 */
export function filterBitsFor(sharded: number, tailBytes: number): number {
  const bits = Math.min(FILTER_MAX_KEYS * FILTER_BITS_PER_KEY, tailBytes * 6 * FILTER_VIEW_SHARE);
  return Math.max(FILTER_BITS_PER_KEY, Math.min(FILTER_MAX_BITS_PER_KEY, Math.floor(bits / Math.max(1, sharded))));
}

/** The characters of the filter of a shard of `keys` keys at `bits` bits per key, its first included. */
export function filterChars(keys: number, bits = FILTER_BITS_PER_KEY): number {
  return 1 + Math.ceil((keys * bits) / 6);
}

/** The bits per key `filter` says (its first character), or undefined when it says none allowed. */
export function filterBits(filter: string): number | undefined {
  const bits = filter.length > 0 ? VALUES[filter.charCodeAt(0)] : undefined;
  return bits !== undefined && bits >= FILTER_BITS_PER_KEY && bits <= FILTER_MAX_BITS_PER_KEY ? bits : undefined;
}

/**
 * The keys of the shard `filter` is sized for (by its bits per key and length), or undefined
 * when no shard gives it. `filter` is as `FILTER_PATTERN` checks it.
 */
export function filterKeys(filter: string): number | undefined {
  const bits = filterBits(filter);
  if (bits === undefined) return undefined;
  const keys = Math.floor(((filter.length - 1) * 6) / bits);
  return filterChars(keys, bits) === filter.length ? keys : undefined;
}

/** The bits a key sets in a filter of `bits` bits per key. */
function hashesOf(bits: number): number {
  return Math.round(bits * Math.LN2);
}

/** The bits `key` sets in a filter of `bits` bits, `hashes` of them, passed one by one to `visit` (false: stop). */
function eachBit(key: string, bits: number, hashes: number, visit: (bit: number) => boolean): boolean {
  let at = Number.parseInt(key.slice(INDEX_KEY_CHARS / 2, INDEX_KEY_CHARS), 16) % bits;
  let step = Number.parseInt(key.slice(0, INDEX_KEY_CHARS / 2), 16) % bits;
  for (let hash = 0; hash < hashes; hash++) {
    if (!visit(at)) return false;
    at = (at + step) % bits;
    step = (step + hash + 1) % bits;
  }
  return true;
}

/** The filter of a shard's keys at `bits` bits per key: `sorted`, keys of 12 hex characters concatenated. */
export function shardFilter(sorted: string, bits = FILTER_BITS_PER_KEY): string {
  const values = new Uint8Array(filterChars(sorted.length / INDEX_KEY_CHARS, bits) - 1);
  const size = values.length * 6;
  const hashes = hashesOf(bits);
  for (let from = 0; from < sorted.length; from += INDEX_KEY_CHARS)
    eachBit(sorted.slice(from, from + INDEX_KEY_CHARS), size, hashes, (bit) => {
      values[Math.floor(bit / 6)]! |= 1 << (bit % 6);
      return true;
    });
  let text = ALPHABET[bits]!;
  for (const value of values) text += ALPHABET[value];
  return text;
}

/**
 * Whether `filter` may hold `key` (12 hex characters, or more: the first 12 count): false only
 * when its shard does not hold it. `filter` is as `FILTER_PATTERN` and `filterKeys` check it.
 */
export function filterMayHold(filter: string, key: string): boolean {
  const bits = filterBits(filter);
  if (bits === undefined || filter.length <= 1) return false;
  return eachBit(
    key,
    (filter.length - 1) * 6,
    hashesOf(bits),
    (bit) => ((VALUES[filter.charCodeAt(1 + Math.floor(bit / 6))]! >> (bit % 6)) & 1) === 1,
  );
}

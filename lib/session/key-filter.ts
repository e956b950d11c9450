/**
 * The Bloom filter of a repeat-index shard (lib/session/log/key-shards.ts): a view carries one
 * per shard it names (view-records.ts `keyIndexSchema`, `filters`), so a reader tells a key
 * that no shard holds without reading the shard. A filter never rejects a key its shard holds;
 * it accepts a key its shard does not hold with a probability under 1% (a read of the shard,
 * as without the filter, then tells).
 *
 * A shard of n keys has a filter of FILTER_BITS_PER_KEY x n bits, rounded up to whole characters of
 * the base64 alphabet (6 bits each, the first bit of a character its lowest), so its length
 * tells n (filterKeys). A key sets FILTER_HASHES bits, derived from its own hex digits (a call key is
 * a hash already): two 24-bit halves, by enhanced double hashing.
 */

/**
 * An index carries filters only while its shards hold at most this many keys (about 110 KiB of
 * filters): past it they would cost every read of a view more bytes than the shard gets they
 * spare, and a turn reads the shards of its new calls as without them.
 */
export const FILTER_MAX_KEYS = 65_536;
/** Bits of filter per key: with FILTER_HASHES bits set per key, about 0.8% false positives. */
export const FILTER_BITS_PER_KEY = 10;
/** Bits a key sets. */
export const FILTER_HASHES = 7;
/** Hex characters of a call key the repeat index keeps (lib/session/log/key-shards.ts), and the filter reads. */
export const INDEX_KEY_CHARS = 12;

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const VALUES = new Int8Array(128).fill(-1);
for (let at = 0; at < ALPHABET.length; at++) VALUES[ALPHABET.charCodeAt(at)] = at;

/** A filter's characters: the base64 alphabet, unpadded. */
export const FILTER_PATTERN = /^[A-Za-z0-9+/]*$/;

/** The characters of the filter of a shard of `keys` keys. */
export function filterChars(keys: number): number {
  return Math.ceil((keys * FILTER_BITS_PER_KEY) / 6);
}

/** The keys of the shard a filter of `chars` characters is sized for, or undefined when no shard gives that length. */
export function filterKeys(chars: number): number | undefined {
  const keys = Math.floor((chars * 6) / FILTER_BITS_PER_KEY);
  return filterChars(keys) === chars ? keys : undefined;
}

/** The bits `key` sets in a filter of `bits` bits, passed one by one to `visit` (false: stop). */
function eachBit(key: string, bits: number, visit: (bit: number) => boolean): boolean {
  let at = Number.parseInt(key.slice(INDEX_KEY_CHARS / 2, INDEX_KEY_CHARS), 16) % bits;
  let step = Number.parseInt(key.slice(0, INDEX_KEY_CHARS / 2), 16) % bits;
  for (let hash = 0; hash < FILTER_HASHES; hash++) {
    if (!visit(at)) return false;
    at = (at + step) % bits;
    step = (step + hash + 1) % bits;
  }
  return true;
}

/** The filter of a shard's keys: `sorted`, keys of 12 hex characters concatenated. */
export function shardFilter(sorted: string): string {
  const values = new Uint8Array(filterChars(sorted.length / INDEX_KEY_CHARS));
  const bits = values.length * 6;
  for (let from = 0; from < sorted.length; from += INDEX_KEY_CHARS)
    eachBit(sorted.slice(from, from + INDEX_KEY_CHARS), bits, (bit) => {
      values[Math.floor(bit / 6)]! |= 1 << (bit % 6);
      return true;
    });
  let text = '';
  for (const value of values) text += ALPHABET[value];
  return text;
}

/**
 * Whether `filter` may hold `key` (12 hex characters, or more: the first 12 count): false only
 * when its shard does not hold it. `filter` is as `FILTER_PATTERN` and `filterKeys` check it.
 */
export function filterMayHold(filter: string, key: string): boolean {
  if (filter.length === 0) return false;
  return eachBit(
    key,
    filter.length * 6,
    (bit) => ((VALUES[filter.charCodeAt(Math.floor(bit / 6))]! >> (bit % 6)) & 1) === 1,
  );
}

import type { HistoryAggregates } from '../history.ts';
import { encodeBase64 } from '../media.ts';
import { lowerBound } from '../sorted.ts';

/**
 * The repeat flags of a history's aggregates (`repeat_flags`): which calls repeat an earlier
 * call's key, a bit per call (base64) or, when repeats are sparse, the gaps between them;
 * extended as a history grows without decoding them (lib/strategies/aggregates.ts
 * `extendAggregates`), and decoded once per aggregates object.
 */

/**
 * The repeat flags of aggregates as a lookup: `isRepeat(i)` for the i-th call (0-based, in
 * history order) has the same call key as an earlier call.
 */
export function repeatFlagReader(aggregates: HistoryAggregates): (index: number) => boolean {
  const indices = repeatIndices(aggregates);
  return (index) => indices[lowerBound(indices, index)] === index;
}

/**
 * The `repeat_flags` of `previous` extended to `calls` calls with the calls at `indices` marked
 * (withRepeats), and `keep`, which hands what was learnt of them to the aggregates that hold
 * them: their facts, and their repeats when those of `previous` were asked for (a view's epoch
 * plan asks every time), extended here, where decoding the new flags would walk every call.
 */
export function extendRepeatFlags(
  previous: HistoryAggregates,
  calls: number,
  indices: readonly number[],
): { flags: string; keep: (aggregates: HistoryAggregates) => void } {
  const { flags, facts } = withRepeats(previous, calls, indices);
  const keep = (aggregates: HistoryAggregates) => {
    factsOf.set(aggregates, facts);
    const kept = indicesOf.get(previous);
    if (kept) indicesOf.set(aggregates, indices.length === 0 ? kept : kept.concat(indices));
  };
  return { flags, keep };
}

/**
 * `repeat_flags` for `calls` calls: the flags of `aggregates` with the calls at `indices`
 * (ascending, each at or after `aggregates.tool_calls`) marked, in the shorter encoding
 * (encodeRepeats), without decoding the flags: the sparse encoding's length comes from what
 * `flagFacts` keeps, the gaps to the new repeats are appended to sparse flags, and dense flags
 * keep their base64 up to the last whole group of bytes no new call reaches. Only a switch of
 * encoding encodes every repeat again. `facts`: the new flags' (kept by the caller).
 */
function withRepeats(
  aggregates: HistoryAggregates,
  calls: number,
  indices: readonly number[],
): { flags: string; facts: FlagFacts } {
  const previous = aggregates.repeat_flags;
  const sparse = previous.startsWith(SPARSE);
  const before = flagFacts(aggregates);
  const facts = {
    last: indices[indices.length - 1] ?? before.last,
    sparseLength: before.sparseLength + gapsLength(indices, before.last),
  };
  if (facts.sparseLength < denseLength(calls)) {
    const flags = sparse
      ? previous + gapsOf(indices, before.last)
      : encodeRepeats([...repeatIndices(aggregates), ...indices], calls);
    return { flags, facts };
  }
  if (sparse || decodedLength(previous) !== Math.ceil(aggregates.tool_calls / 8))
    return { flags: encodeRepeats([...repeatIndices(aggregates), ...indices], calls), facts };
  return { flags: extendDense(previous, aggregates.tool_calls, calls, indices), facts };
}

/**
 * What withRepeats needs of flags without decoding them: their last repeat (-1: none), and the
 * length of their sparse encoding.
 */
interface FlagFacts {
  last: number;
  sparseLength: number;
}

const factsOf = new WeakMap<HistoryAggregates, FlagFacts>();

/** The facts of the flags of `aggregates`: kept when it was extended here, else found from its repeats once. */
function flagFacts(aggregates: HistoryAggregates): FlagFacts {
  let facts = factsOf.get(aggregates);
  if (facts) return facts;
  const indices = repeatIndices(aggregates);
  facts = { last: indices[indices.length - 1] ?? -1, sparseLength: SPARSE.length + gapsLength(indices, -1) };
  factsOf.set(aggregates, facts);
  return facts;
}

/**
 * Dense flags of `from` calls extended to `calls` with the calls at `indices` (each at or after
 * `from`) set: the base64 of the bytes before the first one a new call can change, in whole
 * groups of three, stays as it is; the rest is decoded, extended and encoded again.
 */
function extendDense(previous: string, from: number, calls: number, indices: readonly number[]): string {
  const kept = Math.floor(Math.floor(from / 8) / 3);
  const bytes = new Uint8Array(Math.ceil(calls / 8) - kept * 3);
  bytes.set(decodeBase64(previous.slice(kept * 4)));
  for (const index of indices) bytes[(index >> 3) - kept * 3]! |= 1 << (index & 7);
  return previous.slice(0, kept * 4) + encodeBase64(bytes);
}

/**
 * The repeat flags of `calls` calls whose repeats are at `indices` (ascending), in the shorter
 * of two encodings: a bit per call (base64 of a little-endian bit array), or, when repeats are
 * sparse (5% of a coding agent's calls), SPARSE and the gaps between them, each a base-32
 * number, most significant digit first, its last digit from FINAL_DIGITS and the others from
 * MORE_DIGITS (a gap below 32 is one character).
 */
function encodeRepeats(indices: readonly number[], calls: number): string {
  const sparse = SPARSE + gapsOf(indices, -1);
  if (sparse.length < denseLength(calls)) return sparse;
  const bytes = new Uint8Array(Math.ceil(calls / 8));
  for (const index of indices) bytes[index >> 3]! |= 1 << (index & 7);
  return encodeBase64(bytes);
}

/** The length of `gapsOf(indices, previous)`, without building it. */
function gapsLength(indices: readonly number[], previous: number): number {
  let length = 0;
  for (const index of indices) {
    length += 1;
    for (let gap = Math.floor((index - previous - 1) / 32); gap > 0; gap = Math.floor(gap / 32)) length += 1;
    previous = index;
  }
  return length;
}

/** The sparse encoding's gaps to `indices` (ascending) from the index `previous` (-1: none). */
function gapsOf(indices: readonly number[], previous: number): string {
  let gaps = '';
  for (const index of indices) {
    let gap = index - previous - 1;
    let digits = FINAL_DIGITS[gap & 31]!;
    for (gap = Math.floor(gap / 32); gap > 0; gap = Math.floor(gap / 32)) digits = MORE_DIGITS[gap & 31]! + digits;
    gaps += digits;
    previous = index;
  }
  return gaps;
}

/** The indices `encodeRepeats` encoded, ascending, decoded whole (repeatIndices keeps them). */
export function decodeRepeats(text: string): number[] {
  const indices: number[] = [];
  if (text.startsWith(SPARSE)) {
    decodeGaps(text, 1, 0, indices);
    return indices;
  }
  const bytes = decodeBase64(text);
  for (let byte = 0; byte < bytes.length; byte += 1) {
    const bits = bytes[byte]!;
    if (bits === 0) continue;
    for (let bit = 0; bit < 8; bit += 1) if (bits & (1 << bit)) indices.push(byte * 8 + bit);
  }
  return indices;
}

/**
 * The sparse encoding's digits of `text` from `at` on, `gap` pending from those before, their
 * indices pushed onto `indices` (after its last); returns the gap still pending at the end.
 */
function decodeGaps(text: string, at: number, gap: number, indices: number[]): number {
  let previous = indices.length > 0 ? indices[indices.length - 1]! : -1;
  for (; at < text.length; at += 1) {
    const digit = DIGIT_VALUES[text.charCodeAt(at)] ?? 0;
    gap = gap * 32 + (digit & 31);
    if (digit < 32) continue;
    previous += gap + 1;
    indices.push(previous);
    gap = 0;
  }
  return gap;
}

const SPARSE = '~';
const MORE_DIGITS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef';
const FINAL_DIGITS = 'ghijklmnopqrstuvwxyz0123456789-_';
/** By character code: a digit's value, plus 32 for a last digit. */
const DIGIT_VALUES = new Uint8Array(128);
for (let value = 0; value < 32; value += 1) {
  DIGIT_VALUES[MORE_DIGITS.charCodeAt(value)] = value;
  DIGIT_VALUES[FINAL_DIGITS.charCodeAt(value)] = value + 32;
}

/** The length of the base64 of a bit per call. */
function denseLength(calls: number): number {
  return Math.ceil(Math.ceil(calls / 8) / 3) * 4;
}

const indicesOf = new WeakMap<HistoryAggregates, readonly number[]>();

/**
 * The indices of the calls the repeat flags of aggregates mark, ascending. Kept per aggregates
 * object, which is never changed once built: a turn asks for them for its requirement and again
 * for its prompt, and a long history's flags are tens of KiB.
 */
export function repeatIndices(aggregates: HistoryAggregates): readonly number[] {
  const kept = indicesOf.get(aggregates);
  if (kept) return kept;
  const text = aggregates.repeat_flags;
  const indices = text.startsWith(SPARSE) ? decodeSparse(text) : decodeRepeats(text);
  indicesOf.set(aggregates, indices);
  return indices;
}

/**
 * Sparse flags decoded lately, by any session, the last used last: a view read afresh holds
 * the flags of the view it was built from with the gaps to its new repeats appended, so only
 * those are decoded again (at 1,000,000 items the flags are tens of KiB). `gap`: the one
 * pending at the end of `text`, where decoding goes on. At most RECENT_FLAGS, and their
 * indices at most RECENT_FLAGS_INDICES in all (the newest kept whatever it holds).
 */
const recentFlags: DecodedFlags[] = [];
interface DecodedFlags {
  text: string;
  indices: readonly number[];
  gap: number;
}
const RECENT_FLAGS = 8;
const RECENT_FLAGS_INDICES = 1 << 20;

function decodeSparse(text: string): readonly number[] {
  let base: DecodedFlags | undefined;
  for (const entry of recentFlags)
    if ((!base || entry.text.length > base.text.length) && text.startsWith(entry.text)) base = entry;
  if (base) recentFlags.splice(recentFlags.indexOf(base), 1);
  const entry = base?.text.length === text.length ? base : decodedAfter(text, base);
  recentFlags.push(entry);
  let held = recentFlags.reduce((sum, { indices }) => sum + indices.length, 0);
  while (recentFlags.length > RECENT_FLAGS || (recentFlags.length > 1 && held > RECENT_FLAGS_INDICES))
    held -= recentFlags.shift()!.indices.length;
  return entry.indices;
}

/** The entry of sparse flags `text`, decoded on from `base` (flags `text` starts with) or from its start. */
function decodedAfter(text: string, base: DecodedFlags | undefined): DecodedFlags {
  const indices = base ? base.indices.slice() : [];
  const gap = decodeGaps(text, base?.text.length ?? 1, base?.gap ?? 0, indices);
  // Frozen: every session of the process that meets these flags is handed this array.
  return { text, indices: Object.freeze(indices), gap };
}

/** The bytes `text` (base64, padded) decodes to. */
export function decodedLength(text: string): number {
  const padding = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  return (text.length / 4) * 3 - padding;
}

export function decodeBase64(text: string): Uint8Array {
  if (text === '') return new Uint8Array(0);
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let index = 0; index < binary.length; index += 1) bytes[index] = binary.charCodeAt(index);
  return bytes;
}

import { sha256Hex } from '../hash.ts';
import { RepeatedCalls, REPEATED_KEY_CHARS, type HistoryAggregates } from '../history.ts';
import { lowerBound } from '../sorted.ts';
import type { PromptItem } from '../items.ts';

export { historyAggregatesSchema, type HistoryAggregates } from '../history.ts';

/**
 * The identity of a call for repeat detection: name plus canonical arguments (object keys
 * sorted recursively; call_id ignored). Unparseable arguments are taken as raw text.
 * Returns 24 hex characters (96 bits) of a SHA-256.
 */
export function callKey(name: string, argumentsText: string): string {
  return sha256Hex(canonicalCall(name, argumentsText)).slice(0, 24);
}

/**
 * The text {@link callKey} hashes: name, a newline, canonical arguments. Two calls have the
 * same key exactly when (barring hash collisions) they have the same canonical call.
 */
export function canonicalCall(name: string, argumentsText: string): string {
  return `${name}\n${canonicalArguments(argumentsText)}`;
}

/** The canonical arguments text of {@link canonicalCall}: sorted-key JSON, or `raw:` + text. */
export function canonicalArguments(argumentsText: string): string {
  try {
    return JSON.stringify(sortKeys(JSON.parse(argumentsText)));
  } catch {
    return `raw:${argumentsText}`;
  }
}

// Returns the value itself when its keys are already in order at every level (the common
// case), so canonical keys cost little more than a parse and a stringify. The result
// serializes exactly as a copy built in sorted key order would.
function sortKeys(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let index = 0; index < value.length; index += 1) {
      const sorted = sortKeys(value[index]);
      if (sorted !== value[index]) {
        copy ??= value.slice();
        copy[index] = sorted;
      }
    }
    return copy ?? value;
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  let inOrder = true;
  for (let index = 0; index < keys.length; index += 1) {
    const key = keys[index]!;
    if (key === '__proto__' || (index > 0 && keys[index - 1]! > key)) {
      inOrder = false;
      break;
    }
  }
  if (inOrder) {
    let copy: Record<string, unknown> | undefined;
    for (const key of keys) {
      const sorted = sortKeys(record[key]);
      if (sorted !== record[key]) {
        copy ??= { ...record };
        copy[key] = sorted;
      }
    }
    return copy ?? record;
  }
  const sorted: Record<string, unknown> = {};
  for (const key of keys.sort()) sorted[key] = sortKeys(record[key]);
  return sorted;
}

/** An item with its seq, as the session log holds it (a StoredItem, or a prompt item read back). */
export type SequencedItem = PromptItem & { seq: number };

/** The aggregates of an empty history. */
export function emptyAggregates(): HistoryAggregates {
  return {
    tool_calls: 0,
    tool_outputs: 0,
    repeat_flags: '',
    repeated: RepeatedCalls.EMPTY,
    images: 0,
    image_order: '',
  };
}

/** The `input_image` parts of an item: in a message's content or an output's parts (0 for text). */
export function imagesOf(item: PromptItem): number {
  const content = item.type === 'message' ? item.content : item.type === 'function_call_output' ? item.output : '';
  if (typeof content === 'string') return 0;
  let images = 0;
  for (const part of content) if (part.type === 'input_image') images += 1;
  return images;
}

/**
 * The aggregates of a whole history, in one pass. The reference for {@link extendAggregates}:
 * extending step by step from {@link emptyAggregates} gives the same value (property-tested).
 */
export function computeAggregates(items: readonly SequencedItem[]): HistoryAggregates {
  return extendAggregates(emptyAggregates(), items, () => false).aggregates;
}

/**
 * The aggregates after appending `newItems` (in seq order) to a history whose aggregates are
 * `previous`. The session store keeps the call keys already seen (a view's `call_keys`) and
 * answers `seenBefore(key)` from them (only for keys before `newItems`; keys repeated within
 * `newItems` are handled here). Returns the new aggregates and `newKeys`: the call keys
 * first seen in this batch, in order, for the store to add to its keys. `keys`: the call keys
 * of the calls among `newItems`, in order, when the caller has them (each is hashed once).
 * Pure: `previous` is not changed.
 */
export function extendAggregates(
  previous: HistoryAggregates,
  newItems: readonly SequencedItem[],
  seenBefore: (key: string) => boolean,
  keys?: readonly string[],
): { aggregates: HistoryAggregates; newKeys: string[] } {
  let toolCalls = previous.tool_calls;
  let toolOutputs = previous.tool_outputs;
  const newKeys: string[] = [];
  const batchKeys = new Set<string>();
  const setBits: number[] = [];
  let images = previous.images;
  const callBits: number[] = [];
  // The entries the repeats set, newer than every entry before (RepeatedCalls extends the map
  // by them without copying it: a long history's has tens of thousands).
  const repeats: [string, number][] = [];
  for (const item of newItems) {
    images += imagesOf(item);
    if (item.type === 'function_call_output') toolOutputs += 1;
    if (item.type !== 'function_call') continue;
    callBits.push(toolCalls + images);
    const key = keys?.[toolCalls - previous.tool_calls] ?? callKey(item.name, item.arguments);
    const repeat = batchKeys.has(key) || seenBefore(key);
    if (repeat) {
      setBits.push(toolCalls);
      repeats.push([key.slice(0, REPEATED_KEY_CHARS), item.seq]);
    } else {
      newKeys.push(key);
      batchKeys.add(key);
    }
    toolCalls += 1;
  }
  const repeated = previous.repeated.with(repeats, true);
  const flags = withRepeats(previous, toolCalls, setBits);
  const aggregates: HistoryAggregates = {
    tool_calls: toolCalls,
    tool_outputs: toolOutputs,
    repeat_flags: flags.flags,
    repeated,
    images,
    image_order: images === 0 ? '' : withBits(imageOrderOf(previous), toolCalls + images, callBits),
    // A repeat's entry is newer than every seq before, so it belongs to the entries kept.
    ...(previous.repeated_older ? { repeated_older: previous.repeated_older } : {}),
  };
  // The repeats, when those of `previous` were asked for (a view's epoch plan asks every time):
  // extended here, where decoding the new flags would walk every call.
  factsOf.set(aggregates, flags.facts);
  const kept = indicesOf.get(previous);
  if (kept) indicesOf.set(aggregates, setBits.length === 0 ? kept : kept.concat(setBits));
  return { aggregates, newKeys };
}

/** The `image_order` bits of aggregates, also while it is '' for a history without images (all calls). */
function imageOrderOf(aggregates: HistoryAggregates): string {
  if (aggregates.images > 0 || aggregates.tool_calls === 0) return aggregates.image_order;
  return withBits(
    '',
    aggregates.tool_calls,
    Array.from({ length: aggregates.tool_calls }, (_, bit) => bit),
  );
}

/**
 * A base64 bit array of `length` bits: `previous` (cut or extended with clear bits) with
 * `bits` set. `previous` itself when it already has that length and no bit is set.
 */
function withBits(previous: string, length: number, bits: readonly number[]): string {
  const bytes = Math.ceil(length / 8);
  if (bits.length === 0 && decodedLength(previous) === bytes) return previous;
  const array = new Uint8Array(bytes);
  array.set(decodeBase64(previous).subarray(0, bytes));
  for (const bit of bits) array[bit >> 3]! |= 1 << (bit & 7);
  return encodeBase64(array);
}

/**
 * How many function_calls of the history come before its `newest`-th newest image part
 * (newest = 1), from `image_order`; 0 when `newest` is 0 or beyond the history's images.
 */
export function callsBeforeImage(aggregates: HistoryAggregates, newest: number): number {
  if (newest <= 0 || newest > aggregates.images) return 0;
  const bytes = decodeBase64(aggregates.image_order);
  let images = 0;
  let callsAfter = 0;
  for (let bit = aggregates.tool_calls + aggregates.images - 1; bit >= 0; bit -= 1) {
    if ((bytes[bit >> 3]! & (1 << (bit & 7))) !== 0) callsAfter += 1;
    else if (++images === newest) break;
  }
  return aggregates.tool_calls - callsAfter;
}

/**
 * The repeat flags of aggregates as a lookup: `isRepeat(i)` for the i-th call (0-based, in
 * history order) has the same call key as an earlier call.
 */
export function repeatFlagReader(aggregates: HistoryAggregates): (index: number) => boolean {
  const indices = repeatIndices(aggregates);
  return (index) => indices[lowerBound(indices, index)] === index;
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

function encodeBase64(bytes: Uint8Array): string {
  let binary = '';
  for (let start = 0; start < bytes.length; start += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(start, start + 0x8000));
  }
  return btoa(binary);
}

/** The bytes `text` (base64, padded) decodes to. */
function decodedLength(text: string): number {
  const padding = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  return (text.length / 4) * 3 - padding;
}

function decodeBase64(text: string): Uint8Array {
  if (text === '') return new Uint8Array(0);
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let index = 0; index < binary.length; index += 1) bytes[index] = binary.charCodeAt(index);
  return bytes;
}

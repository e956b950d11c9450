import { sha256Hex } from '../hash.ts';
import { isCanonicalJson } from './canonical-json.ts';
import { RepeatedCalls, REPEATED_KEY_CHARS, type HistoryAggregates } from '../history.ts';
import type { PromptItem } from '../items.ts';
import { encodeBase64 } from '../media.ts';
import { decodeBase64, decodedLength, extendRepeatFlags } from './repeat-flag-codec.ts';

export { historyAggregatesSchema, type HistoryAggregates } from '../history.ts';
export { decodeRepeats, repeatFlagReader, repeatIndices } from './repeat-flag-codec.ts';

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

/**
 * The canonical arguments text of {@link canonicalCall}: sorted-key JSON, or `raw:` + text. A
 * text already so (as a model's arguments of one key mostly are) is its own, unparsed.
 */
export function canonicalArguments(argumentsText: string): string {
  if (isCanonicalJson(argumentsText)) return argumentsText;
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
  const flags = extendRepeatFlags(previous, toolCalls, setBits);
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
  flags.keep(aggregates);
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

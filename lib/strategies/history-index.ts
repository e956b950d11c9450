import type { PromptFunctionCallItem, PromptItem } from '../items.ts';
import { repeatedSeqs } from '../history.ts';
import { lowerBound } from '../sorted.ts';
import { canonicalArguments, imagesOf, repeatFlagReader, repeatIndices, type HistoryAggregates } from './aggregates.ts';
import { repeatsAmong, type RepeatsIn } from './epoch-plan.ts';

/** What the strategies know about one tool item of the history. */
export interface ToolInfo {
  /**
   * The position of its tool call, counted newest-first over every function_call of the
   * history (newest = 1). An output has the position of its call.
   */
  position: number;
  /** The newest instance of a repeated call (or that call's output): never shortened. */
  protected: boolean;
}

/**
 * Facts about the whole history, computed once per prompt by the dispatcher from the items
 * it was handed and, for a tail view, the stored aggregates. Strategies read positions from
 * here rather than from their own input, so a list of strategies gives the same result on a
 * tail view as on the full history (an earlier strategy may have dropped items).
 */
export interface HistoryIndex {
  /** function_call items in the whole history (orphan calls included). */
  toolCalls: number;
  /** The i-th call (0-based, history order) repeats an earlier call's key. */
  isRepeat(index: number): boolean;
  /** Whether a call with index in [from, to) repeats an earlier call's key. */
  repeatsIn: RepeatsIn;
  /** The info of a tool item of the history, or of a compacted copy of one. */
  infoOf(item: PromptItem): ToolInfo | undefined;
  /** Records that `copy` stands for `original` (a compacted copy keeps its position). */
  derive(original: PromptItem, copy: PromptItem): void;
  /** `input_image` parts in the whole history. */
  images: number;
  /**
   * The position of the last image part of an item of the history, counted newest-first over
   * every image part of the history (newest = 1); its earlier parts follow on (+1 each).
   * Undefined for an item without images.
   */
  imagePosition(item: PromptItem): number | undefined;
}

/**
 * Indexes a history (full, or a tail view when `aggregates` is given) and drops unpaired
 * tool items, which no provider accepts.
 *
 * Pairing: walking forward, an output pairs with the pending call of its call_id; a call
 * with no later output, a call superseded by a later call with the same call_id before its
 * output, and an output with no pending call are unpaired. A call id may come again once its
 * call is answered; a call superseding an open call of its id (a client's is refused while
 * that call is one of the open calls a record keeps, lib/session/log/open-calls.ts; a model's
 * output is stored as it comes) may be paired differently by the tail view than by the full
 * history.
 *
 * Full history: positions, repeat flags and protection come from the items (canonical call
 * text as the key). Tail view: `toolCalls` and repeat flags come from the aggregates,
 * positions are counted from the end of the view (exact for the suffix that selectTail
 * keeps whole; calls before the cut are only there when protected), and a call is
 * protected when its seq is one of the `repeated` values (the aggregates must describe
 * exactly the history the view was taken from). Image positions are counted the same way, from
 * the end of the view, with the history's image count from the aggregates.
 */
export function indexHistory(
  items: readonly PromptItem[],
  aggregates?: HistoryAggregates,
): { history: HistoryIndex; items: PromptItem[] } {
  const info = new Map<PromptItem, ToolInfo>();
  const calls: PromptFunctionCallItem[] = [];
  const pending = new Map<string, PromptFunctionCallItem>();
  // Outputs each with its call, in pairs: [output, call, output, call, ...].
  const outputCall: PromptItem[] = [];
  // Items with images, each with its count, in history order: [item, images, ...].
  const withImages: (PromptItem | number)[] = [];
  let toolItems = 0;
  for (const item of items) {
    if (item.type === 'message') {
      if (typeof item.content !== 'string') addImages(withImages, item);
      continue;
    }
    toolItems += 1;
    if (item.type === 'function_call') {
      calls.push(item);
      pending.set(item.call_id, item);
      continue;
    }
    if (typeof item.output !== 'string') addImages(withImages, item);
    const call = pending.get(item.call_id);
    if (call === undefined) continue;
    pending.delete(item.call_id);
    outputCall.push(item, call);
  }

  let isRepeat: (index: number) => boolean;
  let repeatsIn: RepeatsIn;
  let toolCalls: number;
  if (aggregates) {
    toolCalls = aggregates.tool_calls;
    isRepeat = repeatFlagReader(aggregates);
    repeatsIn = repeatsAmong(repeatIndices(aggregates));
    const protectedSeqs = repeatedSeqs(aggregates);
    for (let index = 0; index < calls.length; index += 1) {
      const call = calls[index]!;
      // A seq in `repeated` is by definition the newest instance of a repeated key.
      const isProtected = call.seq !== undefined && protectedSeqs[lowerBound(protectedSeqs, call.seq)] === call.seq;
      info.set(call, { position: calls.length - index, protected: isProtected });
    }
  } else {
    toolCalls = calls.length;
    const flags = new Uint8Array(calls.length);
    // Calls are grouped by a cheap fingerprint of name and parsed arguments that equal
    // canonical calls always share (see argumentsFingerprint); canonical texts are built and
    // compared only inside a group of two or more. Same result as comparing canonicalCall
    // for every pair, without serializing and hashing every long argument text.
    const groups = new Map<string, { argumentsText: string; canonical?: string; newest: number }[]>();
    const newestIndexes: { newest: number }[] = [];
    for (let index = 0; index < calls.length; index += 1) {
      const call = calls[index]!;
      const groupKey = `${argumentsFingerprint(call.arguments)}\n${call.name}`;
      const group = groups.get(groupKey);
      if (group === undefined) {
        const entry = { argumentsText: call.arguments, newest: index };
        groups.set(groupKey, [entry]);
        newestIndexes.push(entry);
        continue;
      }
      const canonical = canonicalArguments(call.arguments);
      let match: { newest: number } | undefined;
      for (const entry of group) {
        entry.canonical ??= canonicalArguments(entry.argumentsText);
        if (entry.canonical === canonical) {
          match = entry;
          break;
        }
      }
      if (match === undefined) {
        const entry = { argumentsText: call.arguments, canonical, newest: index };
        group.push(entry);
        newestIndexes.push(entry);
      } else {
        flags[index] = 1;
        match.newest = index;
      }
    }
    const protectedIndexes = new Set<number>();
    // The newest instance of a key is flagged exactly when the key occurred before it.
    for (const { newest } of newestIndexes) if (flags[newest] === 1) protectedIndexes.add(newest);
    isRepeat = (index) => flags[index] === 1;
    const repeating: number[] = [];
    for (let index = 0; index < flags.length; index += 1) if (flags[index] === 1) repeating.push(index);
    repeatsIn = repeatsAmong(repeating);
    for (let index = 0; index < calls.length; index += 1) {
      info.set(calls[index]!, { position: calls.length - index, protected: protectedIndexes.has(index) });
    }
  }
  for (let index = 0; index < outputCall.length; index += 2)
    info.set(outputCall[index]!, info.get(outputCall[index + 1]!)!);
  // Counted over every item handed in, unpaired ones too, as the aggregates count them.
  const imagePositions = new Map<PromptItem, number>();
  let imagesSeen = 0;
  for (let index = withImages.length - 2; index >= 0; index -= 2) {
    imagePositions.set(withImages[index] as PromptItem, imagesSeen + 1);
    imagesSeen += withImages[index + 1] as number;
  }

  const history: HistoryIndex = {
    toolCalls,
    isRepeat,
    repeatsIn,
    infoOf: (item) => info.get(item),
    derive: (original, copy) => {
      const known = info.get(original);
      if (known !== undefined) info.set(copy, known);
      const imagePosition = imagePositions.get(original);
      if (imagePosition !== undefined) imagePositions.set(copy, imagePosition);
    },
    images: aggregates ? aggregates.images : imagesSeen,
    imagePosition: (item) => imagePositions.get(item),
  };
  // Each pair is two items (an output pairs with one call, which leaves `pending` then).
  if (outputCall.length === toolItems) return { history, items: [...items] };
  const paired = new Set(outputCall);
  return { history, items: items.filter((item) => item.type === 'message' || paired.has(item)) };
}

/** Notes `item` with its images (`input_image` parts), if it has any: content in parts only. */
function addImages(withImages: (PromptItem | number)[], item: PromptItem): void {
  const images = imagesOf(item);
  if (images > 0) withImages.push(item, images);
}

/**
 * A 32-bit fingerprint of arguments that is equal for any two texts with the same
 * `canonicalArguments` (it is computed from the parsed value, ignoring key order, `__proto__`
 * keys and the sign of zero, exactly what canonicalization ignores), and costs O(nodes): a
 * string contributes its length and three of its characters, not a scan.
 */
export function argumentsFingerprint(argumentsText: string): string {
  let value: unknown;
  try {
    value = JSON.parse(argumentsText);
  } catch {
    return `r${argumentsText.length}:${stringHash(argumentsText)}`;
  }
  return `j${valueHash(value)}`;
}

// All characters of a short string, 32 evenly spread ones of a long string: O(1) per string.
function stringHash(text: string): number {
  const length = text.length;
  let hash = Math.imul(length, 0x9e3779b1) ^ 0x27d4eb2f;
  const step = length <= 32 ? 1 : Math.floor(length / 32);
  for (let index = 0; index < length; index += step) hash = Math.imul(hash ^ text.charCodeAt(index), 0x85ebca6b);
  hash = Math.imul(hash ^ text.charCodeAt(length - 1), 0xc2b2ae35);
  return hash ^ (hash >>> 15);
}

function valueHash(value: unknown): number {
  if (value === null) return 1;
  if (value === true) return 2;
  if (value === false) return 3;
  if (typeof value === 'number') return Math.imul(stringHash(String(value === 0 ? 0 : value)), 5) + 4;
  if (typeof value === 'string') return stringHash(value) + 5;
  if (Array.isArray(value)) {
    let hash = 6 + value.length;
    for (const entry of value) hash = (Math.imul(hash, 31) + valueHash(entry)) | 0;
    return hash;
  }
  const record = value as Record<string, unknown>;
  let hash = 8;
  for (const key of Object.keys(record)) {
    if (key === '__proto__') continue;
    // A sum is independent of key order.
    hash = (hash + Math.imul(stringHash(key) ^ 0x5bd1e995, valueHash(record[key]) | 1)) | 0;
  }
  return hash;
}

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
  /**
   * Whether `item` (or a copy derived from it) is an output kept without its call: in a compacted
   * context, one answering a call before the context start (see indexHistory). It has no
   * position; strategies keep it as they keep a message, and the prompt's counts leave it out.
   */
  isLateOutput(item: PromptItem): boolean;
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
  /**
   * What the index knows of each item of `items` by its index, without reading the item: for
   * the very array indexHistory returned (a strategy first in its list is handed it) when no
   * output was dropped from it; undefined for any other array.
   */
  layoutOf(items: readonly PromptItem[]): HistoryLayout | undefined;
}

/** The kind of an item of a {@link HistoryLayout}: a context notice, whatever its type, is a notice. */
export const LAYOUT_MESSAGE = 0;
export const LAYOUT_NOTICE = 1;
export const LAYOUT_CALL = 2;
export const LAYOUT_OUTPUT = 3;

export interface HistoryLayout {
  /** Per item, its kind: LAYOUT_MESSAGE, LAYOUT_NOTICE, LAYOUT_CALL or LAYOUT_OUTPUT. */
  kinds: Uint8Array;
  /** The info of the item at `index`, as infoOf gives it. */
  infoAt(index: number): ToolInfo | undefined;
}

/**
 * Indexes a history (full, or a tail view when `aggregates` is given) and drops the outputs
 * that answer no call before them, except, with `compactedContext` and without `aggregates`,
 * in a compacted context read whole from its start (the summary first): there such an output
 * answers a call before the context start, which the summary stands for (left open at the cut,
 * noted as interrupted, answered late). It stays where it stands, sent as user text
 * (lib/models/convert-to-model-messages.ts), in this prompt and every later one of the context
 * (`isLateOutput`). A call without an output stays, as any call, where it
 * stands: the prompt sends it with a placeholder result (lib/models/convert-to-model-messages.ts),
 * as every later prompt does, whether its output comes later or never, so a prompt begins
 * with the one the turn before sent (a call dropped while open would come back once answered).
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
  compactedContext = false,
): { history: HistoryIndex; items: PromptItem[] } {
  // Everything is read from the items in this one walk (a long history's items are spread
  // over memory, so each walk over them costs about as much as the work it does).
  const calls: PromptFunctionCallItem[] = [];
  // Per call, for finding repeats (full history) or protected calls (tail view).
  const names: string[] = [];
  const argumentTexts: string[] = [];
  const fingerprints: number[] = [];
  const seqs: (number | undefined)[] = [];
  const info = new Map<PromptItem, ToolInfo>();
  // Per call, its info: positions and protection are filled in once the calls are counted.
  const callInfo: ToolInfo[] = [];
  // The pending call of each call_id, by its index in `calls`.
  const pending = new Map<string, number>();
  // Each paired output, and each output kept without its call (compactedContext).
  const outputs: PromptItem[] = [];
  const late = new Set<PromptItem>();
  const keepLate = compactedContext && aggregates === undefined;
  const kinds = new Uint8Array(items.length);
  // Per item, the index in `calls` of its call (its own for a call), -1 for none.
  const callAt = new Int32Array(items.length).fill(-1);
  let toolItems = 0;
  for (let index = 0; index < items.length; index += 1) {
    const item = items[index]!;
    // isContextNotice, read here so that this read sees only the few shapes of history items
    // (through the shared function it sees every item shape of the process, and reading a
    // property an item does not have is then several times slower).
    const notice = item.synthetic === 'context_notice';
    if (item.type === 'message') {
      kinds[index] = notice ? LAYOUT_NOTICE : LAYOUT_MESSAGE;
      continue;
    }
    toolItems += 1;
    if (item.type === 'function_call') {
      kinds[index] = notice ? LAYOUT_NOTICE : LAYOUT_CALL;
      const known: ToolInfo = { position: 0, protected: false };
      callAt[index] = calls.length;
      info.set(item, known);
      pending.set(item.call_id, calls.length);
      calls.push(item);
      callInfo.push(known);
      if (aggregates) seqs.push(item.seq);
      else {
        names.push(item.name);
        argumentTexts.push(item.arguments);
        fingerprints.push(argumentsFingerprint(item.arguments));
      }
    } else {
      kinds[index] = notice ? LAYOUT_NOTICE : LAYOUT_OUTPUT;
      const call = pending.get(item.call_id);
      if (call === undefined) {
        if (keepLate) late.add(item);
        continue;
      }
      pending.delete(item.call_id);
      callAt[index] = call;
      info.set(item, callInfo[call]!);
      outputs.push(item);
    }
  }

  let isRepeat: (index: number) => boolean;
  let repeatsIn: RepeatsIn;
  let toolCalls: number;
  let protectedAt: (index: number) => boolean;
  if (aggregates) {
    toolCalls = aggregates.tool_calls;
    isRepeat = repeatFlagReader(aggregates);
    repeatsIn = repeatsAmong(repeatIndices(aggregates));
    const protectedSeqs = repeatedSeqs(aggregates);
    // A seq in `repeated` is by definition the newest instance of a repeated key.
    protectedAt = (index) => {
      const seq = seqs[index];
      return seq !== undefined && protectedSeqs[lowerBound(protectedSeqs, seq)] === seq;
    };
  } else {
    toolCalls = calls.length;
    const { flags, newest } = repeatFlags(argumentTexts, names, fingerprints);
    isRepeat = (index) => flags[index] === 1;
    const repeating: number[] = [];
    for (let index = 0; index < flags.length; index += 1) if (flags[index] === 1) repeating.push(index);
    repeatsIn = repeatsAmong(repeating);
    protectedAt = (index) => newest[index] === 1;
  }
  for (let index = 0; index < callInfo.length; index += 1) {
    const known = callInfo[index]!;
    known.position = calls.length - index;
    known.protected = protectedAt(index);
  }
  // Image positions are found when first asked for (only shorten_images asks): reading each
  // item's content costs as much again as the walk above. Copies derived before then are
  // recorded, and given their original's position when the positions are found.
  let found: ImagePositions | undefined;
  const derived: [PromptItem, PromptItem][] = [];
  const imagePositions = (): ImagePositions => {
    if (found !== undefined) return found;
    found = imagePositionsOf(items);
    for (const [original, copy] of derived) found.derive(original, copy);
    derived.length = 0;
    return found;
  };

  // Every output that is not a call is paired with one when the pairings account for them all.
  let sanitized: PromptItem[];
  let layout: HistoryLayout | undefined;
  if (outputs.length + late.size === toolItems - calls.length) {
    sanitized = [...items];
    layout = { kinds, infoAt: (index) => (callAt[index]! < 0 ? undefined : callInfo[callAt[index]!]) };
  } else {
    const paired = new Set<PromptItem>(outputs);
    sanitized = items.filter((item) => item.type !== 'function_call_output' || paired.has(item) || late.has(item));
  }
  const history: HistoryIndex = {
    toolCalls,
    isRepeat,
    repeatsIn,
    infoOf: (item) => info.get(item),
    isLateOutput: (item) => late.size > 0 && late.has(item),
    derive: (original, copy) => {
      const known = info.get(original);
      if (known !== undefined) info.set(copy, known);
      else if (late.has(original)) late.add(copy);
      if (found === undefined) derived.push([original, copy]);
      else found.derive(original, copy);
    },
    get images() {
      return aggregates ? aggregates.images : imagePositions().count;
    },
    imagePosition: (item) => imagePositions().positions.get(item),
    layoutOf: (candidate) => (candidate === sanitized ? layout : undefined),
  };
  return { history, items: sanitized };
}

interface ImagePositions {
  /** Image parts in the items. */
  count: number;
  /** Per item with images, the position of its last image part (newest = 1). */
  positions: Map<PromptItem, number>;
  derive(original: PromptItem, copy: PromptItem): void;
}

/** Image positions counted over every item handed in, unpaired ones too, as the aggregates count them. */
function imagePositionsOf(items: readonly PromptItem[]): ImagePositions {
  const positions = new Map<PromptItem, number>();
  let count = 0;
  for (let index = items.length - 1; index >= 0; index -= 1) {
    const images = imagesOf(items[index]!);
    if (images === 0) continue;
    positions.set(items[index]!, count + 1);
    count += images;
  }
  return {
    count,
    positions,
    derive: (original, copy) => {
      const position = positions.get(original);
      if (position !== undefined) positions.set(copy, position);
    },
  };
}

/**
 * Per call (history order): `flags` 1 when it repeats an earlier call (same name and canonical
 * arguments), `newest` 1 when it is the newest instance of a repeated call. Calls are grouped by
 * name and a cheap fingerprint of the parsed arguments that equal canonical calls always share
 * (see argumentsFingerprint); canonical texts are built and compared only inside a group of two
 * or more. Same result as comparing canonicalCall for every pair, without serializing and
 * hashing every long argument text.
 */
function repeatFlags(
  argumentTexts: readonly string[],
  names: readonly string[],
  fingerprints: readonly number[],
): { flags: Uint8Array; newest: Uint8Array } {
  const flags = new Uint8Array(names.length);
  const byName = new Map<string, Map<number, ArgumentsEntry[]>>();
  const entries: ArgumentsEntry[] = [];
  for (let index = 0; index < names.length; index += 1) {
    const name = names[index]!;
    let groups = byName.get(name);
    if (groups === undefined) {
      groups = new Map();
      byName.set(name, groups);
    }
    const fingerprint = fingerprints[index]!;
    const group = groups.get(fingerprint);
    if (group === undefined) {
      const entry = { argumentsText: argumentTexts[index]!, canonical: undefined, newest: index };
      groups.set(fingerprint, [entry]);
      entries.push(entry);
      continue;
    }
    const argumentsText = argumentTexts[index]!;
    const canonical = canonicalArguments(argumentsText);
    let match: ArgumentsEntry | undefined;
    for (const entry of group) {
      entry.canonical ??= canonicalArguments(entry.argumentsText);
      if (entry.canonical === canonical) {
        match = entry;
        break;
      }
    }
    if (match === undefined) {
      const entry = { argumentsText, canonical, newest: index };
      group.push(entry);
      entries.push(entry);
    } else {
      flags[index] = 1;
      match.newest = index;
    }
  }
  const newest = new Uint8Array(names.length);
  // The newest instance of a key is flagged exactly when the key occurred before it.
  for (const entry of entries) if (flags[entry.newest] === 1) newest[entry.newest] = 1;
  return { flags, newest };
}

interface ArgumentsEntry {
  argumentsText: string;
  canonical: string | undefined;
  /** The index of the newest call with these arguments. */
  newest: number;
}

/**
 * A 30-bit fingerprint of arguments that is equal for any two texts with the same
 * `canonicalArguments` (it is computed from the parsed value, ignoring key order, `__proto__`
 * keys and the sign of zero, and taking a number too large for a double as null, exactly as
 * canonicalization does), and costs O(nodes): a string contributes its length and at most 33 of
 * its characters, not a scan; what is nested more than 64 deep is not read. Unparseable texts
 * are hashed as text; two texts may share a fingerprint whatever they hold.
 */
export function argumentsFingerprint(argumentsText: string): number {
  let value: unknown;
  try {
    value = JSON.parse(argumentsText);
  } catch {
    return (stringHash(argumentsText) ^ 0x5f3759df) & 0x3fffffff;
  }
  // Small integers are Map keys without an allocation.
  return valueHash(value) & 0x3fffffff;
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

/**
 * Values nested deeper than this are hashed as one constant, whatever they hold: the hash takes
 * no more stack than that, and values of the same canonical text still hash alike.
 */
const HASHED_DEPTH = 64;

function valueHash(value: unknown, depth = 0): number {
  // A number too large for a double (1e400) parses to Infinity, which JSON.stringify writes as null.
  if (value === null || (typeof value === 'number' && !Number.isFinite(value))) return 1;
  if (value === true) return 2;
  if (value === false) return 3;
  if (typeof value === 'number') return Math.imul(stringHash(String(value === 0 ? 0 : value)), 5) + 4;
  if (typeof value === 'string') return stringHash(value) + 5;
  if (depth === HASHED_DEPTH) return 7;
  if (Array.isArray(value)) {
    let hash = 6 + value.length;
    for (const entry of value) hash = (Math.imul(hash, 31) + valueHash(entry, depth + 1)) | 0;
    return hash;
  }
  const record = value as Record<string, unknown>;
  let hash = 8;
  for (const key of Object.keys(record)) {
    if (key === '__proto__') continue;
    // A sum is independent of key order.
    hash = (hash + Math.imul(stringHash(key) ^ 0x5bd1e995, valueHash(record[key], depth + 1) | 1)) | 0;
  }
  return hash;
}

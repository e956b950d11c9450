import { concatBytes, toBytes } from '../../store/object-store.ts';
import type { LogItem } from '../records.ts';
import { elidedOf, storedItemJson } from '../view-items.ts';

/**
 * The stored bytes of a view's item arrays (lib/session/view-items.ts), built from those of the
 * array they were made from. A view's tail is mostly its base's items, the same objects after
 * the same ones: their bytes are taken from the base tail's as they are (pieces of the same
 * buffers, not copied), and only the items new since, or after one that changed, are
 * serialized. So a view's items cost what changed since its base, and the store's one copy
 * (or write) of the parts its body is put as (view-chunks.ts).
 */

/**
 * The bytes of `items`, each as stored after the one before it in `items` and followed by a
 * comma (its slot): `starts[index]`, where item `index`'s slot starts in the whole (and
 * `starts[items.length]` the whole's length), held as `pieces` one after another.
 */
export interface ListBytes {
  items: readonly LogItem[];
  starts: Int32Array;
  pieces: Uint8Array[];
  /** Where each piece starts in the whole, and the whole's length last. */
  pieceStarts: number[];
}

/**
 * The bytes of each item array built here (a view's tail, its inline items, a new chunk's), by the
 * array: an array whose bytes were built must not change in place afterwards (views' are frozen).
 */
const built = new WeakMap<readonly LogItem[], ListBytes>();

/**
 * A tail's pieces are copied into one buffer when there are more than this many, or when the
 * buffers they are cut from hold twice their bytes (items dropped from the tail since).
 */
const MAX_PIECES = 4096;

/**
 * The bytes of `items` (seq ascending), kept by the array: built from those of `from`, an array
 * of mostly the same objects in seq order, when they were built here. `gather`: the pieces are
 * copied into one buffer when they are too many or cut from buffers much larger (a tail kept
 * for the views after it; not the few items a view holds beside its chunk).
 */
export function listBytes(items: readonly LogItem[], from?: readonly LogItem[], gather = true): ListBytes {
  let list = built.get(items);
  if (!list) {
    list = buildList(items, from ? built.get(from) : undefined);
    if (gather && scattered(list)) list = flattened(list);
    built.set(items, list);
  }
  return list;
}

/** Keeps `list` as the bytes of `items` too, an array of the same items (a copy of its own). */
export function keepCopy(list: ListBytes, items: readonly LogItem[]): void {
  built.set(items, { ...list, items });
}

/**
 * Keeps the bytes of `items`, the first items of `list` (a new chunk's, cut from its view's
 * tail), until `takeListBytes` takes them.
 */
export function keepPrefix(list: ListBytes, items: readonly LogItem[]): void {
  const end = list.starts[items.length]!;
  const { pieces, pieceStarts } = piecesOf(list, 0, end);
  built.set(items, { items, starts: list.starts.slice(0, items.length + 1), pieces, pieceStarts });
}

/** The bytes of `items` (see listBytes), no longer kept. */
export function takeListBytes(items: readonly LogItem[]): ListBytes {
  const list = listBytes(items, undefined, false);
  built.delete(items);
  return list;
}

/** The bytes of `list`'s slots (its items and a comma after each). */
export function slotBytes(list: ListBytes): number {
  return list.starts[list.items.length]!;
}

/**
 * The bytes of the buffers kept for `items` (listBytes; none when not built here): what a cached
 * view holds beside its parsed items, up to about twice its tail's JSON (see MAX_PIECES).
 */
export function heldBytes(items: readonly LogItem[]): number {
  const list = built.get(items);
  return list ? bufferBytes(list) : 0;
}

/** The bytes of the buffers `list`'s pieces are cut from, each counted once. */
function bufferBytes(list: ListBytes): number {
  const buffers = new Set(list.pieces.map((piece) => piece.buffer));
  let bytes = 0;
  for (const buffer of buffers) bytes += buffer.byteLength;
  return bytes;
}

/** The length of `item`'s stored bytes after `previous` (serialized: for the few items not in a list). */
export function itemSize(item: LogItem, previous: LogItem | undefined): number {
  return toBytes(storedItemJson(item, elidedOf(item, previous))).length;
}

/**
 * The JSON array of the items as stored: `[`, their slots, the last one's comma a `]`, as parts
 * to concatenate (pieces of `list`'s buffers).
 */
export function listParts(list: ListBytes): Uint8Array[] {
  const whole = slotBytes(list);
  if (whole === 0) return [OPEN, CLOSE_LIST];
  return [OPEN, ...piecesOf(list, 0, whole - 1).pieces, CLOSE_LIST];
}

const OPEN = toBytes('[');
const CLOSE_LIST = toBytes(']');

/** The pieces of `list` holding its bytes from `start` to `end`, and where each starts (from 0; the length last). */
function piecesOf(list: ListBytes, start: number, end: number): { pieces: Uint8Array[]; pieceStarts: number[] } {
  const pieces: Uint8Array[] = [];
  const pieceStarts: number[] = [];
  let length = 0;
  for (let at = pieceAt(list, start); at < list.pieces.length && list.pieceStarts[at]! < end; at++) {
    const offset = list.pieceStarts[at]!;
    const piece = list.pieces[at]!;
    const part = piece.subarray(Math.max(0, start - offset), Math.min(piece.length, end - offset));
    if (part.length === 0) continue;
    pieceStarts.push(length);
    pieces.push(part);
    length += part.length;
  }
  pieceStarts.push(length);
  return { pieces, pieceStarts };
}

/** The index of the piece of `list` holding byte `offset` (the number of pieces when none does). */
function pieceAt(list: ListBytes, offset: number): number {
  let low = 0;
  let high = list.pieces.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (list.pieceStarts[middle + 1]! <= offset) low = middle + 1;
    else high = middle;
  }
  return low;
}

/**
 * The bytes of `items`, an item's slot taken from `source` where it holds the same object
 * stored the same way (what it leaves out, which depends on the item before it, the same), in
 * runs; the other items serialized. Where the two arrays hold the same objects in the same
 * places, only the arrays are looked at, not the items (a long tail's are scattered over the
 * heap).
 */
function buildList(items: readonly LogItem[], source: ListBytes | undefined): ListBytes {
  const held = source?.items ?? [];
  const starts = new Int32Array(items.length + 1);
  const pieces: Uint8Array[] = [];
  const pieceStarts: number[] = [];
  /** The bytes of the items before `index`, and of the pieces added (the rest is in the run or `fresh`). */
  let offset = 0;
  let added = 0;
  /** The run of `source`'s bytes being taken, from `runFrom` to `runTo` (none when equal). */
  let runFrom = 0;
  let runTo = 0;
  let fresh: Uint8Array[] = [];
  let freshBytes = 0;
  const add = (piece: Uint8Array) => {
    pieceStarts.push(added);
    pieces.push(piece);
    added += piece.length;
  };
  const endRun = () => {
    if (runTo > runFrom) for (const piece of piecesOf(source!, runFrom, runTo).pieces) add(piece);
    runFrom = runTo = 0;
  };
  const endFresh = () => {
    if (freshBytes > 0) add(fresh.length === 1 ? fresh[0]! : concatBytes(fresh));
    fresh = [];
    freshBytes = 0;
  };
  let at = 0;
  for (let index = 0; index < items.length; index++) {
    const item = items[index]!;
    const previous = items[index - 1];
    if (held[at] !== item) while (at < held.length && held[at]!.seq < item.seq) at++;
    const found = at < held.length && held[at] === item;
    const same =
      found &&
      ((index === 0 && at === 0) ||
        (index > 0 && at > 0 && held[at - 1] === previous) ||
        elidedOf(item, previous) === elidedOf(item, held[at - 1]));
    starts[index] = offset;
    if (same) {
      const from = source!.starts[at]!;
      const to = source!.starts[at + 1]!;
      if (runTo === runFrom || runTo !== from) {
        endFresh();
        endRun();
        runFrom = from;
      }
      runTo = to;
      offset += to - from;
      // The items after it that follow it in `source` too continue the run: only the arrays are
      // looked at (a long tail is mostly such runs).
      for (at++; index + 1 < items.length && at < held.length && items[index + 1] === held[at]; at++) {
        starts[++index] = offset;
        const next = source!.starts[at + 1]!;
        offset += next - runTo;
        runTo = next;
      }
      continue;
    }
    endRun();
    const bytes = toBytes(`${storedItemJson(item, elidedOf(item, previous))},`);
    fresh.push(bytes);
    freshBytes += bytes.length;
    offset += bytes.length;
    if (found) at++;
  }
  endFresh();
  endRun();
  starts[items.length] = offset;
  pieceStarts.push(added);
  return { items, starts, pieces, pieceStarts };
}

/** Whether `list` is held in too many pieces, or in buffers that hold twice its bytes. */
function scattered(list: ListBytes): boolean {
  return list.pieces.length > MAX_PIECES || bufferBytes(list) > 2 * slotBytes(list) + 64 * 1024;
}

/** `list` in one buffer of its own. */
function flattened(list: ListBytes): ListBytes {
  const bytes = concatBytes(list.pieces);
  return { ...list, pieces: [bytes], pieceStarts: [0, bytes.length] };
}

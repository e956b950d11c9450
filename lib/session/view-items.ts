import type { LogItem } from './records.ts';

/**
 * How the item arrays of a view are stored (its tail's `items`, and a view chunk's): an item
 * leaves out its `created_at` when it equals the previous item's in the same array, and its
 * `seq` when it is the previous item's seq + 1 (items appended together share one created_at,
 * and seqs mostly run on). A reader puts them back (`restoreItems`) before checking the items,
 * so what it holds is what was written, key for key and in order.
 */

/** Which stored fields an item's stored form leaves out: 1 its created_at, 2 its seq, 3 both. */
export type Elided = 0 | 1 | 2 | 3;

/** What `item`, after `previous` in the same array, leaves out of its stored form. */
export function elidedOf(item: LogItem, previous: LogItem | undefined): Elided {
  if (!previous) return 0;
  return ((item.created_at === previous.created_at ? 1 : 0) | (item.seq === previous.seq + 1 ? 2 : 0)) as Elided;
}

/** The JSON of `item` as stored, leaving out what `elided` says. */
export function storedItemJson(item: LogItem, elided: Elided): string {
  if (elided === 0) return JSON.stringify(item);
  const fields = item as unknown as Record<string, unknown>;
  const stored: Record<string, unknown> = {};
  for (const key of Object.keys(fields))
    if (!((key === 'created_at' && elided & 1) || (key === 'seq' && elided & 2))) setOwn(stored, key, fields[key]);
  return JSON.stringify(stored);
}

/**
 * Sets `key` of an object being built key by key (assignment: objects of the same keys in the
 * same order share their shape), as an own property even when it is `__proto__`.
 */
function setOwn(object: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__')
    Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
  else object[key] = value;
}

/** Restores (restoreItems) the `items` of `holder`, a stored view's tail or a chunk, where it has them. */
export function restoreItemsIn(holder: unknown): void {
  if (typeof holder === 'object' && holder !== null && Object.hasOwn(holder, 'items'))
    (holder as { items: unknown }).items = restoreItems((holder as { items: unknown }).items);
}

/** The keys an item's stored fields come before (its other keys come before them). */
const AFTER_STORED = ['output_ref', 'compacted', 'behind'] as const;

/**
 * Stored items with what their stored form left out put back from the item before each, in
 * the array itself (a parse's own, which nothing else holds). Where what is put back goes last
 * (the item has none of AFTER_STORED, and a missing seq is not due before a created_at it has),
 * it is set on the parsed item itself, as rebuilding it would place it; otherwise the item is
 * rebuilt with it in its place. Anything that is not such an array, or an item that cannot be
 * completed (the first, or one after an item without a numeric seq), is left as it is for the
 * item schema to refuse.
 */
function restoreItems(value: unknown): unknown {
  if (!Array.isArray(value)) return value;
  let previous: Record<string, unknown> | undefined;
  for (let index = 0; index < value.length; index++) {
    const item: unknown = value[index];
    if (typeof item !== 'object' || item === null || Array.isArray(item)) {
      previous = undefined;
      continue;
    }
    let stored = item as Record<string, unknown>;
    const seq = !Object.hasOwn(stored, 'seq');
    const createdAt = !Object.hasOwn(stored, 'created_at');
    if ((seq || createdAt) && previous && Number.isSafeInteger(previous.seq)) {
      const nextSeq = seq ? (previous.seq as number) + 1 : undefined;
      const previousCreatedAt = createdAt ? previous.created_at : undefined;
      if ((seq && !createdAt) || hasAfterStored(stored)) {
        stored = withStoredFields(stored, nextSeq, previousCreatedAt);
        value[index] = stored;
      } else {
        if (nextSeq !== undefined) stored.seq = nextSeq;
        if (previousCreatedAt !== undefined) stored.created_at = previousCreatedAt;
      }
    }
    previous = stored;
  }
  return value;
}

function hasAfterStored(item: object): boolean {
  return Object.hasOwn(item, 'output_ref') || Object.hasOwn(item, 'compacted') || Object.hasOwn(item, 'behind');
}

/** `item` with `seq` and `created_at` (when given) in their place: before the keys AFTER_STORED holds. */
function withStoredFields(
  item: Record<string, unknown>,
  seq: number | undefined,
  createdAt: unknown,
): Record<string, unknown> {
  const restored: Record<string, unknown> = {};
  for (const key of Object.keys(item)) {
    const after = (AFTER_STORED as readonly string[]).includes(key);
    if (after || key === 'created_at') {
      if (seq !== undefined) restored.seq = seq;
      seq = undefined;
    }
    if (after && createdAt !== undefined) {
      restored.created_at = createdAt;
      createdAt = undefined;
    }
    setOwn(restored, key, item[key]);
  }
  if (seq !== undefined) restored.seq = seq;
  if (createdAt !== undefined) restored.created_at = createdAt;
  return restored;
}

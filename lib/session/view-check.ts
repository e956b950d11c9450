import { z } from 'zod';
import {
  historyAggregatesSchema,
  PADDED_BASE64,
  REPEAT_FLAGS,
  RepeatedCalls,
  type HistoryAggregates,
} from '../history.ts';
import { hasPlainFields } from './export-format.ts';
import { parseStored, validateStored, type LogItem } from './records.ts';
import { parseJsonBytes } from './split-json.ts';
import { restoreItemsIn } from './view-items.ts';
import { CorruptObjectError } from '../errors.ts';
import { filterKeys, isFilterText } from './key-filter.ts';
import {
  PREFIXES_PATTERN,
  RECORD_NAME_PATTERN,
  SHARD_PREFIX_PATTERN,
  SORTED_KEYS_PATTERN,
  VIEW_VERSION,
  countsFit,
  filtersFit,
  SHARD_COUNTS_PATTERN,
  keyIndexSchema,
  keysAscending,
  type KeyIndex,
  viewChunkSchema,
  viewItemSchema,
  viewSchema,
  type LogView,
} from './view-records.ts';

/**
 * The view stored under `key` (its bytes), its tail's items restored (lib/session/view-items.ts),
 * or null when it is of another version than VIEW_VERSION or was written by another view policy
 * than `policy` (a view of another version may differ in anything but these two fields). Anything
 * else not a view is a CorruptObjectError.
 */
export function storedView(key: string, body: Uint8Array, policy: string): LogView | null {
  const value = parsedBody(key, body, VIEW_ITEMS_PATH);
  const version = validateStored(key, value, viewVersionSchema);
  if (version.v !== VIEW_VERSION || version.policy !== policy) return null;
  restoreItemsIn((value as { tail?: unknown }).tail);
  return viewOf(key, value);
}

/**
 * The JSON of a stored view or chunk, its items (at `itemsPath`) parsed in runs when it is large
 * (lib/session/split-json.ts: the same value as a whole parse). What is not UTF-8 JSON is the
 * CorruptObjectError of parseStored, which parses it again only to say so.
 */
function parsedBody(key: string, body: Uint8Array, itemsPath: readonly string[]): unknown {
  try {
    return parseJsonBytes(body, itemsPath);
  } catch {
    return parseStored(key, body, z.unknown());
  }
}

const VIEW_ITEMS_PATH = ['tail', 'items'];
const CHUNK_ITEMS_PATH = ['items'];

/** Just the version of a view, read before its schema. */
const viewVersionSchema = z.object({ v: z.number().optional(), policy: z.string().optional() }).passthrough();

/** The view a value read from `key` holds, as `viewSchema` gives it (checkedView, else the schema). */
export function viewOf(key: string, value: unknown): LogView {
  return checkedView(value) ?? validateStored(key, value, viewSchema);
}

/**
 * A view read back checked without its schema where it has the shape the writer gives it
 * (lib/session/log/view-writer.ts): a view is mostly its tail's items and its `repeated` map, and
 * the schema copies every one of them key by key. What passes here is what `viewSchema` passes
 * and gives, key for key and in order (property-tested in test/session/view-check.test.ts), so
 * the parts that pass are taken as they are; an item of another shape goes through the item
 * schema alone. Null: anything else, for the caller to validate with `viewSchema` (its output
 * or its error).
 */
export function checkedView(value: unknown): LogView | null {
  if (!hasKeys(value, VIEW_KEYS)) return null;
  const { format, v, policy, record, last_seq, aggregates, keys, tail, created_at } = value;
  if (format !== 'tailgate.view.v1' || v !== VIEW_VERSION || typeof policy !== 'string') return null;
  if (!isCount(record) || record < 1 || !isCount(last_seq) || typeof created_at !== 'string') return null;
  const checkedAggregates = plainAggregates(aggregates) ?? parsed(historyAggregatesSchema, aggregates);
  const index = plainKeyIndex(keys) ? keys : parsed(keyIndexSchema, keys);
  if (!checkedAggregates || !index) return null;
  let checkedTail: LogView['tail'] = null;
  if (tail !== null) {
    const chunked =
      hasKeys(tail, CHUNKED_TAIL_KEYS) ||
      hasKeys(
        tail,
        CHUNKED_TAIL_KEYS.filter((key) => key !== 'drop'),
      );
    if (!(chunked || hasKeys(tail, TAIL_KEYS))) return null;
    const { from_seq, window_start, chunk, drop } = tail as Record<string, unknown>;
    if (!isCount(from_seq) || from_seq < 1 || !isCount(window_start) || window_start < 1) return null;
    const items = checkedItems(tail.items);
    if (!items) return null;
    checkedTail = { from_seq, window_start, items };
    if (chunked) {
      const named = parsed(chunkNameSchema, chunk);
      if (!named || (drop !== undefined && !(Array.isArray(drop) && drop.every((seq) => isCount(seq) && seq > 0))))
        return null;
      checkedTail = { from_seq, window_start, chunk: named, ...(drop ? { drop: drop as number[] } : {}), items };
    }
  }
  return {
    format,
    v,
    policy,
    record,
    last_seq,
    aggregates: checkedAggregates,
    keys: index,
    tail: checkedTail,
    created_at,
  };
}

/** Items as `viewItemSchema` gives them (each plain one as it is), or null when one is refused. */
function checkedItems(value: unknown): NonNullable<LogView['tail']>['items'] | null {
  if (!Array.isArray(value)) return null;
  const items: NonNullable<LogView['tail']>['items'] = [];
  for (const item of value as unknown[]) {
    const checked = plainItem(item) ? item : parsed(viewItemSchema, item);
    if (!checked) return null;
    items.push(checked);
  }
  return items;
}

/**
 * The items of the chunk stored under `key` (its bytes), which the view of `record` wrote,
 * restored (lib/session/view-items.ts) and checked as `viewChunkSchema` checks them. Anything
 * else is a CorruptObjectError.
 */
export function storedViewChunk(key: string, body: Uint8Array, record: number): LogItem[] {
  const value = parsedBody(key, body, CHUNK_ITEMS_PATH);
  restoreItemsIn(value);
  const chunk = hasKeys(value, CHUNK_KEYS) && value.format === 'tailgate.view-chunk.v1' && value.record === record;
  const checked = (chunk ? checkedItems(value.items) : null) ?? validateStored(key, value, viewChunkSchema).items;
  if ((value as { record: unknown }).record !== record)
    throw new CorruptObjectError(key, `holds the chunk of record ${(value as { record: unknown }).record}`);
  for (let at = 1; at < checked.length; at++)
    if (checked[at]!.seq <= checked[at - 1]!.seq)
      throw new CorruptObjectError(key, `holds seq ${checked[at]!.seq} out of order`);
  return checked as LogItem[];
}

/** What `schema` gives `value`, or undefined when it refuses it. */
function parsed<Schema extends z.ZodType>(schema: Schema, value: unknown): z.infer<Schema> | undefined {
  const result = schema.safeParse(value);
  return result.success ? result.data : undefined;
}

const VIEW_KEYS = ['format', 'v', 'policy', 'record', 'last_seq', 'aggregates', 'keys', 'tail', 'created_at'] as const;
const TAIL_KEYS = ['from_seq', 'window_start', 'items'] as const;
const CHUNKED_TAIL_KEYS = ['from_seq', 'window_start', 'chunk', 'drop', 'items'] as const;
const CHUNK_KEYS = ['format', 'record', 'items'] as const;
const chunkNameSchema = viewSchema.shape.tail.unwrap().shape.chunk.unwrap();
const AGGREGATE_KEYS = ['tool_calls', 'tool_outputs', 'repeat_flags', 'repeated', 'images', 'image_order'] as const;
/** The keys of each item shape taken as it is, in the schema's order (optional ones last, each may be absent). */
const ITEM_KEYS = {
  message: { required: ['type', 'role', 'content', 'seq', 'created_at'], optional: [] },
  function_call: {
    required: ['type', 'call_id', 'name', 'arguments', 'seq', 'created_at'],
    optional: ['compacted', 'behind'],
  },
  function_call_output: {
    required: ['type', 'call_id', 'output', 'seq', 'created_at'],
    optional: ['compacted', 'behind'],
  },
} as const;

/** A plain object whose own keys are exactly `keys`, in that order. */
function hasKeys<const Keys extends readonly string[]>(
  value: unknown,
  keys: Keys,
): value is Record<Keys[number], unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const own = Object.keys(value);
  return own.length === keys.length && own.every((key, index) => key === keys[index]);
}

/** A non-negative safe integer, as `z.number().int().nonnegative()` takes it. */
function isCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

/** Aggregates as the schema gives them (`repeated` held as a RepeatedCalls of the object read), or null. */
function plainAggregates(value: unknown): HistoryAggregates | null {
  const split = hasKeys(value, [...AGGREGATE_KEYS, 'repeated_older']);
  if (!split && !hasKeys(value, AGGREGATE_KEYS)) return null;
  const { tool_calls, tool_outputs, repeat_flags, repeated, images, image_order } = value;
  if (split && !plainSplit((value as Record<'repeated_older', unknown>).repeated_older)) return null;
  if (!isCount(tool_calls) || !isCount(tool_outputs) || !isCount(images)) return null;
  if (typeof repeat_flags !== 'string' || typeof image_order !== 'string') return null;
  if (!REPEAT_FLAGS.test(repeat_flags) || !PADDED_BASE64.test(image_order)) return null;
  // The schema's copy leaves out a `__proto__` key (RepeatedCalls.checked refuses the map then).
  const map = RepeatedCalls.checked(repeated);
  return map && ({ ...value, repeated: map } as HistoryAggregates);
}

/** The split of a `repeated` (HistoryAggregates.repeated_older), its keys in the schema's order. */
function plainSplit(value: unknown): boolean {
  if (!hasKeys(value, ['before_seq', 'record'] as const)) return false;
  return isCount(value.before_seq) && value.before_seq >= 1 && isCount(value.record) && value.record >= 1;
}

/**
 * A repeat index in the writer's shape (`keyIndexSchema`'s keys in its order, `delta` and
 * `filters` each there or not), each part as the schema takes it: then the schema gives it back
 * key for key, so it is taken as it is (the schema copies each shard's filter, a view's largest
 * part after its items, key by key).
 */
function plainKeyIndex(value: unknown): value is KeyIndex {
  if (typeof value !== 'object' || value === null) return false;
  const delta = Object.hasOwn(value, 'delta');
  const filters = Object.hasOwn(value, 'filters');
  const keys = ['count', 'depth', 'versions', 'counts', ...(delta ? ['delta'] : []), ...(filters ? ['filters'] : [])];
  if (!hasKeys(value, keys)) return false;
  const index = value as Record<string, unknown>;
  if (!isCount(index.count) || !isCount(index.depth) || index.depth > 6) return false;
  if (
    !plainRecord(index.versions, (name, prefixes) => RECORD_NAME_PATTERN.test(name) && PREFIXES_PATTERN.test(prefixes))
  )
    return false;
  if (!plainRecord(index.counts, (name, counts) => RECORD_NAME_PATTERN.test(name) && SHARD_COUNTS_PATTERN.test(counts)))
    return false;
  if (!countsFit(index as KeyIndex)) return false;
  const keysOk =
    !delta || (typeof index.delta === 'string' && SORTED_KEYS_PATTERN.test(index.delta) && keysAscending(index.delta));
  if (!keysOk) return false;
  const isFilter = (prefix: string, filter: string) =>
    SHARD_PREFIX_PATTERN.test(prefix) && isFilterText(filter) && (filterKeys(filter) ?? 0) > 0;
  if (filters && !plainRecord(index.filters, isFilter)) return false;
  return filtersFit(index as KeyIndex);
}

/** A plain object of string values, each key and value as `entry` takes them. */
function plainRecord(value: unknown, entry: (key: string, value: string) => boolean): boolean {
  if (typeof value !== 'object' || value === null || Object.getPrototypeOf(value) !== Object.prototype) return false;
  for (const key of Object.keys(value)) {
    const field = (value as Record<string, unknown>)[key];
    if (typeof field !== 'string' || !entry(key, field)) return false;
  }
  return true;
}

function plainItem(value: unknown): value is LogItem {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const item = value as Record<string, unknown>;
  const shape = ITEM_KEYS[item.type as keyof typeof ITEM_KEYS] as
    | { required: readonly string[]; optional: readonly string[] }
    | undefined;
  if (!shape || !Object.hasOwn(ITEM_KEYS, item.type as string)) return false;
  const own = Object.keys(item);
  const { required, optional } = shape;
  if (own.length < required.length) return false;
  for (let index = 0; index < required.length; index++) if (own[index] !== required[index]) return false;
  let next = 0;
  for (let index = required.length; index < own.length; index++) {
    const key = own[index]!;
    const at = optional.indexOf(key, next);
    if (at < 0 || item[key] !== true) return false;
    next = at + 1;
  }
  return hasPlainFields(item);
}

import { z } from 'zod';
import {
  cutFields,
  functionCallItemSchema,
  functionCallOutputItemSchema,
  messageItemSchema,
  payloadRefSchema,
} from '../items.ts';
import { historyAggregatesSchema } from '../history.ts';
import { FILTER_PATTERN, filterKeys, INDEX_KEY_CHARS } from './key-filter.ts';
import { storedFields } from './records.ts';

/**
 * The zod schemas of what packing writes besides segments (lib/session/records.ts has the
 * rest): a record's view, and the repeat index and its shards that a view names.
 */

/**
 * An item of a view's tail: a log item, or a tool item stored as the strategies compact it, or
 * (`behind`) a tool item behind the overflow boundary stored without its arguments or output:
 * only its place, pairing and whether the strategies compact it (`compacted`) are kept.
 */
export const viewItemSchema = z.discriminatedUnion('type', [
  messageItemSchema.extend({ ...storedFields, ...cutFields }),
  functionCallItemSchema.extend({
    ...storedFields,
    ...cutFields,
    compacted: z.literal(true).optional(),
    behind: z.literal(true).optional(),
  }),
  functionCallOutputItemSchema.extend({
    ...storedFields,
    output_ref: payloadRefSchema.optional(),
    compacted: z.literal(true).optional(),
    behind: z.literal(true).optional(),
  }),
]);

/** The version of the view format this code writes and reads; a view of any other is ignored. */
export const VIEW_VERSION = 8;

/** `keyIndexSchema`'s `versions`: a view record by each name, its shards' prefixes concatenated. */
export const RECORD_NAME_PATTERN = /^[1-9]\d*$/;
export const PREFIXES_PATTERN = /^[0-9a-f]*$/;
/** `keyIndexSchema`'s `counts`: the keys of each shard a version names, in its order, comma-separated. */
export const SHARD_COUNTS_PATTERN = /^[1-9]\d{0,8}(?:,[1-9]\d{0,8})*$/;
/** `keyIndexSchema`'s `filters`: each by the prefix of its shard. */
export const SHARD_PREFIX_PATTERN = /^[0-9a-f]{0,6}$/;
/** Call keys of INDEX_KEY_CHARS hex characters, concatenated (`sortedKeysSchema`). */
export const SORTED_KEYS_PATTERN = new RegExp(`^(?:[0-9a-f]{${INDEX_KEY_CHARS}})*$`);

/** Call keys of INDEX_KEY_CHARS hex characters, concatenated in ascending order (readers search them by halves). */
const sortedKeysSchema = z.string().regex(SORTED_KEYS_PATTERN).refine(keysAscending, 'keys out of order');

/**
 * Whether each key of INDEX_KEY_CHARS characters in `keys` (the last may be shorter) comes after the one
 * before it as strings compare, compared in place rather than sliced out.
 */
export function keysAscending(keys: string): boolean {
  for (let at = INDEX_KEY_CHARS; at < keys.length; at += INDEX_KEY_CHARS) {
    const end = Math.min(at + INDEX_KEY_CHARS, keys.length);
    let char = 0;
    while (at + char < end && keys.charCodeAt(at - INDEX_KEY_CHARS + char) === keys.charCodeAt(at + char)) char++;
    // Equal to the later key's end: the same key, or the later one a prefix of the earlier.
    if (at + char === end || keys.charCodeAt(at - INDEX_KEY_CHARS + char) > keys.charCodeAt(at + char)) return false;
  }
  return true;
}

/**
 * The repeat index a view names: every distinct call key seen up to the view's end, as its
 * first INDEX_KEY_CHARS hex characters. The first of them are split by their first `depth` characters into
 * shards, stored together: the shards a view wrote are one object (`keys/<g>/<inv record>-set`,
 * lib/session/log/key-shards.ts), their keys concatenated in the order of their prefixes.
 * `versions` maps a view record to the prefixes (each `depth` characters, concatenated) whose
 * shard that view wrote, and `counts` the same record to the number of keys of each of those
 * shards, in that order (so where each shard starts in the object); `count` is the number of
 * keys. `delta` (absent when empty): the keys no shard holds, fewer than the delta bound.
 * `filters` (absent without shards, and past FILTER_MAX_KEYS keys in shards): by prefix, the
 * Bloom filter of each shard `versions` names, and of no other, its first character its bits per
 * key (lib/session/key-filter.ts).
 */
export const keyIndexSchema = z
  .object({
    count: z.number().int().nonnegative(),
    depth: z.number().int().min(0).max(6),
    versions: z.record(z.string().regex(RECORD_NAME_PATTERN), z.string().regex(PREFIXES_PATTERN)),
    counts: z.record(z.string().regex(RECORD_NAME_PATTERN), z.string().regex(SHARD_COUNTS_PATTERN)),
    delta: sortedKeysSchema.optional(),
    filters: z
      .record(
        z.string().regex(SHARD_PREFIX_PATTERN),
        z
          .string()
          .regex(FILTER_PATTERN)
          // A shard holds a key at least: the filter of none would reject every key unseen.
          .refine((filter) => (filterKeys(filter) ?? 0) > 0, 'not the length of a filter'),
      )
      .optional(),
  })
  .strict()
  .refine((index) => countsFit(index), 'counts not those of its shards')
  .refine((index) => filtersFit(index), 'filters not those of its shards');
export type KeyIndex = z.infer<typeof keyIndexSchema>;

/** The view record of each shard an index names (`versions`), by prefix. */
export function shardVersionsOf(depth: number, versions: Readonly<Record<string, string>>): Map<string, number> {
  const byPrefix = new Map<string, number>();
  for (const [record, prefixes] of Object.entries(versions)) {
    if (depth === 0) byPrefix.set('', Number(record));
    for (let at = 0; at + depth <= prefixes.length && depth > 0; at += depth)
      byPrefix.set(prefixes.slice(at, at + depth), Number(record));
  }
  return byPrefix;
}

/** Where a shard is: the object of view `record` (its `-set`), `length` characters from `offset`. */
export interface ShardPlace {
  record: number;
  offset: number;
  length: number;
}

/** An index's names of its shards (`keyIndexSchema`). */
interface ShardNames {
  depth: number;
  versions: Readonly<Record<string, string>>;
  counts: Readonly<Record<string, string>>;
}

/** Where each shard an index names is (`versions` and `counts`), by prefix. */
export function shardPlacesOf(index: ShardNames): Map<string, ShardPlace> {
  const places = new Map<string, ShardPlace>();
  for (const [name, prefixes] of Object.entries(index.versions)) {
    const record = Number(name);
    const counts = (index.counts[name] ?? '').split(',').map(Number);
    let offset = 0;
    counts.forEach((count, at) => {
      const prefix = index.depth === 0 ? '' : prefixes.slice(at * index.depth, (at + 1) * index.depth);
      places.set(prefix, { record, offset, length: count * INDEX_KEY_CHARS });
      offset += count * INDEX_KEY_CHARS;
    });
  }
  return places;
}

/** Whether an index's `counts` give one count for each shard its `versions` name, and no other. */
export function countsFit(index: ShardNames): boolean {
  const names = Object.keys(index.versions);
  if (Object.keys(index.counts).length !== names.length) return false;
  return names.every((name) => {
    const counts = index.counts[name];
    const prefixes = index.versions[name]!;
    if (counts === undefined || !Object.hasOwn(index.counts, name)) return false;
    const shards = index.depth === 0 ? 1 : prefixes.length / index.depth;
    return Number.isInteger(shards) && shards > 0 && counts.split(',').length === shards;
  });
}

/**
 * Whether an index's `filters`, if any, name exactly the shards its `versions` name, each sized
 * for the keys its `counts` give that shard (a filter whose first character was changed to say
 * other bits a key is refused so, rather than read as rejecting keys its shard holds).
 */
export function filtersFit(index: ShardNames & { filters?: Readonly<Record<string, string>> | undefined }): boolean {
  if (index.filters === undefined) return true;
  const places = shardPlacesOf(index);
  const filters = Object.entries(index.filters);
  return (
    filters.length === places.size &&
    filters.every(([prefix, filter]) => filterKeys(filter) === (places.get(prefix)?.length ?? 0) / INDEX_KEY_CHARS)
  );
}

/**
 * `turn/<inverted record>.view`: the history up to `last_seq` (the end of record `record`) as
 * the strategies need it, so a turn reads one object instead of walking segments. Written by
 * `pack`, immutable. `v` is VIEW_VERSION: a reader ignores a view of another version (an
 * older one, or one whose stored tail another version of the strategies compacted).
 *
 * - `aggregates`: the aggregates of the history up to `last_seq`.
 * - `keys`: the repeat index up to `last_seq` (what tells a new call from a repeat), read
 *   by shard for the calls after the view only.
 * - `tail`: a tail view (see `selectTail`) of the history from `from_seq` (the context start
 *   when the view was written; 1 without one) up to `last_seq`: every message, the newest
 *   instance of every repeated call with its output, and everything from `window_start` on.
 *   Tool items the strategies may show whole are as stored; the others are stored as the
 *   strategies compact them (`compacted`), so reading a view costs about what the prompt
 *   holds. Null when the strategies of the session need the whole history. Stored, most of
 *   it may be in a chunk (`viewChunkSchema`) the view names (`chunk`: its record, id and
 *   number of items): the tail is then the chunk's items but those whose seq `drop` lists or
 *   `items` holds again, and `items`, in seq order (lib/session/log/view-chunks.ts). A view
 *   read back holds its whole tail in `items` and neither `chunk` nor `drop`.
 */
export const viewSchema = z
  .object({
    format: z.literal('tailgate.view.v1'),
    v: z.literal(VIEW_VERSION),
    /** The version of the view policy that wrote it (ViewPolicy in lib/session/log/types.ts). */
    policy: z.string(),
    record: z.number().int().positive(),
    last_seq: z.number().int().nonnegative(),
    aggregates: historyAggregatesSchema,
    keys: keyIndexSchema,
    tail: z
      .object({
        from_seq: z.number().int().positive(),
        window_start: z.number().int().positive(),
        chunk: z
          .object({
            record: z.number().int().positive(),
            id: z.string().regex(/^[0-9a-f]{8}$/),
            count: z.number().int().nonnegative(),
          })
          .strict()
          .optional(),
        drop: z.array(z.number().int().positive()).optional(),
        items: z.array(viewItemSchema),
      })
      .strict()
      .nullable(),
    created_at: z.string(),
  })
  .strict();
export type LogView = z.infer<typeof viewSchema>;

/**
 * `tail/<inverted record>-<id>`: a chunk of views' tails, the items of the tail of the view of
 * `record` before its window, written with it and immutable; the views after it name it too
 * while they hold nearly the same items (lib/session/log/view-chunks.ts).
 */
export const viewChunkSchema = z
  .object({
    format: z.literal('tailgate.view-chunk.v1'),
    record: z.number().int().positive(),
    items: z.array(viewItemSchema),
  })
  .strict();

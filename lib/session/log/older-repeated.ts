import { z } from 'zod';
import { CorruptObjectError } from '../../errors.ts';
import { RepeatedCalls, repeatedEntriesSchema, type HistoryAggregates } from '../../history.ts';
import { olderRepeatedKey, type LogScope } from '../keys.ts';
import { parseStored, validateStored } from '../records.ts';
import type { LogContext } from './context.ts';
import { contextOf, overflowOf, type Head } from './head.ts';
import type { TurnHistory } from './types.ts';
import type { LogView } from '../view-records.ts';

/**
 * The older entries of a view's `repeated`, stored apart (docs/STORAGE.md, "What else a view
 * holds grows with the history"). A view written under an overflow boundary keeps the entries
 * whose seq is at least its split (`repeated_older.before_seq`: at most its boundary's
 * `tool_start_seq` and its tail's `from_seq`) and names the object holding the others, so a turn
 * that reads from the boundary reads and parses only the entries it can meet. A read that hands
 * the strategies older items, or asks for older calls (a read without the boundary: `truncation`,
 * compacting, a preview, an output answering a call the window lacks), reads the object too.
 * Older entries change only by being overridden by a newer repeat of their key, which the view
 * then holds: the whole map is the object's entries overridden by the view's.
 */

/**
 * A view splits `repeated` once its entries older than the split hold this many bytes of JSON,
 * and writes the older ones again once that many have gathered in front of its split.
 */
const SPLIT_BYTES = 8 * 1024;

/** `keys/<generation>/<inverted record>-repeated-<before_seq>` (lib/session/keys.ts). */
const olderRepeatedSchema = z
  .object({
    format: z.literal('tailgate.repeated.v1'),
    record: z.number().int().positive(),
    before_seq: z.number().int().positive(),
    repeated: repeatedEntriesSchema,
  })
  .strict();
type OlderRepeated = z.infer<typeof olderRepeatedSchema>;

/**
 * Whether `aggregates` serve a read under an overflow boundary whose tool start is `toolStart`
 * (null: a read without one) that hands the strategies items from `firstSeq` on: `repeated` is
 * whole, or every seq the read can meet is at or after its split.
 */
function servesRead(aggregates: HistoryAggregates, toolStart: number | null, firstSeq: number): boolean {
  const older = aggregates.repeated_older;
  return !older || (toolStart !== null && toolStart >= older.before_seq && firstSeq >= older.before_seq);
}

/**
 * A turn's read (`read`, which says the tool start of the boundary it read from: null, none)
 * with aggregates that serve it: the claim's (`claimed`), or, where their split `repeated` does
 * not (no boundary, one before the split, or items before it handed on), `whole()`, read again.
 */
export async function servedRead(
  claimed: HistoryAggregates,
  toolStart: number | null,
  whole: () => Promise<HistoryAggregates>,
  read: (aggregates: HistoryAggregates) => Promise<{ history: TurnHistory; toolStart: number | null }>,
): Promise<TurnHistory> {
  let aggregates = servesRead(claimed, toolStart, Number.POSITIVE_INFINITY) ? claimed : await whole();
  let done = await read(aggregates);
  if (!servesRead(aggregates, done.toolStart, done.history.items[0]?.seq ?? Number.POSITIVE_INFINITY)) {
    aggregates = await whole();
    done = await read(aggregates);
  }
  return { ...done.history, aggregates };
}

/** The key of the object a split `repeated` names (undefined: it is whole). */
export function olderRepeatedKeyOf(scope: LogScope, aggregates: HistoryAggregates): string | undefined {
  const older = aggregates.repeated_older;
  return older ? olderRepeatedKey(scope, older.record, older.before_seq) : undefined;
}

/** `aggregates` with every entry of `repeated` (read from its object), or null when the object is gone. */
export async function withOlderRepeated(
  log: LogContext,
  scope: LogScope,
  aggregates: HistoryAggregates,
): Promise<HistoryAggregates | null> {
  const older = aggregates.repeated_older;
  const key = olderRepeatedKeyOf(scope, aggregates);
  if (!older || key === undefined) return aggregates;
  const object = await log.store.get(key);
  if (!object) return null;
  const stored = storedOlder(key, parseStored(key, object.body, z.unknown()));
  if (stored.record !== older.record || stored.before_seq !== older.before_seq)
    throw new CorruptObjectError(key, `holds the entries before seq ${stored.before_seq} of record ${stored.record}`);
  const { repeated_older: _older, ...whole } = aggregates;
  // The older entries, overridden by the view's (newer repeats of their keys).
  return { ...whole, repeated: stored.repeated.with(aggregates.repeated.entries()) };
}

/** The object as written (its map checked in one pass, as a view's), else as the schema gives it. */
function storedOlder(key: string, value: unknown): Omit<OlderRepeated, 'repeated'> & { repeated: RepeatedCalls } {
  const candidate = value as Partial<OlderRepeated> | null;
  const plain = RepeatedCalls.checked(candidate?.repeated);
  if (!plain) {
    const parsed = validateStored(key, value, olderRepeatedSchema);
    return { ...parsed, repeated: RepeatedCalls.of(parsed.repeated) };
  }
  const { repeated: _repeated, ...rest } = candidate as OlderRepeated;
  return { ...validateStored(key, { ...rest, repeated: {} }, olderRepeatedSchema), repeated: plain };
}

/**
 * The tail and aggregates of the view of `newest`: the tail `tailOf` builds for the `claimed`
 * aggregates, or, where their split `repeated` does not serve it (no overflow boundary, a
 * compacted context, a tail or boundary before the split), for `whole()`; the aggregates split
 * at the boundary's tool start or the tail's start, whichever is earlier (splitRepeated).
 */
export async function viewAggregates<Tail extends { from_seq: number } | null>(
  log: LogContext,
  scope: LogScope,
  newest: NonNullable<Head['newest']>,
  claimed: HistoryAggregates,
  whole: () => Promise<HistoryAggregates>,
  tailOf: (aggregates: HistoryAggregates) => Promise<Tail>,
): Promise<{ tail: Tail; aggregates: HistoryAggregates }> {
  const boundary = contextOf(newest) ? null : overflowOf(newest);
  const record = newest.record.record;
  let aggregates = claimed;
  let tail = await tailOf(aggregates);
  if (!servesRead(aggregates, boundary?.tool_start_seq ?? null, tail?.from_seq ?? 1)) {
    aggregates = await whole();
    tail = await tailOf(aggregates);
  }
  const split = boundary && tail ? Math.min(boundary.tool_start_seq, tail.from_seq) : 0;
  return { tail, aggregates: await splitRepeated(log, scope, aggregates, split, record, whole) };
}

/**
 * The aggregates the view of record `record` stores, split at `split` (0: not split) where its
 * older entries are worth an object: `aggregates` as they are when they are split at or before
 * `split` and fewer than SPLIT_BYTES have gathered in front of it; else `whole()` split again
 * (its older entries written first), or whole when they are few.
 */
async function splitRepeated(
  log: LogContext,
  scope: LogScope,
  aggregates: HistoryAggregates,
  split: number,
  record: number,
  whole: () => Promise<HistoryAggregates>,
): Promise<HistoryAggregates> {
  const older = aggregates.repeated_older;
  if (older && split >= older.before_seq && bytesBefore(aggregates.repeated, split) < SPLIT_BYTES) return aggregates;
  const full = older ? await whole() : aggregates;
  if (split <= 1 || bytesBefore(full.repeated, split) < SPLIT_BYTES) return full;
  const before: Record<string, number> = {};
  const kept: Record<string, number> = {};
  for (const [key, seq] of full.repeated.entries()) (seq < split ? before : kept)[key] = seq;
  const key = olderRepeatedKey(scope, record, split);
  const stored: OlderRepeated = { format: 'tailgate.repeated.v1', record, before_seq: split, repeated: before };
  // Its content is a function of its key (the history up to the record, split at the seq): a
  // writer of the same view that came first stored the same.
  await log.store.put(key, JSON.stringify(stored), { onlyIfAbsent: true, contentType: 'application/json' });
  const { tool_calls, tool_outputs, repeat_flags, images, image_order } = full;
  // In the schema's order, as a read of the view checks it (lib/session/view-check.ts).
  return {
    tool_calls,
    tool_outputs,
    repeat_flags,
    repeated: RepeatedCalls.of(kept),
    images,
    image_order,
    repeated_older: { before_seq: split, record },
  };
}

/**
 * Deletes the older entries of `repeated` that view `before` named and its successor `after`
 * does not, once `after` is stored (a reader of `before` that meets them gone reads the log).
 */
export async function dropOlderRepeated(
  log: LogContext,
  scope: LogScope,
  before: LogView | null,
  after: LogView,
): Promise<void> {
  const key = before ? olderRepeatedKeyOf(scope, before.aggregates) : undefined;
  if (key !== undefined && key !== olderRepeatedKeyOf(scope, after.aggregates)) await log.store.delete([key]);
}

/** About the JSON bytes of the entries of `repeated` with a seq before `split`. */
function bytesBefore(repeated: RepeatedCalls, split: number): number {
  let bytes = 0;
  for (const [key, seq] of repeated.entries()) if (seq < split) bytes += key.length + String(seq).length + 4;
  return bytes;
}

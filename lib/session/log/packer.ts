import { blobKey, doneKey, recordKey, recordsPrefix, segmentKey, type LogScope } from '../keys.ts';
import { mapLimit } from '../../store/object-store.ts';
import { externalizePayloads } from '../payloads.ts';
import type { DoneRecord, LogItem, LogRecord } from '../records.ts';
import type { SegmentTurn } from '../segment-records.ts';
import { SegmentMissingError, SegmentReader, segmentParts, segmentSeqs, type SegmentContent } from '../segment.ts';
import { stateOf } from '../segment-states.ts';
import { UnitCursor, type LogUnit } from '../unit-cursor.ts';
import { PARALLEL_GETS, type LogContext } from './context.ts';
import { readConfig, readRecord, RecordMissingError, scopeOf, withFreshListing } from './head.ts';
import type { PackOptions, PackResult } from './types.ts';
import { writeViewIfDue } from './view-writer.ts';
import { isBackgroundRecord, isJournaledRecord } from './turns.ts';

/** Packing: closed records older than the newest few go into immutable segments, after a view when one is due. */

/** A segment carries the messages of the history before it up to this size (JSON). */
const CARRY_BYTES = 64 * 1024;

/** See SessionLog.pack. */
export async function pack(log: LogContext, sessionId: string, options: PackOptions = {}): Promise<PackResult> {
  if (options.config && options.config.id !== sessionId)
    throw new Error(`pack of ${sessionId} given the config of ${options.config.id}`);
  const scope = scopeOf(log.keyPrefix, options.config ?? (await readConfig(log, sessionId)).config);
  // An append's overdue view is of the incarnation it wrote to. Since then the session may have
  // been deleted and created again (or given a new generation): its held items are then of
  // another history, and this is a pack as any other.
  const { overdue, ...rest } = options;
  if (overdue && overdue.generation !== scope.generation) return packScope(log, scope, rest);
  return packScope(log, scope, options, overdue?.held);
}

/**
 * `pack` of one incarnation, named by its scope (an import packs before its config exists,
 * and passes the items it wrote since its last view as `held`: see readBase).
 */
export async function packScope(
  log: LogContext,
  scope: LogScope,
  options: PackOptions = {},
  held: readonly LogItem[] = [],
): Promise<PackResult> {
  let listing: UnitCursor | undefined;
  const view = await withFreshListing(() =>
    writeViewIfDue(log, scope, options, held, undefined, (listed) => {
      listing = listed;
    }),
  );
  // An append waits for this pack: its view is all it needs (the read budget of a cold turn), and
  // the view it made stale goes now, found by the listing the view was written from (read on to
  // it when needed): the next pack may never run (the process ended), and one of another process
  // lists only down to the newest segment. Packing the records and the other deletes are the
  // next pack's (`sweep`).
  if (options.overdue?.viewOnly) {
    const deleted = view ? await deleteStaleViews(log, view.key, view.listing) : 0;
    return withView({ packed: false, deleted, generation: scope.generation, unswept: true }, view);
  }
  // With a new view, what it covers is packed now, however little: only the records after
  // the view are carried by the next ones, so the older ones should not stay loose. (Not
  // for an append waiting on its overdue view: the background packs and the debt bound do.)
  const packMinRecords = view && !options.overdue ? 1 : log.packMinRecords;
  const prefix = recordsPrefix(scope);
  // A page of 100, as the head's readers list: what precedes the newest segment is the pack
  // debt (at most MAX_PACK_DEBT_RECORDS records, a few keys each), and a page of 1000 would
  // have a store read that many keys' details (the file store: a stat each) for every pack.
  // With no view due, the page that told so is this listing's first (the same list call, made a
  // moment before, nothing written since by this pack): it is not listed again.
  const firstPage = view === null ? listing?.firstListed : undefined;
  const cursor = new UnitCursor(log.store, prefix, { pageLimit: 100, ...(firstPage ? { firstPage } : {}) });
  const records: Extract<LogUnit, { kind: 'record' }>[] = [];
  let segment: Extract<LogUnit, { kind: 'segment' }> | null = null;
  for (let unit = await cursor.next(); unit; unit = await cursor.next()) {
    if (unit.kind === 'segment') {
      segment = unit;
      break;
    }
    records.push(unit);
  }
  // A new view makes the third newest stale, and a page of 100 may end before it (many records
  // between views): the listing goes on to it, so that no view is left behind for good.
  // (So does a pack after one that wrote its view only.)
  if (view || options.sweep) while (cursor.views.length < 3 && (await cursor.next()));
  // The newest view stays until a newer one is written, even once a segment covers its
  // record, and so does the one before it, for a reader whose listing came before the newest.
  // Older ones serve no reader: they go, whether a segment covers their record or not (a view
  // is as large as the prompt, so keeping each one would grow a session's storage with the
  // square of its length).
  const kept = new Set(cursor.views.slice(0, 2).map((listed) => listed.key));
  const stale = cursor.views.slice(2).map((listed) => listed.key);
  const leftovers = [...new Set([...cursor.leftovers, ...stale])].filter((key) => !kept.has(key));
  const buried = [...cursor.buried];
  const candidates = records.slice(log.keepRecords).reverse();
  let result: PackResult = { packed: false, deleted: 0 };
  if (candidates.length >= packMinRecords) {
    try {
      result = await packRecords(log, scope, candidates, segment, packMinRecords);
    } catch (error) {
      if (!(error instanceof SegmentMissingError || error instanceof RecordMissingError)) throw error;
    }
  }
  if (result.through === undefined && segment) result = { ...result, through: segment.lastRecord };
  if (leftovers.length > 0) {
    await log.store.delete(leftovers);
    result = { ...result, deleted: result.deleted + leftovers.length };
  }
  if (buried.length > 0) {
    await bury(log, buried);
    result = { ...result, deleted: result.deleted + buried.length };
  }
  return withView({ ...result, generation: scope.generation }, view);
}

/**
 * Deletes the views older than the newest two once `written` is stored, as `listing` (of the
 * log before it) finds them: every view it lists but its newest, read on to the second.
 */
async function deleteStaleViews(log: LogContext, written: string, listing: UnitCursor): Promise<number> {
  while (listing.views.length < 2 && (await listing.next()));
  const stale = listing.views.slice(1).flatMap(({ key }) => (key === written ? [] : [key]));
  if (stale.length > 0) await log.store.delete(stale);
  return stale.length;
}

/** `result` with the view the pack wrote (or found written), if any. */
function withView(result: PackResult, view: Awaited<ReturnType<typeof writeViewIfDue>>): PackResult {
  if (!view) return result;
  return view.view
    ? { ...result, view: view.key, written: view.view, writtenBytes: view.bytes! }
    : { ...result, view: view.key };
}

async function packRecords(
  log: LogContext,
  scope: LogScope,
  candidates: Extract<LogUnit, { kind: 'record' }>[],
  segment: Extract<LogUnit, { kind: 'segment' }> | null,
  packMinRecords: number,
): Promise<PackResult> {
  const read = await mapLimit(candidates, PARALLEL_GETS, (unit) => readRecord(log, unit));
  // Stop before the first turn that is still open: only closed records are packed.
  const openAt = read.findIndex(({ record, done }) => record.kind === 'turn' && !done);
  const closed = openAt < 0 ? read : read.slice(0, openAt);
  if (closed.length < packMinRecords) return { packed: false, deleted: 0 };
  const sizes = closed.map(({ record, done }) => itemsBytes([...record.items, ...(done?.items ?? [])]));
  // A segment absorbs the next records only while the first of them fits: one a pack closed
  // because that record did not fit is not read and written again.
  const merge =
    segment && segment.lastRecord === closed[0]!.record.record - 1 && segment.size + sizes[0]! <= log.segmentTargetBytes
      ? segment
      : null;
  // A v2 segment is extended as it is (its lines copied); a v1 one, which has no states, is read whole.
  const reader = merge && new SegmentReader(log.store, merge.key, merge);
  const base = reader ? await reader.base() : null;
  let content: SegmentContent =
    reader && !base
      ? await reader.content()
      : {
          firstRecord: base?.index.first_record ?? closed[0]!.record.record,
          lastRecord: 0,
          items: [],
          turns: [],
          carried: base ? base.carried : await carriedBefore(log, segment, closed[0]!.record.record),
          states: [],
          ...(base ? { base } : {}),
        };
  content = {
    ...content,
    items: [...content.items],
    turns: [...content.turns],
    states: content.states && [...content.states],
  };
  // Segments of at most about segmentTargetBytes with what they carry (plus one record): a backlog becomes several
  // segments, each stored and its records buried before the next is built, so a pack that
  // fails part-way leaves what it stored for the next one to go on from.
  let bytes = merge ? merge.size : carriedBytes(content);
  let firstSeq = closed[0]!.record.first_seq;
  let chunk: { index: number; record: LogRecord; done: DoneRecord | null }[] = [];
  let replaced = merge ? [merge.key] : [];
  const result = { packed: true, segment: '', records: closed.length, deleted: 0, through: 0 };
  const flush = async () => {
    result.segment = await writeSegment(log, scope, content, firstSeq);
    result.through = content.lastRecord;
    const leases = chunk.flatMap(({ index }) => candidates[index]!.leaseKey ?? []);
    result.deleted += await retire(log, scope, chunk, [...leases, ...replaced]);
    replaced = [];
    firstSeq = segmentSeqs(content, firstSeq).lastSeq + 1;
    const messages = [...(content.base?.messages ?? []), ...content.items.filter((item) => item.type === 'message')];
    const next = content.lastRecord + 1;
    content = {
      firstRecord: next,
      lastRecord: 0,
      items: [],
      turns: [],
      carried: carryAfter(content.carried, messages),
      states: [],
    };
    bytes = carriedBytes(content);
    chunk = [];
  };
  for (const [index, { record, done }] of closed.entries()) {
    const size = sizes[index]!;
    if (chunk.length > 0 && bytes + size > log.segmentTargetBytes) await flush();
    content.items.push(...record.items, ...(done?.items ?? []));
    content.states?.push(stateOf(record, done));
    if (record.kind === 'turn' && done) content.turns.push(segmentTurnOf(record, done));
    content.lastRecord = record.record;
    chunk.push({ index, record, done });
    bytes += size;
  }
  await flush();
  return result;
}

/**
 * After their segment landed: `chunk`'s records and completions become tombstones (their keys
 * stay taken, see `bury`), and `obsolete` (their leases, a segment merged in) goes. Returns the
 * number of objects retired.
 */
async function retire(
  log: LogContext,
  scope: LogScope,
  chunk: readonly { record: LogRecord; done: DoneRecord | null }[],
  obsolete: string[],
): Promise<number> {
  const packed = chunk.flatMap(({ record, done }) =>
    done ? [recordKey(scope, record.record), doneKey(scope, record.record)] : [recordKey(scope, record.record)],
  );
  await bury(log, packed);
  if (obsolete.length > 0) await log.store.delete(obsolete);
  return packed.length + obsolete.length;
}

/**
 * Writes a segment (create-only) of `content`, whose records hold their outputs inline: the
 * segment keeps the large ones out of line (`blob/`). `firstSeq` names an empty one's range.
 * Returns its key.
 */
export async function writeSegment(
  log: LogContext,
  scope: LogScope,
  content: SegmentContent,
  firstSeq: number,
): Promise<string> {
  const items = await externalizePayloads(
    log.store,
    content.items,
    log.blobThreshold,
    (sha) => blobKey(scope, sha),
    new Set(),
    content.lines,
  );
  const key = segmentKey(scope, {
    firstRecord: content.firstRecord,
    lastRecord: content.lastRecord,
    ...segmentSeqs({ ...content, items }, firstSeq),
  });
  // An item moved out of line is not the one its line (if any) was of.
  const lines = content.lines?.map((line, index) => (items[index] === content.items[index] ? line : undefined));
  await log.store.put(key, segmentParts({ ...content, items, ...(lines ? { lines } : {}) }, firstSeq), {
    onlyIfAbsent: true,
    contentType: 'application/x-ndjson',
  });
  return key;
}

/**
 * Replaces packed records and completions with empty objects instead of deleting them: a
 * create-only put is a fence only while its key exists, so a writer that read the log before
 * the packing (and stalled) would otherwise create a packed record number again and have its
 * input acknowledged but never read. Readers skip empty records and completions (listings
 * show their size), and the segment covering them is read instead.
 */
async function bury(log: LogContext, keys: readonly string[]): Promise<void> {
  await mapLimit(keys, PARALLEL_GETS, (key) => log.store.put(key, ''));
}

/**
 * The messages a new segment starting at `firstRecord` carries: all messages before it,
 * taken from the previous segment (its carried ones plus its own), within CARRY_BYTES.
 */
async function carriedBefore(
  log: LogContext,
  previous: Extract<LogUnit, { kind: 'segment' }> | null,
  firstRecord: number,
): Promise<LogItem[] | null> {
  if (!previous) return firstRecord === 1 ? [] : null;
  if (previous.lastRecord !== firstRecord - 1) return null;
  const reader = new SegmentReader(log.store, previous.key, previous, 8 * 1024);
  return carryAfter(await reader.carriedMessages(), await reader.messages());
}

/**
 * What the segment after one that carries `carried` and holds `messages` carries: all of
 * them, within CARRY_BYTES (null: too large, or the messages before are not all known).
 */
export function carryAfter(carried: readonly LogItem[] | null, messages: readonly LogItem[]): LogItem[] | null {
  if (carried === null) return null;
  const all = [...carried, ...messages];
  return JSON.stringify(all).length <= CARRY_BYTES ? all : null;
}

function carriedBytes(content: SegmentContent): number {
  return content.carried ? itemsBytes(content.carried) : 0;
}

/** About the bytes `items` take in a segment (one JSON line each). */
function itemsBytes(items: readonly LogItem[]): number {
  return items.reduce((sum, item) => sum + JSON.stringify(item).length + 1, 0);
}

/** A closed turn's line in a segment (also what a flattened history writes, ./flatten.ts). */
export function segmentTurnOf(record: LogRecord, done: DoneRecord): SegmentTurn {
  const receipt = packedReceipt(done, isBackgroundRecord(record));
  return {
    record: record.record,
    turn: record.turn ?? 0,
    status: done.status,
    ...(record.idempotency_key_sha256 ? { idempotency_key_sha256: record.idempotency_key_sha256 } : {}),
    ...(done.response !== undefined ? { response: done.response } : {}),
    ...(done.error ? { error: done.error } : {}),
    started_at: record.created_at,
    completed_at: done.completed_at,
    first_seq: record.first_seq,
    input_count: record.items.length,
    output_count: done.items.length,
    ...(receipt !== undefined ? { receipt } : {}),
    ...(isJournaledRecord(record) ? { journaled: true as const } : {}),
  };
}

/**
 * The receipt a turn's segment line keeps: its completion's, with, for a turn not completed or
 * one carrying notices on, `undelivered`: the `stored_as` of the notices it carries on (its
 * `undelivered.notices`), which a background turn's stopped run reads once the completion is
 * packed (./closer-notices.ts), and `background` for a `background` turn's (its record said so:
 * the receipts API shows it). In the receipt, which readers parse leniently (./receipt-schema.ts
 * drops `undelivered`), not a field of the line, which older code refuses.
 */
function packedReceipt(done: DoneRecord, background: boolean): unknown {
  const undelivered = done.undelivered?.notices.map((notice) => notice.stored_as) ?? [];
  const receipt = typeof done.receipt === 'object' && done.receipt !== null ? done.receipt : {};
  const ran = background ? { background: true } : {};
  if (done.status === 'completed' && undelivered.length === 0)
    return background ? { ...receipt, ...ran } : done.receipt;
  return { ...receipt, undelivered, ...ran };
}

import { lowerBound } from '../../sorted.ts';
import { CorruptObjectError, NotFoundError } from '../../errors.ts';
import type { ListResult, StoredObject } from '../../store/object-store.ts';
import { recordsListPrefix, sessionConfigKey, type LogScope } from '../keys.ts';
import {
  doneSchema,
  NOTHING_UNDELIVERED,
  parseStored,
  sessionConfigSchema,
  type ContextStart,
  type DoneRecord,
  type LogItem,
  type LogRecord,
  type OverflowBoundary,
  type SessionConfig,
  type SessionCounts,
  type Undelivered,
} from '../records.ts';
import { storedRecord } from '../record-check.ts';
import { SegmentMissingError, SegmentReader } from '../segment.ts';
import { logCursor, type UnitCursor, type LogUnit } from '../unit-cursor.ts';
import type { LogContext } from './context.ts';
import { EMPTY_LEDGER, type Ledger } from '../../ledger/usage.ts';

/**
 * The head of a session log: its config and its newest record, read with one listing, and the
 * reads every other part shares (a record with its completion, a segment's seq range), retried
 * with a fresh listing when a packer removed what was listed.
 */

/** The first page of a head read's listing (readHead). */
const HEAD_PAGE = 5;

/** A read that finds listed objects gone is tried this many times more, each with a fresh listing. */
const MAX_LISTING_RETRIES = 4;

/** No notices waiting for a model. */
export { NOTHING_UNDELIVERED };

export interface Head {
  config: SessionConfig;
  scope: LogScope;
  /**
   * The newest record and its completion, or null for a log without records; `key`: the record's
   * (it may be an earlier generation's: a session a delete of its newest turn took back).
   */
  newest: { record: LogRecord; done: DoneRecord | null; key?: string } | null;
  /** The listing the newest record was found with, positioned after it. */
  cursor: UnitCursor;
  /** The etag of the config as read (readHead): a write of it if-match (log/owed-charges.ts). */
  configEtag?: string;
}

/**
 * The config and the newest record (with its completion). The first listing page is
 * requested together with the config: it lists every generation's records, the newest
 * generation first, and the config then says which one is the session's. A first page of
 * HEAD_PAGE holds the newest record, its completion and lease, the next record's key (where
 * the newest one's keys end), and the queue's signal listed before them (keys.ts queueSignalKey);
 * charges list before them too (keys.ts chargeKey), and while a few wait the listing goes on.
 */
export async function readHead(
  log: LogContext,
  id: string,
  pageLimit = HEAD_PAGE,
  alongside?: Alongside,
): Promise<Head> {
  const listPrefix = recordsListPrefix(log.keyPrefix, id);
  const firstPage = log.store.list(listPrefix, { limit: pageLimit });
  // Settled either way, so a missing session does not leave the listing's failure unhandled.
  firstPage.catch(() => undefined);
  const { config, info } = await readConfig(log, id);
  const scope = scopeOf(log.keyPrefix, config);
  const newest = await readNewest(log, scope, pageLimit, { listPrefix, firstPage }, alongside);
  return { config, scope, ...newest, configEtag: info.etag };
}

/**
 * Started once the listing has named the newest record (`newest`: its number, 0 for none),
 * in the same round trip as the read of that record: reads that depend only on the listing.
 */
export type Alongside = (scope: LogScope, cursor: UnitCursor, newest: number) => void;

export async function readNewest(
  log: LogContext,
  scope: LogScope,
  pageLimit = HEAD_PAGE,
  prefetched?: { listPrefix: string; firstPage: Promise<ListResult> },
  alongside?: Alongside,
): Promise<Omit<Head, 'config' | 'scope'>> {
  let first = prefetched;
  return withFreshListing(async () => {
    // A retry lists again.
    const cursor = logCursor(log.store, scope, { pageLimit, ...(first ?? {}) });
    first = undefined;
    const unit = await cursor.next();
    alongside?.(scope, cursor, unit?.kind === 'record' ? unit.record : 0);
    if (!unit) return { newest: null, cursor };
    if (unit.kind === 'segment')
      throw new CorruptObjectError(unit.key, 'the newest record is packed; the log lost its head');
    return { newest: { ...(await readRecord(log, unit)), key: unit.key }, cursor };
  });
}

export async function readConfig(log: LogContext, id: string): Promise<{ config: SessionConfig; info: StoredObject }> {
  const key = sessionConfigKey(log.keyPrefix, id);
  const object = await log.store.get(key);
  if (!object) throw new NotFoundError(`session ${id} not found`, { id });
  const config = parseStored(key, object.body, sessionConfigSchema);
  if (config.id !== id) throw new CorruptObjectError(key, `holds session ${config.id}`);
  log.checkConfig?.(config);
  return { config, info: object };
}

export async function readRecord(
  log: LogContext,
  unit: Extract<LogUnit, { kind: 'record' }>,
): Promise<{ record: LogRecord; done: DoneRecord | null }> {
  // Listed with the etag and size of a record kept: the listed object holds its bytes, no get.
  // A kept record is shared with every other read of its bytes, so it is frozen; the readers take
  // a LogRecord, and past here only the freezing keeps them from changing it (log/record-cache.ts).
  let record = (unit.listed && log.recordCache?.recallListed(unit.key, unit.listed)) as LogRecord | undefined;
  const [recordObject, doneObject] = await Promise.all([
    record ? null : log.store.get(unit.key),
    unit.doneKey ? log.store.get(unit.doneKey) : Promise.resolve(null),
  ]);
  if (!record) {
    // Gone or buried (an empty object) since the listing: the packer moved it into a segment.
    if (!recordObject || recordObject.body.length === 0) throw new RecordMissingError(unit.key);
    record = log.recordCache?.recall(unit.key, recordObject.body, recordObject) as LogRecord | undefined;
    if (!record) {
      record = storedRecord(unit.key, recordObject.body);
      log.recordCache?.remember(unit.key, recordObject.body, record, recordObject.etag);
    }
  }
  if (record.record !== unit.record) throw new CorruptObjectError(unit.key, `holds record ${record.record}`);
  checkDense(unit.key, record.items, record.first_seq);
  let done: DoneRecord | null = null;
  if (unit.doneKey) {
    if (!doneObject || doneObject.body.length === 0) throw new RecordMissingError(unit.doneKey);
    done = parseStored(unit.doneKey, doneObject.body, doneSchema);
    if (done.record !== unit.record) throw new CorruptObjectError(unit.doneKey, `completes record ${done.record}`);
    checkDense(unit.doneKey, done.items, record.first_seq + record.items.length);
  }
  return { record, done };
}

/** Items of a segment with seq in [low, high], in seq order. */
export async function segmentRange(
  log: LogContext,
  unit: Extract<LogUnit, { kind: 'segment' }>,
  low: number,
  high: number,
): Promise<LogItem[]> {
  const reader = new SegmentReader(log.store, unit.key, unit);
  const index = await reader.index();
  const seqs = await reader.toolSeqs();
  const from = lowerBound(seqs, low);
  const to = lowerBound(seqs, high + 1);
  const [messages, tools] = await Promise.all([reader.messages(), reader.tools(from, to, high === index.last_seq)]);
  const items = [...messages.filter((item) => item.seq >= low && item.seq <= high), ...tools].sort(
    (a, b) => a.seq - b.seq,
  );
  checkDense(unit.key, items, low);
  if (items.length !== high - low + 1) throw new CorruptObjectError(unit.key, 'segment does not hold its seq range');
  return items;
}

/** Runs a read again with a fresh listing when a listed object vanished (a packer ran). */
export async function withFreshListing<Result>(read: () => Promise<Result>): Promise<Result> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await read();
    } catch (error) {
      if (
        attempt >= MAX_LISTING_RETRIES ||
        !(error instanceof SegmentMissingError || error instanceof RecordMissingError)
      ) {
        if (error instanceof SegmentMissingError || error instanceof RecordMissingError) {
          throw new CorruptObjectError(error.key, 'listed but missing on every read');
        }
        throw error;
      }
    }
  }
}

/** A record listed a moment ago is gone (packed meanwhile): list again. */
export class RecordMissingError extends Error {
  readonly key: string;
  constructor(key: string) {
    super(`record ${key} disappeared`);
    this.name = 'RecordMissingError';
    this.key = key;
  }
}

/** The records the newest record carries, then its own items (with its completion's), oldest first. */
export function recordGroups(newest: { record: LogRecord; done: DoneRecord | null }): NonNullable<LogRecord['recent']> {
  // With a completion, its flags (of the record's calls and its own) or none.
  const repeats = newest.done ? newest.done.repeats : newest.record.repeats;
  return [
    ...(newest.record.recent ?? []),
    {
      record: newest.record.record,
      // The record's own array when it is all (a carry and the repeat flags key their caches by it).
      items: newest.done ? [...newest.record.items, ...newest.done.items] : newest.record.items,
      ...(repeats ? { repeats } : {}),
    },
  ];
}

/** The items the newest record carries and its own, in seq order. */
export function carriedItems(newest: NonNullable<Head['newest']>): LogItem[] {
  return recordGroups(newest).flatMap((group) => group.items);
}

export function contextOf(newest: Head['newest']): ContextStart | null {
  if (!newest) return null;
  return newest.done?.context ?? newest.record.context ?? null;
}

/** The overflow boundary as of the newest record (a completion that moved it decides). */
export function overflowOf(newest: Head['newest']): OverflowBoundary | null {
  if (!newest) return null;
  return newest.done?.overflow ?? newest.record.overflow ?? null;
}

/** The usage totals as of the newest record (a completed turn's completion decides). */
export function ledgerOf(newest: Head['newest']): Ledger {
  if (!newest) return EMPTY_LEDGER;
  return newest.done?.ledger ?? newest.record.ledger ?? EMPTY_LEDGER;
}

export function countsOf(newest: Head['newest']): SessionCounts {
  if (!newest) return { items: 0, turns: 0, tool_calls: 0 };
  return newest.done?.counts ?? newest.record.counts;
}

/** The notices no model has seen yet, as of the newest record (its completion decides). */
export function undeliveredOf(newest: Head['newest']): Undelivered {
  if (!newest) return NOTHING_UNDELIVERED;
  return (newest.done ? newest.done.undelivered : newest.record.undelivered) ?? NOTHING_UNDELIVERED;
}

export function isEmpty(undelivered: Undelivered): boolean {
  return undelivered.notices.length === 0 && undelivered.lost_turns.length === 0;
}

export function scopeOf(keyPrefix: string, config: SessionConfig): LogScope {
  const scope = {
    keyPrefix,
    id: config.id,
    generation: config.generation ?? '',
    ...(config.rewound ? { rewound: config.rewound } : {}),
    ...(config.named ? { named: config.named } : {}),
    ...(config.incarnation ? { incarnation: config.incarnation } : {}),
    ...(config.queued_in ? { queuedIn: config.queued_in } : {}),
  };
  return config.fork_of ? { ...scope, ancestors: config.fork_of } : scope;
}

export function checkDense(key: string, items: readonly LogItem[], firstSeq: number): void {
  items.forEach((item, index) => {
    if (item.seq !== firstSeq + index)
      throw new CorruptObjectError(key, `seq ${item.seq} where ${firstSeq + index} was expected`);
  });
}

import { CorruptObjectError } from '../../errors.ts';
import { SessionDeletedError } from '../../session-deleted.ts';
import type { PromptItem } from '../../items.ts';
import { EXPORT_FORMAT, type ExportCompaction, type ExportHeader } from '../export-format.ts';
import { exportMedia } from '../attachments.ts';
import { recordsPrefix, type LogScope } from '../keys.ts';
import type { LogItem } from '../records.ts';
import { SegmentMissingError, SegmentReader } from '../segment.ts';
import { logCursor, unitTop, type LogUnit } from '../unit-cursor.ts';
import { sessionExists } from './config-object.ts';
import { PARALLEL_GETS, type LogContext } from './context.ts';
import { contextOf, countsOf, readHead, readRecord, RecordMissingError } from './head.ts';
import { shownTotals } from './charges.ts';
import { hydrate, payloadKey } from './item-pages.ts';
import { hasUsage } from '../../ledger/usage.ts';

/**
 * Exporting a session (lib/session/export-format.ts): the header, then every item oldest
 * first, one segment or record at a time, so memory holds one segment (at most about
 * `segmentTargetBytes` plus one merge) and a few hydrated payloads, whatever the length.
 */

/** Items hydrated (their out-of-line payloads fetched) and written at a time. */
const HYDRATE_BATCH = 16;
/** A walk that loses what it listed this many times in a row without progress gives up. */
const MAX_RELISTS = 4;

/**
 * The lines of the export of session `id` as of its newest record when the export began,
 * each ending in a newline, the delivered-notice records left to the caller (they belong
 * to the inbox). A missing session: NotFoundError before anything is yielded, and after the
 * header when the session is deleted (or deleted and created again) while its lines are read.
 */
export async function exportSession(
  log: LogContext,
  id: string,
): Promise<{ header: ExportHeader; lines: AsyncGenerator<string> }> {
  const head = await readHead(log, id);
  const { config, scope, newest } = head;
  // As a read shows it, with every charge no write counted yet (log/charges.ts): an import goes on from it.
  const ledger = await shownTotals(log, scope, head, true);
  const header: ExportHeader = {
    type: 'session',
    format: EXPORT_FORMAT,
    id: config.id,
    created_at: config.created_at,
    instructions: config.instructions,
    model: config.model,
    strategies: config.strategies,
    strategy_config: config.strategy_config as Record<string, number>,
    tools: config.tools,
    metadata: config.metadata,
    ...(config.expires_after_days !== undefined ? { expires_after_days: config.expires_after_days } : {}),
    ...(config.on_busy !== undefined ? { on_busy: config.on_busy } : {}),
    ...(config.budget !== undefined ? { budget: config.budget } : {}),
    ...(hasUsage(ledger) ? { ledger } : {}),
  };
  const context = contextOf(newest);
  const compaction: ExportCompaction | null = context
    ? {
        type: 'compaction',
        start_seq: context.start_seq,
        summary: context.summary,
        summarized: context.summarized,
        interrupted: context.interrupted,
        model: context.model,
        created_at: context.created_at,
      }
    : null;
  const lastSeq = countsOf(newest).items;
  async function* itemLines(): AsyncGenerator<string> {
    for await (const items of itemsInOrder(log, scope, lastSeq)) {
      for (let start = 0; start < items.length; start += HYDRATE_BATCH) {
        const hydrated = await hydrate(log, scope, items.slice(start, start + HYDRATE_BATCH));
        const batch = await exportMedia(log.store, hydrated, (sha256) => payloadKey(log, scope, sha256), PARALLEL_GETS);
        yield batch.map((item) => `${JSON.stringify(item)}\n`).join('');
      }
    }
  }
  async function* lines(): AsyncGenerator<string> {
    yield `${JSON.stringify(header)}\n`;
    try {
      yield* itemLines();
    } catch (error) {
      // A delete sweeping the session meanwhile leaves its log short: that is no corrupt log.
      if (error instanceof CorruptObjectError && !(await sessionExists(log, scope)))
        throw new SessionDeletedError(id, 'its export');
      throw error;
    }
    if (compaction) yield `${JSON.stringify(compaction)}\n`;
  }
  return { header, lines: lines() };
}

/**
 * Items 1..lastSeq in seq order, one unit (segment or record) at a time. A unit packed or
 * merged away since the listing makes the walk list again and go on from the next seq.
 */
async function* itemsInOrder(log: LogContext, scope: LogScope, lastSeq: number): AsyncGenerator<PromptItem[]> {
  let next = 1;
  let relists = 0;
  while (next <= lastSeq) {
    const units = await unitsOldestFirst(log, scope);
    const before = next;
    try {
      for (const unit of units) {
        if (next > lastSeq) break;
        const items = (await unitItems(log, unit)).filter((item) => item.seq >= next && item.seq <= lastSeq);
        if (items.length === 0) continue;
        if (items[0]!.seq !== next)
          throw new CorruptObjectError(unit.key, `starts at seq ${items[0]!.seq}, ${next} was expected`);
        next = items[items.length - 1]!.seq + 1;
        yield items;
      }
      if (next <= lastSeq) throw new CorruptObjectError(recordsPrefix(scope), `the log ends before seq ${next}`);
    } catch (error) {
      if (!(error instanceof SegmentMissingError || error instanceof RecordMissingError)) throw error;
      relists = next > before ? 0 : relists + 1;
      if (relists > MAX_RELISTS) throw new CorruptObjectError(error.key, 'listed but missing on every read');
    }
  }
}

/** Every unit of the log, oldest first (keys and ranges only: a few hundred bytes each). */
async function unitsOldestFirst(log: LogContext, scope: LogScope): Promise<LogUnit[]> {
  const cursor = logCursor(log.store, scope);
  const units: LogUnit[] = [];
  for (let unit = await cursor.next(); unit; unit = await cursor.next()) units.push(unit);
  return units.reverse();
}

async function unitItems(log: LogContext, unit: LogUnit): Promise<LogItem[]> {
  if (unit.kind === 'segment') {
    const top = unitTop(unit);
    return (await new SegmentReader(log.store, unit.key, unit).content()).items.filter((item) => item.seq <= top);
  }
  const { record, done } = await readRecord(log, unit);
  return [...record.items, ...(done?.items ?? [])];
}

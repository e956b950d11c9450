import type { DoneRecord, LogItem, LogRecord } from '../records.ts';
import type { LogContext } from './context.ts';
import { recordGroups } from './head.ts';
import { carried } from './record-cache.ts';

/**
 * The carry of a record (docs/STORAGE.md, `recent`): the whole records before it that a record
 * repeats, so a turn reads the newest record and the view and nothing between.
 */

/**
 * What the record after `newest` carries: whole records after the newest view listed
 * (`viewRecord`; a turn reads the view anyway), newest first, within budget. With a
 * compacted context (`floor`: its start), every record back to the context start within the
 * byte budget, however many: then a turn reads its whole context from the newest record.
 */
export function carry(
  log: LogContext,
  newest: { record: LogRecord; done: DoneRecord | null },
  floor: number | undefined,
  viewRecord: number,
): NonNullable<LogRecord['recent']> {
  const groups = recordGroups(newest).filter((group) => floor !== undefined || group.record > viewRecord);
  const kept: NonNullable<LogRecord['recent']> = [];
  let bytes = 0;
  let reachedFloor = false;
  const wanted = () =>
    floor === undefined ? kept.length < log.recentRecords : !reachedFloor || kept.length < log.recentRecords;
  for (let index = groups.length - 1; index >= 0 && wanted(); index--) {
    const first = groups[index]!.items[0];
    if (floor !== undefined && first !== undefined && first.seq <= floor) reachedFloor = true;
    bytes += carried(groups[index]!.items).length;
    if (bytes > log.recentBytes) break;
    kept.unshift(groups[index]!);
  }
  return kept;
}

/**
 * The items the record after `newest` would carry, as `prepareCommit` gives a claim its
 * `previous` (at least `newest`'s): what the prompt preview plans the next turn's compaction with.
 */
export function nextCarried(
  log: LogContext,
  newest: { record: LogRecord; done: DoneRecord | null },
  floor: number | undefined,
  views: readonly { record: number }[],
): LogItem[] {
  const recent = carry(log, newest, floor, views.find((view) => view.record <= newest.record.record)?.record ?? 0);
  return (recent.length > 0 ? recent : recordGroups(newest).slice(-1)).flatMap((group) => group.items);
}

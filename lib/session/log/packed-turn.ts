import { LEASE_EXPIRED, TURN_CANCELLED } from '../../errors.ts';
import { recordsPrefix, type LogScope } from '../keys.ts';
import { SegmentReader } from '../segment.ts';
import type { SegmentTurn } from '../segment-records.ts';
import { UnitCursor } from '../unit-cursor.ts';
import type { LogContext } from './context.ts';

/** The line of model turn record `number` in the segment that covers it (null: no segment has it). */
export async function packedTurn(log: LogContext, scope: LogScope, number: number): Promise<SegmentTurn | null> {
  const cursor = new UnitCursor(log.store, recordsPrefix(scope), { pageLimit: 100 });
  for (let unit = await cursor.next(); unit; unit = await cursor.next()) {
    if (unit.kind !== 'segment' || unit.firstRecord > number || unit.lastRecord < number) continue;
    return new SegmentReader(log.store, unit.key, unit).turn(number);
  }
  return null;
}

/**
 * How someone else closed a turn whose completion a pack buried since, as its segment line
 * `line` keeps the completion's error: a cancel's, or an `interrupt`'s (`turn_cancelled`, with
 * its `details.interrupted`), else `lease_expired`, the close of a lapsed lease (also for no
 * line: a line keeps no writer, and a segment written before lines kept errors tells none).
 */
export function packedCloser(line: SegmentTurn | null): { code: string; details?: unknown } {
  const error = line?.status === 'failed' ? line.error : undefined;
  if (error?.code !== TURN_CANCELLED) return { code: LEASE_EXPIRED };
  return error.details === undefined ? { code: error.code } : { code: error.code, details: error.details };
}

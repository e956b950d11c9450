import type { LogScope } from '../keys.ts';
import type { LogRecord } from '../records.ts';
import type { LogContext } from './context.ts';
import { leaseOf } from './lease.ts';

/**
 * Until when the newest record holds the session (ms; NaN: it does not): a delete of the newest
 * turn's fence (an empty append, log/rewind.ts) for its record's lease, a manual compaction's
 * claim (log/compaction-claim.ts) for its lease as renewed, but not for the claim's own writer, `heldBy`.
 */
export async function fenceOf(
  log: LogContext,
  scope: LogScope,
  newest: { record: LogRecord } | null,
  heldBy?: string,
): Promise<number> {
  const record = newest?.record;
  if (record?.kind === 'append') return Date.parse(record.lease_expires_at ?? '');
  if (record?.kind !== 'compact' || !record.lease_expires_at || record.writer === heldBy) return Number.NaN;
  return leaseOf(log, scope, record);
}

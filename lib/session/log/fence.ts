import { doneKey, recordKey, type LogScope } from '../keys.ts';
import type { DoneRecord, LogRecord } from '../records.ts';
import type { LogContext } from './context.ts';
import { readRecord, RecordMissingError } from './head.ts';
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

/**
 * The record right behind `newest` when that is a delete's fence whose lease ran out (the delete
 * cut short: its process died, or its store failed, once the fence landed, log/rewind.ts), with
 * its completion: the turn that delete was taking out, still the session's newest turn, an empty
 * record after it. Null when `newest` is no such fence, or that record is packed (a read of its
 * completion and of it, only then).
 */
export async function behindLapsedFence(
  log: LogContext,
  scope: LogScope,
  newest: { record: LogRecord } | null,
): Promise<{ record: LogRecord; done: DoneRecord | null } | null> {
  const fence = newest?.record;
  if (fence?.kind !== 'append' || fence.items.length > 0 || !fence.lease_expires_at || fence.record < 2) return null;
  if (Date.parse(fence.lease_expires_at) > log.clock().getTime()) return null;
  const record = fence.record - 1;
  const done = await log.store.get(doneKey(scope, record));
  const key = recordKey(scope, record);
  const unit = { kind: 'record' as const, record, key, doneKey: done ? doneKey(scope, record) : null };
  return readRecord(log, { ...unit, viewKey: null, leaseKey: null }).catch((error: unknown) => {
    if (error instanceof RecordMissingError) return null;
    throw error;
  });
}

/**
 * Whether `newest` is the fence of another delete of the newest turn (an empty append with a
 * lease; `ours`: the writers of the caller's own earlier fences), lapsed or not. A delete meeting
 * one counts in its own fence no charge that fence does not name (log/charges.ts withCharges):
 * the other delete's config may land instead of its own, with that fence's totals.
 */
export function otherFence(newest: { record: LogRecord } | null, ours: ReadonlySet<string>): boolean {
  const record = newest?.record;
  if (record?.kind !== 'append' || record.items.length > 0 || !record.lease_expires_at) return false;
  return record.writer === undefined || !ours.has(record.writer);
}

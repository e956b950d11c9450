import { TurnInProgressError } from '../../errors.ts';
import { leaseKey, type LogScope } from '../keys.ts';
import { leaseSchema, parseStored, type LogRecord } from '../records.ts';
import type { LogContext } from './context.ts';

/**
 * A busy 409 (`turn_in_progress`) names when the holder's lease runs out (`lease_expires_at`,
 * and the wait its Retry-After says, functions/error-handler.ts): a holder that died holds the
 * session until then, and a retry after it is not refused for it. Within the lease its record
 * took, the claim reads no renewal (log/lease.ts leaseOf), but the holder renews it beside its
 * record every third of it: one that died after renewing holds the session until the renewed
 * lease, later than its record's. Such a 409 reads the renewal only once it is the answer
 * (settleBusy, by the HTTP error handlers), not when a busy policy takes it (an `interrupt`, an
 * `enqueue`): one get more, for a refusal only.
 */

const renewals = new WeakMap<TurnInProgressError, () => Promise<number>>();

/**
 * The 409 of a session held by the open record `record` (a turn's, or a manual compaction's
 * claim) of `scope`, numbered `turn`, until `expires` (leaseOf): when that is its record's own
 * lease, its renewal is read when it is answered (settleBusy).
 */
export function heldError(
  log: LogContext,
  scope: LogScope,
  record: LogRecord,
  turn: number,
  expires: number,
): TurnInProgressError {
  const error = new TurnInProgressError(scope.id, turn, new Date(expires).toISOString());
  // A delete's fence (an append) is not renewed.
  const renewed = record.kind !== 'append' && expires === Date.parse(record.lease_expires_at ?? '');
  if (renewed) renewals.set(error, () => renewedLease(log, scope, record));
  return error;
}

/** `error` (a 409 turn_in_progress) reading its holder's renewal when answered (heldError), by `read` (ms). */
export function renewedWhenAnswered(error: TurnInProgressError, read: () => Promise<number | undefined>): void {
  renewals.set(error, async () => (await read()) ?? Number.NaN);
}

/**
 * Names, in `error`'s `details.lease_expires_at`, the renewed lease of its holder when it was
 * named from its record's own (heldError) and the renewal runs longer: before it is answered.
 * A read that fails leaves the lease named.
 */
export async function settleBusy(error: unknown): Promise<void> {
  const read = error instanceof TurnInProgressError ? renewals.get(error) : undefined;
  if (!read) return;
  renewals.delete(error as TurnInProgressError);
  const renewed = await read().catch(() => Number.NaN);
  const details = (error as TurnInProgressError).details as { lease_expires_at?: string };
  if (renewed > Date.parse(details.lease_expires_at ?? '')) details.lease_expires_at = new Date(renewed).toISOString();
}

/** When open record `record`'s lease runs out as renewed beside it (ms; its own when none is). */
export async function renewedLease(log: LogContext, scope: LogScope, record: LogRecord): Promise<number> {
  const claimed = Date.parse(record.lease_expires_at ?? '');
  const key = leaseKey(scope, record.record);
  const object = await log.store.get(key);
  if (!object) return claimed;
  const lease = parseStored(key, object.body, leaseSchema);
  return Math.max(claimed, Date.parse(lease.lease_expires_at));
}

import { hasUsage } from '../../ledger/usage.ts';
import type { ObjectInfo } from '../../store/object-store.ts';
import { recordKey, viewKey } from '../keys.ts';
import type { LogRecord } from '../records.ts';
import { stateOf } from '../segment-states.ts';
import type { LogContext } from './context.ts';
import { forkRecord } from './fork.ts';
import { isEmpty, ledgerOf, undeliveredOf, type Head } from './head.ts';
import { afterViewBytes, type OverdueAppend } from './pack-schedule.ts';
import { carried, recordBody } from './record-cache.ts';
import { unbilledOf } from './unbilled.ts';

/**
 * The record of no items after a large append (docs/STORAGE.md, **What a cold turn reads**).
 * An append whose items are more than afterViewBytes of the newest view packs with a view of
 * its record before it answers, so the view covers them; but its record stays the newest, and
 * a process new to the session (a cold turn, the next append's head read) would read its items
 * a second time, whole. Once that view is written, one more create-only record carrying the
 * state after the append (as a fork's first record and a delete's fence do: counts, context,
 * overflow, open calls, usage totals, notices; no lease, no items, no carry) becomes the newest:
 * those readers read the view and this small record. Nothing of the log's format changes; a
 * record of no items is one every reader passes over already. Refused (another writer took the
 * number: a newer record exists, which is all it wants) or failed, nothing is retried: the
 * append is committed before it, and without it the log reads as before.
 */

/**
 * Puts the record after the overdue append `record` (of `scope`) when `written`, the view this
 * process wrote last of the session, is that record's and its items are more than
 * afterViewBytes of it. True when it landed; a put that failed is told to `failed` (and
 * not retried: the append stands without it).
 */
export async function putStateAfter(
  log: LogContext,
  written: { key: string; bytes: number } | undefined,
  { record, scope }: Pick<OverdueAppend, 'record' | 'scope'>,
  failed?: (error: unknown) => void,
): Promise<boolean> {
  if (written?.key !== viewKey(scope, record.record)) return false;
  if (carried(record.items).length <= afterViewBytes(written.bytes)) return false;
  const next = withTotals(forkRecord(stateOf(record, null), log.clock().toISOString()), { record, done: null });
  const key = recordKey(scope, next.record);
  const body = recordBody(next);
  let put: ObjectInfo | null;
  try {
    put = await log.store.put(key, body, { onlyIfAbsent: true, contentType: 'application/json' });
  } catch (error) {
    failed?.(error);
    return false;
  }
  if (put === null) return false;
  log.recordCache?.remember(key, body, next, put.etag);
  return true;
}

/**
 * `record` with what the session's newest record carries on whatever follows it: the usage
 * totals (spent is spent), the turns whose spend they do not count yet (each naming its
 * generation, so a delete of the newest turn's next generation counts them too), the charges
 * they count (log/charges.ts) and the notices no model has seen yet.
 */
export function withTotals(record: LogRecord, newest: Head['newest']): LogRecord {
  const ledger = ledgerOf(newest);
  const undelivered = undeliveredOf(newest);
  const unbilled = unbilledOf(newest);
  const charged = newest?.record.charged;
  return {
    ...record,
    ...(hasUsage(ledger) ? { ledger } : {}),
    ...(isEmpty(undelivered) ? {} : { undelivered }),
    ...(unbilled.length > 0 ? { unbilled } : {}),
    ...(charged ? { charged } : {}),
  };
}

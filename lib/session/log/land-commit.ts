import { parseStored, recordSchema, type LogRecord } from '../records.ts';
import { backoff, type LogContext } from './context.ts';
import { recordBody } from './record-cache.ts';

/**
 * Puts a prepared record create-only: true when it landed (also when the answer was lost but
 * the key holds our record); false to read again (refused: after a backoff). A failed put
 * whose record is not there throws.
 */
export async function landCommit(
  log: LogContext,
  prepared: { key: string; record: LogRecord },
  /** The commit's state (commit.ts CommitState): its writer, and a failed put's error. */
  state: { writer: string; failure: { error: unknown } | null; attempt: number },
): Promise<boolean> {
  const { key, record } = prepared;
  const body = recordBody(record);
  try {
    const put = await log.store.put(key, body, { onlyIfAbsent: true, contentType: 'application/json' });
    if (put !== null) {
      log.recordCache?.remember(key, body, record, put.etag);
      return true;
    }
  } catch (error) {
    state.failure = { error };
  }
  // Refused or failed, the put may still have landed (a lost answer, an adapter's retry
  // meeting its own write): the key itself says whose record it is.
  const ours = await log.store.get(key).then(
    (object) =>
      object && object.body.length > 0 ? parseStored(key, object.body, recordSchema).writer === state.writer : false,
    () => undefined,
  );
  if (ours) {
    state.failure = null;
    return true;
  }
  if (state.failure) {
    // Not there: nothing was stored. Unknown: the next head read tells (prepareCommit).
    if (ours === false) throw state.failure.error;
    return false;
  }
  await backoff(state.attempt);
  return false;
}

import { idempotencyKey, type LogScope } from '../keys.ts';
import type { LogContext } from './context.ts';

/** `idem/<key hash>` -> the record of a keyed turn or append (create-only; a second write changes nothing). */
export async function indexKey(
  log: LogContext,
  scope: LogScope,
  keyHash: string,
  record: number,
  requestHash: string | undefined,
  /** A keyed append's: the seqs of its items. */
  appended?: { first_seq: number; last_seq: number },
): Promise<void> {
  const claim = {
    format: 'tailgate.idempotency.v1',
    record,
    ...(requestHash ? { request_sha256: requestHash } : {}),
    ...appended,
  };
  await log.store.put(idempotencyKey(scope, keyHash), JSON.stringify(claim), {
    onlyIfAbsent: true,
    contentType: 'application/json',
  });
}

import { idempotencyKey, type LogScope } from '../keys.ts';
import type { LogContext } from './context.ts';

/** `idem/<key hash>` -> the record of a keyed turn (create-only; a second write changes nothing). */
export async function indexKey(
  log: LogContext,
  scope: LogScope,
  keyHash: string,
  record: number,
  requestHash: string | undefined,
): Promise<void> {
  const claim = { format: 'tailgate.idempotency.v1', record, ...(requestHash ? { request_sha256: requestHash } : {}) };
  await log.store.put(idempotencyKey(scope, keyHash), JSON.stringify(claim), {
    onlyIfAbsent: true,
    contentType: 'application/json',
  });
}

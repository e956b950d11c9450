import { CorruptObjectError, IdempotencyKeyReusedError } from '../../errors.ts';
import type { StoredObject } from '../../store/object-store.ts';
import type { LogScope } from '../keys.ts';
import type { LogRecord } from '../records.ts';
import type { LogContext } from './context.ts';
import type { Head } from './head.ts';
import { findClaim } from './idempotency.ts';
import { indexKey } from './idempotency-index.ts';

/**
 * Keyed appends (POST .../items with an Idempotency-Key): the key goes on the append's record
 * (`idempotency_key_sha256`, `request_sha256`), as a keyed turn's does, and into `idem/<key
 * hash>` with the seqs of its items, written by the append once its record landed, before it
 * answers, and else by the next commit before its own record (indexAppend): a keyed record
 * older than the newest one is indexed, as a keyed turn is by its close. A retry reads the head,
 * then `idem/`, and replays the seqs instead of appending again.
 */

/** What a used key of an append answers: the seqs its items got. */
export interface AppendReplay {
  appended: { first_seq: number; last_seq: number };
}

/**
 * The seqs an append under `keyHash` stored already, or null when the key was not used: the
 * newest record carries the key, or `idem/` names an older record. The key of another request
 * (a turn's, another append's: the request hashes differ) is IdempotencyKeyReusedError.
 */
export async function findAppendKey(
  log: LogContext,
  scope: LogScope,
  newest: Head['newest'],
  keyHash: string,
  requestHash: string | undefined,
  /** The read of `idem/<key hash>`, started once the head's listing had answered. */
  prefetched?: Promise<StoredObject | null>,
): Promise<AppendReplay | null> {
  const record = newest?.record;
  if (record && record.idempotency_key_sha256 === keyHash) {
    if (record.kind !== 'append' || record.request_sha256 !== requestHash)
      throw new IdempotencyKeyReusedError(record.turn ?? 0);
    return { appended: seqsOf(record) };
  }
  const claimed = await findClaim(log, scope, keyHash, prefetched);
  if (!claimed) return null;
  const { claim, claimKey } = claimed;
  if (claim.request_sha256 !== requestHash) throw new IdempotencyKeyReusedError(0);
  if (claim.first_seq === undefined || claim.last_seq === undefined)
    throw new CorruptObjectError(claimKey, `names record ${claim.record}, which is not an append`);
  return { appended: { first_seq: claim.first_seq, last_seq: claim.last_seq } };
}

/**
 * `idem/` of the keyed append `record` (of `scope`), create-only: by the append before it
 * answers, and by the commit of the record after it (nothing for any other record), so the
 * key is indexed before it stops being the newest record's.
 */
export async function indexAppend(log: LogContext, scope: LogScope, record: LogRecord | undefined): Promise<void> {
  if (record?.kind !== 'append' || record.idempotency_key_sha256 === undefined) return;
  await indexKey(log, scope, record.idempotency_key_sha256, record.record, record.request_sha256, seqsOf(record));
}

function seqsOf(record: LogRecord): AppendReplay['appended'] {
  return { first_seq: record.first_seq, last_seq: record.first_seq + record.items.length - 1 };
}

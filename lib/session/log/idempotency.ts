import type { z } from 'zod';
import { CorruptObjectError, IdempotencyKeyReusedError, TurnInProgressError } from '../../errors.ts';
import type { StoredObject } from '../../store/object-store.ts';
import { ancestorScope, doneKey, idempotencyKey, RECORD_BOUND, recordKey, type LogScope } from '../keys.ts';
import { doneSchema, idempotencyClaimSchema, parseStored, recordSchema } from '../records.ts';
import type { LogContext } from './context.ts';
import { withFreshListing, type Head } from './head.ts';
import { closeIfExpired } from './lease.ts';
import { packedTurn } from './packed-turn.ts';
import { isBackgroundRecord } from './turns.ts';
import type { BeginTurnResult, StoredOutcome } from './types.ts';

/** Idempotency keys: the `idem/` index of keyed turns, and the stored outcome a used key replays. */

/**
 * The outcome of the turn a key was used for, or null when it was not used: the newest
 * record carries the key (open: TurnInProgressError while its lease runs), or `idem/` names
 * an older record. Another request under the same key: IdempotencyKeyReusedError.
 */
export async function findKey(
  log: LogContext,
  scope: LogScope,
  newest: Head['newest'],
  keyHash: string,
  requestHash: string | undefined,
  /** The read of `idem/<key hash>`, started once the head's listing had answered. */
  prefetched?: Promise<StoredObject | null>,
): Promise<Extract<BeginTurnResult, { kind: 'replay' }> | null> {
  let outcome: StoredOutcome;
  let turn: number;
  let outputSeq: number | undefined;
  if (newest && newest.record.idempotency_key_sha256 === keyHash) {
    turn = newest.record.turn ?? 0;
    outputSeq = newest.record.first_seq + newest.record.items.length;
    checkRequest(newest.record.request_sha256, requestHash, turn);
    outcome =
      newest.done ??
      (await closeIfExpired(log, scope, newest.record).catch((error: unknown) => {
        if (error instanceof TurnInProgressError) {
          error.ownKey = true;
          error.ownBackground = isBackgroundRecord(newest.record);
        }
        throw error;
      }));
  } else {
    const claimed = await findClaim(log, scope, keyHash, prefetched);
    if (!claimed) return null;
    const { claimKey, holder, claim } = claimed;
    // The key of an append (log/append-key.ts): another request.
    if (claim.first_seq !== undefined) throw new IdempotencyKeyReusedError(0);
    const { record: number, request_sha256: stored } = claim;
    const found = await withFreshListing(() => readOutcome(log, holder, number, claimKey, keyHash));
    checkRequest(stored, requestHash, found.turn);
    outcome = found;
    turn = found.turn;
    outputSeq = found.outputSeq;
  }
  return {
    kind: 'replay',
    turn,
    response: outcome.response ?? null,
    status: outcome.status,
    ...(outcome.error ? { error: outcome.error } : {}),
    // Stored with neither its response nor its error: the receipt names the model its replay names.
    ...(!outcome.error && outcome.response === undefined && outcome.receipt !== undefined
      ? { receipt: outcome.receipt }
      : {}),
    ...(outputSeq !== undefined ? { outputSeq } : {}),
  };
}

/**
 * The `idem/` claim of a key: in the session's own generation, else in a generation of the
 * same id that a delete of the newest turn went back from (`fork_of` entries naming the id,
 * lib/session/log/rewind.ts), for a turn up to the point it went back to: that turn is still
 * the session's, and a retry of it is replayed, not taken again.
 */
export async function findClaim(
  log: LogContext,
  scope: LogScope,
  keyHash: string,
  prefetched: Promise<StoredObject | null> | undefined,
): Promise<{
  claimKey: string;
  holder: LogScope;
  claim: z.infer<typeof idempotencyClaimSchema>;
} | null> {
  const own = (scope.ancestors ?? []).filter((point) => point.id === scope.id);
  const holders: { holder: LogScope; upTo: number }[] = [
    { holder: scope, upTo: Number.POSITIVE_INFINITY },
    ...own.map((point) => ({ holder: ancestorScope(scope.keyPrefix, point), upTo: point.record })),
  ];
  const claims = await Promise.all(
    holders.map(({ holder }, index) =>
      index === 0 && prefetched ? prefetched : log.store.get(idempotencyKey(holder, keyHash)),
    ),
  );
  for (const [index, object] of claims.entries()) {
    if (!object) continue;
    const { holder, upTo } = holders[index]!;
    const claimKey = idempotencyKey(holder, keyHash);
    const claim = parseStored(claimKey, object.body, idempotencyClaimSchema);
    if (claim.record <= upTo) return { claimKey, holder, claim };
  }
  return null;
}

/**
 * The stored outcome of model turn record `number`, from its completion or from its segment.
 * A record that is not the turn of this key (not a model turn, another key, a number past the
 * records') is a CorruptObjectError, read before anything is written.
 */
async function readOutcome(
  log: LogContext,
  scope: LogScope,
  number: number,
  claimKey: string,
  keyHash: string,
): Promise<StoredOutcome & { turn: number; outputSeq?: number | undefined }> {
  const notThisTurn = () => new CorruptObjectError(claimKey, `names record ${number}, which is not this key's turn`);
  if (number >= RECORD_BOUND) throw notThisTurn();
  const [recordObject, doneObject] = await Promise.all([
    log.store.get(recordKey(scope, number)),
    log.store.get(doneKey(scope, number)),
  ]);
  // An empty record or completion is a tombstone: the turn is in a segment. A pack buries both
  // at once, so one of them may be a tombstone while the other is not yet (or never, when the
  // pack stopped between them).
  const packed = recordObject?.body.length === 0 || doneObject?.body.length === 0;
  if (recordObject && !packed) {
    const record = parseStored(recordKey(scope, number), recordObject.body, recordSchema);
    if (record.turn === undefined || record.idempotency_key_sha256 !== keyHash) throw notThisTurn();
    const known = { turn: record.turn, outputSeq: record.first_seq + record.items.length };
    if (doneObject) return { ...parseStored(doneKey(scope, number), doneObject.body, doneSchema), ...known };
    return { ...(await closeIfExpired(log, scope, record)), ...known };
  }
  const turn = await packedTurn(log, scope, number);
  if (!turn) throw new CorruptObjectError(claimKey, `names turn record ${number}, which is missing`);
  if (turn.idempotency_key_sha256 !== undefined && turn.idempotency_key_sha256 !== keyHash) throw notThisTurn();
  const outputSeq =
    turn.first_seq !== undefined && turn.input_count !== undefined ? turn.first_seq + turn.input_count : undefined;
  return { ...turn, outputSeq };
}

/** A key reused with another request (both hashes known and different). */
function checkRequest(stored: string | undefined, requestHash: string | undefined, turn: number): void {
  if (stored && requestHash && stored !== requestHash) throw new IdempotencyKeyReusedError(turn);
}

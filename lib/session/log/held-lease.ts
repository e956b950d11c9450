import { LeaseHeldError, TurnNotOpenError } from '../../errors.ts';
import { putCreateOnlyInfo } from '../../store/create-only.ts';
import type { StoredObject } from '../../store/object-store.ts';
import { leaseKey } from '../keys.ts';
import { leaseSchema, parseStored } from '../records.ts';
import type { LogContext } from './context.ts';
import { closedBy, leaseWrite, renewalMs } from './lease.ts';
import type { OpenTurn, TakenLease } from './types.ts';

/**
 * A background turn's lease as its runner holds it: taken (over, from a runner gone quiet),
 * renewed if-match on the etag the runner last wrote, and given up for the turn's next runner.
 * The lease itself (its body, its renewal period) is log/lease.ts's.
 */

/**
 * Takes the lease of a background turn for the runner that took it over (its first `.lease`,
 * create-only). When another runner's is there and live, waits a renewal (a third of the lease
 * and a tenth more) and reads it again: renewed, its runner is alive and this is
 * TurnInProgressError; not renewed (or run out, or released by its runner), it is taken over
 * if-match, so of two late runners one has it (the other: TurnInProgressError). Answers the lease's etag, which its
 * renewals match (renewHeldLease), and whether another runner held it (and may have moved notices for the turn);
 * TurnNotOpenError when the turn taken over was closed by then (its runner completed it as its lease went unrenewed).
 */
export async function takeLease(log: LogContext, turn: OpenTurn): Promise<TakenLease> {
  const key = leaseKey(turn.scope, turn.record);
  const at = log.clock().getTime();
  const first = leaseWrite(log, turn);
  let found: StoredObject | null = null;
  const taken = await putCreateOnlyInfo(log.store, key, first.body, first.options, (object) => {
    found = object;
    return object.metadata.writer === turn.writer;
  });
  if (taken) return { etag: taken.etag, takenOver: false, at };
  const held = found as StoredObject | null;
  // Gone since the refusal: deleted with the closed turn (the packer) or the session.
  if (!held) throw new LeaseHeldError(turn.scope.id, turn.turn);
  const expires = expiryOf(key, held);
  const until = new Date(expires).toISOString();
  let { etag } = held;
  let heldExpiry = expires;
  // Given up by its runner (released, see releaseHeldLease) it is taken at once, live or not.
  if (expires > log.clock().getTime() && held.metadata.released === undefined) {
    // Live: its holder renews it within a third of the lease, if it is alive. A renewal changes
    // the etag (on S3 a hash of the body): its expiry is a later one. A release changes it too:
    // that lease, given up meanwhile, is taken over as one not renewed.
    await new Promise((resolve) => setTimeout(resolve, renewalMs(log.leaseMs) + Math.ceil(log.leaseMs / 10)));
    const now = await log.store.get(key);
    if (now?.etag !== etag && now?.metadata.released === undefined)
      throw new LeaseHeldError(turn.scope.id, turn.turn, until);
    if (now) [etag, heldExpiry] = [now.etag, expiryOf(key, now)];
  }
  // Run out, not renewed, or given up: this runner's, unless another late runner took it first.
  // Its expiry is past the one read, so the body differs: on S3 and R2 the etag is the body's
  // MD5, and a lease written as the one read (given up in the same millisecond) would keep it,
  // letting another late runner's if-match land too.
  const next = leaseWrite(log, turn, heldExpiry);
  const written = await log.store.put(key, next.body, { ...next.options, ifMatch: etag });
  if (!written) throw new LeaseHeldError(turn.scope.id, turn.turn, until);
  // Not renewed because its runner completed the turn meanwhile (a turn shorter than a renewal),
  // or closed by someone else: nothing is left to run, and no model is called for it.
  if ((await closedBy(log, turn)) !== null) throw new TurnNotOpenError(turn.scope.id, turn.turn);
  return { etag: written.etag, takenOver: true, at };
}

/** The ms a stored lease runs out at. */
function expiryOf(key: string, lease: StoredObject): number {
  return Date.parse(parseStored(key, lease.body, leaseSchema).lease_expires_at);
}

/**
 * Renews a lease taken with takeLease, if-match on `etag` (the lease as this runner last wrote
 * it): the new etag, or null when another runner took the lease over (or it is gone with the
 * closed turn). A refused or failed renewal reads the lease back: one still carrying the
 * runner's `writer` is its own (an answer lost).
 */
export async function renewHeldLease(log: LogContext, turn: OpenTurn, etag: string): Promise<string | null> {
  const key = leaseKey(turn.scope, turn.record);
  const { body, options } = leaseWrite(log, turn);
  const put = (ifMatch: string) => log.store.put(key, body, { ...options, ifMatch });
  let failed = false;
  try {
    const written = await put(etag);
    if (written) return written.etag;
  } catch {
    failed = true;
  }
  // Refused or failed: the lease is this runner's still when it carries its writer (this put,
  // its answer lost; or an earlier renewal whose answer was lost changed the etag).
  const found = await log.store.head(key);
  if (found?.metadata.writer !== turn.writer) return null;
  if (failed) return found.etag;
  return (await put(found.etag))?.etag ?? null;
}

/**
 * Whether the lease of `turn` still names its runner (its `writer`): false once another runner
 * of the turn took it over (or it was given up, or is gone with the closed turn). One head; none
 * when its runner set out to take it (`since`, TakenLease.at) less than a renewal ago and no
 * renewal of it came due since (the caller's to know): another runner takes a lease over only
 * once it ran out, or once it went a renewal and a tenth unrenewed (takeLease), so it is still
 * this runner's.
 */
export async function holdsLease(log: LogContext, turn: OpenTurn, since?: number): Promise<boolean> {
  if (since !== undefined && log.clock().getTime() - since < renewalMs(log.leaseMs)) return true;
  return (await log.store.head(leaseKey(turn.scope, turn.record)))?.metadata.writer === turn.writer;
}

/**
 * Gives up a lease taken with takeLease, its runner having stopped with the turn left open (for
 * a queue to deliver it again): a put if-match on `etag` of the lease a renewal would write, but
 * carrying `released` in place of `writer`, so the next runner takes it over at once (takeLease)
 * while anyone else finds it live as a renewal leaves it. Whether it landed; refused (a renewal
 * in flight landed first, or another runner has it), it runs out as it would.
 */
export async function releaseHeldLease(log: LogContext, turn: OpenTurn, etag: string): Promise<boolean> {
  const { body, options } = leaseWrite(log, turn);
  const released = { ...options, metadata: { released: turn.writer }, ifMatch: etag };
  return (await log.store.put(leaseKey(turn.scope, turn.record), body, released)) !== null;
}

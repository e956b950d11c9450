import { IdempotencyKeyReusedError, NotFoundError } from '../../errors.ts';
import { putJsonCreateOnly } from '../../store/create-only.ts';
import { idempotencyKey, queuedKey, queuedPrefix, queueSignalKey, type LogScope } from '../keys.ts';
import { idempotencyClaimSchema, parseStored, queuedInputSchema, type QueuedInput } from '../records.ts';
import { sessionScope } from './config-object.ts';
import { backoff, type LogContext } from './context.ts';
import { markQueue } from './queue-markers.ts';
import { takingFirst } from './queue-taking.ts';
import {
  QueuedInputTakenError,
  queuedSight,
  tombstoneCleared,
  withdrawQueued,
  type WithdrawSight,
} from './queue-withdraw.ts';

/**
 * Inputs queued while a turn ran (the busy policy `enqueue`, docs/STORAGE.md "Queued
 * inputs"): `queue/<g>/<key sha256>`, create-only, in the session's generation, so a delete
 * removes them. They are taken in the order the store received them (upload time; where the
 * store gives two one time, their `enqueued_at`; then key),
 * each claimed as a turn under its `key_sha256`, so one queued input is stored at most once
 * however many pickups race or die: a second claim under the key replays the first. A delete
 * of the newest turn names the generation it leaves in the config's `queued_in`, whose queue
 * is read with the session's own from then on (log/rewind.ts). Every enqueue marks the session
 * first (`queues/<id>`, log/queue-markers.ts), for the sweep that takes up queues nobody closed.
 */

/** A queued input as listed: its key hash, when the store received it, and the generation it is under. */
export interface QueuedEntry {
  keyHash: string;
  uploaded: Date;
  generation: string;
  /** Named as the one a pickup marks (log/queue-taking.ts): listed first, perhaps taken up already. */
  named?: boolean;
  /** Listed empty: a withdraw's tombstone (log/queue-withdraw.ts), no input. */
  withdrawn?: boolean;
}

/** What a caller queues; the log adds the format, the time and its writer id. */
export type NewQueuedInput = Omit<QueuedInput, 'format' | 'enqueued_at' | 'writer'>;

/** See SessionLog.enqueue. */
export async function enqueueInput(
  log: LogContext,
  id: string,
  input: NewQueuedInput,
  beforeEntry?: (scope: LogScope) => Promise<void>,
): Promise<{ queued_turn: string; position: number | null; replayed: boolean }> {
  const scope = await sessionScope(log, id);
  // The session's marker (log/queue-markers.ts) lands before the entry, with what it references.
  await Promise.all([beforeEntry?.(scope), markQueue(log, id)]);
  // A keyed input: its key may have run another request since the claim's reads found the session
  // busy (the turn before ended, and that request ran): refused now, as its pickup would drop it.
  if (input.request_sha256 !== undefined) await checkKeyClaim(log, scope, input.key_sha256, input.request_sha256);
  const writer = crypto.randomUUID();
  const entry: QueuedInput = {
    format: 'tailgate.queued.v1',
    ...input,
    enqueued_at: log.clock().toISOString(),
    writer,
  };
  const key = queuedKey(scope, input.key_sha256);
  // A withdraw's tombstone under the key (its Idempotency-Key's input withdrawn) is waited out.
  let written = false;
  try {
    for (let waits = 0; !written; waits++) {
      written = await putJsonCreateOnly(log.store, key, entry, `"writer":"${writer}"`);
      if (!written && !(await tombstoneCleared(log, scope, input.key_sha256, waits))) break;
    }
  } catch (error) {
    // A put whose answer was lost and whose read failed may have landed: an unkeyed entry is
    // withdrawn before the 503 (its retry queues it once), unless a pickup took it up (202), or
    // it stands and cannot be withdrawn (202, its signal raised if the store lets it).
    if (input.request_sha256 !== undefined) throw error;
    const putAgain = () =>
      log.store.put(key, JSON.stringify(entry), { onlyIfAbsent: true, contentType: 'application/json' });
    const position = await withdrawUnanswered(log, scope, input.key_sha256, error, null, putAgain);
    if (position !== 0) await retried(() => raiseSignal(log, scope, writer)).catch(() => undefined);
    return { queued_turn: input.key_sha256, position, replayed: false };
  }
  if (!written) {
    // The same Idempotency-Key queued an input already: its own request is answered again.
    const existing = await readQueued(log, scope, input.key_sha256);
    if (existing?.request_sha256 && input.request_sha256 && existing.request_sha256 !== input.request_sha256)
      throw new IdempotencyKeyReusedError(0, input.key_sha256);
  }
  // The queue's signal once the entry is there (also for an entry its key had queued: that
  // enqueue may have died before its own), before the 202: see raiseSignal. Each is tried again.
  const [listed, raised] = await Promise.allSettled([
    retried(async () => waitingPosition(log, scope, await listQueued(log, scope), input.key_sha256)),
    retried(() => raiseSignal(log, scope, writer)),
  ]);
  const position = listed.status === 'fulfilled' ? listed.value : null;
  if (raised.status === 'fulfilled' && position !== null)
    return { queued_turn: input.key_sha256, position, replayed: !written };
  const failure: unknown = raised.status === 'rejected' ? raised.reason : (listed as PromiseRejectedResult).reason;
  // A keyed input: a retry under its key finds the entry and queues nothing new, so the failure
  // is answered (503). Its entry is not withdrawn: a retry racing this one may have been answered 202 for it.
  if (input.request_sha256 !== undefined || !written) throw failure;
  return {
    queued_turn: input.key_sha256,
    position: await withdrawUnanswered(log, scope, input.key_sha256, failure, position),
    replayed: false,
  };
}

/** Tries of an enqueue's signal put, its listing and the withdraw of its entry when they still fail. */
const ENQUEUE_TRIES = 3;

async function retried<T>(call: () => Promise<T>): Promise<T> {
  for (let tries = 1; ; tries++) {
    try {
      return await call();
    } catch (error) {
      if (tries >= ENQUEUE_TRIES) throw error;
      await backoff(tries + 3);
    }
  }
}

/**
 * The place of the input `keyHash` among those still waiting (1: next; 0: taken up already). A
 * withdraw's tombstone listed before it (empty) waits for nothing. An entry listed before it that
 * a pickup named is read (a get, only then): marked, its pickup began claiming it, so it is a turn
 * (one whose key could not be indexed stays listed while it runs), or gone, it waits no more.
 */
async function waitingPosition(log: LogContext, scope: LogScope, queued: QueuedEntry[], keyHash: string) {
  const at = queued.findIndex((other) => other.keyHash === keyHash);
  if (at < 0) return 0;
  let position = 1;
  for (const entry of queued.slice(0, at)) {
    if (entry.withdrawn) continue;
    if (entry.named) {
      const read = await readQueued(log, { ...scope, generation: entry.generation }, entry.keyHash);
      if (read === null || read.taking_at !== undefined) continue;
    }
    position++;
  }
  return position;
}

/**
 * For an unkeyed enqueue whose entry landed, or may have (`putAgain`: its put's answer was lost
 * and its read failed), and whose signal or position could not be written or read (`failure`): a
 * 503 would have its client's retry queue the input twice, and a 202 without the signal would let
 * a later request run before it. So the entry is withdrawn (log/queue-withdraw.ts) and `failure`
 * thrown (503: it never runs), unless a pickup took it up meanwhile (position 0: it runs). A
 * withdraw that fails every try leaves the entry, which runs: answered 202, with its `position`
 * when the listing read it (else null). So is one whose put may have landed once it is known to
 * stand: a withdraw read it, or else `putAgain` (create-only, never a second input: a pickup of
 * it after its turn was claimed replays that turn) lands, or is refused, which only the entry
 * itself can refuse (no withdraw read it, so none wrote a tombstone). When every put again fails
 * too, the store failing every call, nothing tells whether it was stored: `failure` is thrown
 * (503, logged), as a 202 must not answer an input stored nowhere; it runs if its put landed.
 * A withdraw whose tombstone landed (a later try read it, or its put was answered and its delete
 * failed) withdrew the input, though no try finished: 503, it never runs. One whose last
 * tombstone put failed reads what stands (read only, tried again): the entry (202, it runs),
 * nothing (a pickup took it up: position 0), or the tombstone (503); when that read fails too,
 * nothing tells whether it runs: 503, logged, as a 202 must not answer an input that never runs.
 */
async function withdrawUnanswered(
  log: LogContext,
  scope: LogScope,
  keyHash: string,
  failure: unknown,
  position: number | null,
  putAgain?: () => Promise<unknown>,
): Promise<number | null> {
  // The last thing a withdraw found of the entry: a landed entry stands until one found otherwise.
  let sight = (putAgain === undefined ? 'standing' : undefined) as WithdrawSight | undefined;
  let withdrawError: unknown = failure;
  for (let tries = 1; tries <= ENQUEUE_TRIES; tries++) {
    try {
      await withdrawQueued(log, scope.id, keyHash, (seen) => {
        sight = seen;
      });
      throw failure;
    } catch (error) {
      if (error === failure) throw error;
      if (error instanceof QueuedInputTakenError) return 0;
      // Withdrawn by an earlier try whose answer was lost: its tombstone stands, deleted here (no
      // other input is queued under the random key of an unkeyed one), or left to a pickup.
      if (error instanceof NotFoundError) {
        await removeQueued(log, scope, keyHash).catch(() => undefined);
        throw failure;
      }
      withdrawError = error;
      if (tries < ENQUEUE_TRIES) await backoff(tries + 3);
    }
  }
  const unwithdrawn = `tailgate: session ${scope.id}: input ${keyHash}, queued, could not be withdrawn`;
  // The last tombstone's put failed: what stands tells whether it landed (a read, tried again).
  if (sight === 'maybe') {
    const found = await retried(() => queuedSight(log, scope.id, keyHash)).catch((error: unknown) =>
      error instanceof NotFoundError ? ('withdrawn' as const) : ('maybe' as const),
    );
    if (found === 'gone') return 0;
    sight = found;
  }
  // Its tombstone landed, though no try could finish the withdraw: no pickup runs it.
  if (sight === 'withdrawn') {
    await removeQueued(log, scope, keyHash).catch(() => undefined);
    throw failure;
  }
  // Nothing tells whether that tombstone landed: a 202 could answer an input that never runs.
  if (sight === 'maybe') {
    log.log(`${unwithdrawn}: answered 503, it runs if its tombstone did not land`, withdrawError);
    throw failure;
  }
  if (sight === 'standing' || !putAgain) {
    log.log(`${unwithdrawn}: it runs`, withdrawError);
    return position;
  }
  const stands = await retried(putAgain).then(
    () => true,
    () => false,
  );
  log.log(`${unwithdrawn}: ${stands ? 'it runs' : 'answered 503, it runs if its put landed'}`, failure);
  if (!stands) throw failure;
  return position;
}

/**
 * Puts the queue's signal (keys.ts queueSignalKey: unconditional, a new etag each time) after
 * an entry landed: a claim that lists it set takes the queue up before its own turn, and a
 * pickup empties it only if-match on an etag it read before it found the queue empty, so
 * neither the signal of an entry it did not list nor the entry itself is lost to that write.
 * A put that still fails after its tries fails the enqueue, as its listing's failure does: a
 * keyed one (its retry finds the entry), or an unkeyed one whose entry its enqueue withdrew.
 * A delete of the newest turn puts it under its new generation too (log/rewind.ts).
 */
export async function raiseSignal(log: LogContext, scope: LogScope, writer: string): Promise<void> {
  await log.store.put(queueSignalKey(scope), JSON.stringify({ writer }), { contentType: 'application/json' });
}

/** Empties the queue's signal if it is still as read (`etag`); false when another write came first. */
export async function lowerSignal(log: LogContext, scope: LogScope, etag: string): Promise<boolean> {
  const put = await log.store.put(queueSignalKey(scope), '', { ifMatch: etag });
  return put !== null;
}

/**
 * See SessionLog.queued: oldest first. One listing of `queue/<g>/`, and one of each older
 * generation a delete of the newest turn left (`queued_in`), whose inputs are still the
 * session's: a session no turn was deleted from lists its own queue only. With two inputs or
 * more, a get of the input a pickup marked last (log/queue-taking.ts), which goes first.
 */
export async function listQueued(log: LogContext, scope: LogScope): Promise<QueuedEntry[]> {
  const generations = [scope.generation, ...(scope.queuedIn ?? [])];
  const listed = await Promise.all(generations.map((generation) => listGeneration(log, { ...scope, generation })));
  const byUpload = listed.flat().sort((a, b) => a.uploaded.getTime() - b.uploaded.getTime() || byKey(a, b));
  // Entries the store stamped alike (S3 keeps upload times to the second) go in the order they
  // were queued: each one's `enqueued_at`, read (a get each; none where the times differ).
  const ordered: QueuedEntry[] = [];
  for (let start = 0; start < byUpload.length; ) {
    let end = start + 1;
    while (end < byUpload.length && byUpload[end]!.uploaded.getTime() === byUpload[start]!.uploaded.getTime()) end++;
    const tied = byUpload.slice(start, end);
    ordered.push(...(tied.length > 1 ? await byEnqueueTime(log, scope, tied) : tied));
    start = end;
  }
  // One a pickup marked (its upload time moved) still goes first (log/queue-taking.ts).
  return takingFirst(log, scope, ordered, (entry) =>
    readQueued(log, { ...scope, generation: entry.generation }, entry.keyHash),
  );
}

function byKey(a: QueuedEntry, b: QueuedEntry): number {
  return a.keyHash < b.keyHash ? -1 : a.keyHash > b.keyHash ? 1 : 0;
}

/** `entries` by their `enqueued_at`, then key; one taken up since they were listed is left out. */
async function byEnqueueTime(log: LogContext, scope: LogScope, entries: QueuedEntry[]): Promise<QueuedEntry[]> {
  const read = await Promise.all(
    entries.map(async (entry) => {
      const input = await readQueued(log, { ...scope, generation: entry.generation }, entry.keyHash);
      return input ? { entry, at: Date.parse(input.enqueued_at) } : null;
    }),
  );
  return read
    .filter((found) => found !== null)
    .sort((a, b) => a.at - b.at || byKey(a.entry, b.entry))
    .map((found) => found.entry);
}

async function listGeneration(log: LogContext, scope: LogScope): Promise<QueuedEntry[]> {
  const prefix = queuedPrefix(scope);
  const entries: QueuedEntry[] = [];
  let cursor: string | undefined;
  do {
    const page = await log.store.list(prefix, { limit: 1000, ...(cursor ? { cursor } : {}) });
    for (const object of page.objects)
      entries.push({
        keyHash: object.key.slice(prefix.length),
        uploaded: object.uploaded,
        generation: scope.generation,
        ...(object.size === 0 ? { withdrawn: true } : {}),
      });
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  return entries;
}

/**
 * Whether an input queued under an older generation (`queued_in`) was taken up there: its key
 * names a turn in one of them (`idem/`, which a turn's claim, completion or lease close
 * writes), a turn a delete may have taken out since. Such an input is not run again.
 */
export async function takenBefore(log: LogContext, scope: LogScope, keyHash: string): Promise<boolean> {
  const claims = await Promise.all(
    (scope.queuedIn ?? []).map((generation) => log.store.head(idempotencyKey({ ...scope, generation }, keyHash))),
  );
  return claims.some((claim) => claim !== null);
}

/** One queued input; null once it was taken up or withdrawn (an empty entry: log/queue-withdraw.ts). */
export async function readQueued(log: LogContext, scope: LogScope, keyHash: string): Promise<QueuedInput | null> {
  const key = queuedKey(scope, keyHash);
  const object = await log.store.get(key);
  return object && object.body.length > 0 ? parseStored(key, object.body, queuedInputSchema) : null;
}

/** Removes a queued input once its turn is stored (or what a withdraw left of it). */
export async function removeQueued(log: LogContext, scope: LogScope, keyHash: string): Promise<void> {
  await log.store.delete(queuedKey(scope, keyHash));
}

/**
 * The input queued under `keyHash`, in the session's generation or one a delete of the newest
 * turn left (`queued_in`, whose inputs still run): null when none waits. Started with a keyed
 * claim's reads, for `checkQueuedKey`.
 */
export function queuedUnder(log: LogContext, scope: LogScope, keyHash: string): Promise<QueuedInput | null> {
  const generations = [scope.generation, ...(scope.queuedIn ?? [])];
  const found = Promise.all(generations.map((generation) => readQueued(log, { ...scope, generation }, keyHash))).then(
    (inputs) => inputs.find((input) => input !== null) ?? null,
  );
  found.catch(() => undefined);
  return found;
}

/**
 * A request under a key whose turn (`idem/`, written once its record landed) holds another
 * request: IdempotencyKeyReusedError (422). One get.
 */
async function checkKeyClaim(log: LogContext, scope: LogScope, keyHash: string, requestHash: string): Promise<void> {
  const key = idempotencyKey(scope, keyHash);
  const object = await log.store.get(key);
  if (!object) return;
  const claim = parseStored(key, object.body, idempotencyClaimSchema);
  if (claim.request_sha256 !== undefined && claim.request_sha256 !== requestHash)
    throw new IdempotencyKeyReusedError(0);
}

/** A request under the key of a queued input that holds another request: IdempotencyKeyReusedError (422). */
export function checkQueuedKey(queued: QueuedInput | null, requestHash: string | undefined): void {
  if (queued?.request_sha256 !== undefined && queued.request_sha256 !== requestHash)
    throw new IdempotencyKeyReusedError(0, queued.key_sha256);
}

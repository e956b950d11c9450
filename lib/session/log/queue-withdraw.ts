import { NotFoundError, StorageError, TailgateError } from '../../errors.ts';
import { firstToCreate } from '../../store/create-only.ts';
import { idempotencyKey, queuedKey, tombstoneClearKey, type LogScope } from '../keys.ts';
import { queuedInputSchema } from '../queued-input.ts';
import { parseStored } from '../records.ts';
import { sessionScope } from './config-object.ts';
import { backoff, type LogContext } from './context.ts';
import { forgetTakingIfDeleted, nameTaking } from './queue-taking.ts';

/**
 * Withdrawing a queued input (DELETE /v1/sessions/{id}/queue/{queued_turn}; docs/STORAGE.md,
 * "Queued inputs") against a pickup claiming it. No store deletes conditionally, so both rewrite
 * the entry if-match on the etag they read: a pickup marks it (`taking_at`) right before its
 * turn's record is put, once nothing else can refuse the claim; a withdraw empties it (a
 * tombstone, which readers take as gone) and then deletes it. One rewrite lands first and the
 * other is refused: a pickup refused stores nothing (QueuedWithdrawnError) and passes the
 * entry over; a withdraw that meets the mark answers 409 queued_input_taken: the input runs, or ran.
 */

/** Rewrites of one entry tried before giving up (each lost to another pickup's mark). */
const MAX_REWRITES = 8;

/**
 * How long a withdraw's tombstone stands before a pickup deletes it: its withdraw deletes it
 * right after writing it, so one this old was left by a withdraw that stopped in between.
 */
export const TOMBSTONE_STALE_MS = 60_000;

/** A withdraw of a queued input a pickup claimed as a turn already: that turn runs (409). */
export class QueuedInputTakenError extends TailgateError {
  constructor(sessionId: string, queuedTurn: string) {
    super('queued_input_taken', `queued input ${queuedTurn} of session ${sessionId} was taken up as a turn`, {
      session_id: sessionId,
      queued_turn: queuedTurn,
    });
    this.name = 'QueuedInputTakenError';
  }
}

/**
 * The entry was withdrawn: the pickup claiming it stores nothing. `requeued`: another input was
 * queued under its key since (after the withdraw's delete), which the pickup reads again.
 */
export class QueuedWithdrawnError extends Error {
  readonly requeued: boolean;
  constructor(requeued = false) {
    super(requeued ? 'queued input withdrawn and queued again' : 'queued input withdrawn');
    this.requeued = requeued;
  }
}

/**
 * Marks the input queued under `keyHash` by `writer` (the entry the pickup read) as being
 * claimed, right before its turn's record. An entry another enqueue wrote under the key since
 * is not marked: the input read was withdrawn, and the claim would run it in the new one's place.
 */
export async function markTaking(log: LogContext, scope: LogScope, keyHash: string, writer: string): Promise<void> {
  const key = queuedKey(scope, keyHash);
  let named = false;
  for (let tries = 0; tries < MAX_REWRITES; tries++) {
    const object = await log.store.get(key);
    if (!object || object.body.length === 0) {
      // Gone since it was named: perhaps with its session, whose delete's sweep the name missed.
      if (named && !object) await forgetTakingIfDeleted(log, scope);
      throw new QueuedWithdrawnError();
    }
    const entry = parseStored(key, object.body, queuedInputSchema);
    if (entry.writer !== writer) throw new QueuedWithdrawnError(true);
    const marked = { ...entry, taking_at: log.clock().toISOString() };
    // Named first: the mark moves its upload time, and listings put the entry named first.
    await nameTaking(log, scope, keyHash, writer);
    named = true;
    const options = { ifMatch: object.etag, contentType: 'application/json' };
    if (await log.store.put(key, JSON.stringify(marked), options)) return;
  }
  throw new Error(`queued input ${keyHash} kept changing while it was marked`);
}

/**
 * For a pickup that found no input under a listed entry: whether a withdraw's tombstone stands
 * there, which the pickup passes over (its withdraw deletes it). A stale one is deleted here.
 * Only a tombstone is deleted, never an entry queued since under the key.
 */
export async function withdrawing(log: LogContext, scope: LogScope, keyHash: string): Promise<boolean> {
  const found = await tombstoneAt(log, scope, keyHash);
  return found === 'young' || found === 'deleted';
}

/**
 * What stands under a queued entry (`keyHash`): an entry, nothing, a young tombstone (its
 * withdraw deletes it), or a stale one, which is deleted here (its withdraw stopped before its
 * delete). Of a pickup and an enqueue that read a stale one at once, only the first to create
 * its `queue_cleared/` key deletes it (the other waits, as for a young one), so no enqueue's
 * entry put after its own delete of it is deleted by the other. An if-match rewrite of the
 * tombstone would not tell them apart on S3 and R2: it keeps the body (empty), hence the etag.
 */
async function tombstoneAt(
  log: LogContext,
  scope: LogScope,
  keyHash: string,
): Promise<'entry' | 'gone' | 'young' | 'deleted'> {
  const key = queuedKey(scope, keyHash);
  const object = await log.store.get(key);
  if (!object) return 'gone';
  if (object.body.length > 0) return 'entry';
  if (!stale(log, object.uploaded) || !(await clearsTombstone(log, scope, keyHash, object.uploaded))) return 'young';
  await log.store.delete(key);
  return 'deleted';
}

function stale(log: LogContext, uploaded: Date): boolean {
  return log.clock().getTime() - uploaded.getTime() >= TOMBSTONE_STALE_MS;
}

/**
 * Whether this caller deletes the stale tombstone under `keyHash` uploaded at `uploaded`: the
 * first to create its `queue_cleared/` key. One created a minute ago while the tombstone still
 * stands (its creator stopped before the delete) passes the choice on to a key named by it too,
 * once the tombstone is read again as the same one.
 */
async function clearsTombstone(log: LogContext, scope: LogScope, keyHash: string, uploaded: Date): Promise<boolean> {
  let at = String(uploaded.getTime());
  for (let tries = 0; tries < MAX_REWRITES; tries++) {
    const decided = await firstToCreate(log.store, tombstoneClearKey(scope, keyHash, at));
    if (decided.first) return true;
    if (!decided.found || !stale(log, decided.found.uploaded)) return false;
    const again = await log.store.head(queuedKey(scope, keyHash));
    if (again?.size !== 0 || again.uploaded.getTime() !== uploaded.getTime()) return false;
    at = `${at}-${decided.found.uploaded.getTime()}`;
  }
  return false;
}

/** Waits of an enqueue for a young tombstone under its key to be deleted by its withdraw. */
const TOMBSTONE_WAITS = 8;

/**
 * For an enqueue whose create-only put under `key` was refused: whether no entry stands there
 * now (a withdraw's tombstone stood there, or nothing is there by now: its withdraw deleted it
 * since), so the enqueue puts again (else the input would be answered 202 and stored nowhere).
 * A stale tombstone is deleted here; a young one is waited for (its withdraw deletes it right
 * after writing it); `waits` times at most, then a StorageError (503: retry).
 */
export async function tombstoneCleared(
  log: LogContext,
  scope: LogScope,
  keyHash: string,
  waits: number,
): Promise<boolean> {
  const found = await tombstoneAt(log, scope, keyHash);
  if (found === 'entry') return false;
  if (waits >= TOMBSTONE_WAITS)
    throw new StorageError(`queued input ${keyHash} is being withdrawn`, { key: queuedKey(scope, keyHash) });
  if (found === 'young') await backoff(waits + 3);
  return true;
}

/**
 * What a withdraw found of an entry: `standing`, read unmarked (before its tombstone's put);
 * `withdrawn`, its tombstone read, or put and answered (no pickup runs an emptied entry: a mark
 * and a tombstone are both put if-match on the entry as read, so one of them is refused);
 * `maybe`, its tombstone's put failed, so it may have landed.
 */
export type WithdrawSight = 'standing' | 'withdrawn' | 'maybe';

/**
 * What stands under `keyHash` in session `id` now (its generation, then those in `queued_in`),
 * read only: for an enqueue whose withdraw's last tombstone put failed. `withdrawn`: a tombstone;
 * `gone`: nothing (a pickup took the entry up: none takes up an emptied one, and only a stale
 * tombstone is deleted by others). NotFoundError when the session is gone.
 */
export async function queuedSight(log: LogContext, id: string, keyHash: string): Promise<WithdrawSight | 'gone'> {
  const scope = await sessionScope(log, id);
  for (const generation of [scope.generation, ...(scope.queuedIn ?? [])]) {
    const object = await log.store.get(queuedKey({ ...scope, generation }, keyHash));
    if (object) return object.body.length === 0 ? 'withdrawn' : 'standing';
  }
  return 'gone';
}

/**
 * Withdraws the input queued in session `id` under `keyHash` (its own generation or one in
 * `queued_in`). QueuedInputTakenError when a turn holds its key (`idem/`, written once a claim's
 * record landed): a pickup's, or a retry's under its Idempotency-Key that ran it itself (its
 * entry then waits for a pickup to replay and remove it). None queued: else NotFoundError. The
 * claims are read with the entries, and again when an entry was found gone (one more head each).
 */
export async function withdrawQueued(log: LogContext, id: string, keyHash: string): Promise<void> {
  const outcome = await attemptWithdraw(log, id, keyHash);
  if (outcome.kind !== 'withdrawn') throw outcome.error;
}

/**
 * How one withdraw ended (withdrawQueued throws the `error` of each but `withdrawn`):
 * - `withdrawn`: its tombstone's put was answered and the entry deleted;
 * - `taken`: QueuedInputTakenError;
 * - `absent`: NotFoundError (none queued, or the session is gone);
 * - `failed`: any other error, with what it last saw of the entry (`sight`; undefined: nothing).
 */
export type WithdrawOutcome =
  | { kind: 'withdrawn' }
  | { kind: 'taken'; error: QueuedInputTakenError }
  | { kind: 'absent'; error: NotFoundError }
  | { kind: 'failed'; error: unknown; sight: WithdrawSight | undefined };

/**
 * withdrawQueued's withdraw, its ending returned (WithdrawOutcome) rather than thrown. A `sight`
 * tells what stands only for a key its caller alone queues under.
 */
export async function attemptWithdraw(log: LogContext, id: string, keyHash: string): Promise<WithdrawOutcome> {
  let sight: WithdrawSight | undefined;
  try {
    const scope = await sessionScope(log, id);
    const generations = [scope.generation, ...(scope.queuedIn ?? [])];
    // Read with the entry: a turn under the key ran the input, entry or not. An entry is taken
    // only by one in its own generation or a later one (a key of a turn a delete took out is free
    // again, and its pickup claims it in the generation the config names after it landed): of the
    // session's own generation, by one there; of one a delete left in `queued_in`, by one there or
    // in one listed before it (its pickup's replay, or log/queue.ts takenBefore).
    const readClaims = () => {
      const read = Promise.all(
        generations.map((generation) => log.store.head(idempotencyKey({ ...scope, generation }, keyHash))),
      );
      read.catch(() => undefined);
      return read;
    };
    let claims = readClaims();
    const taken = async (upTo = generations.length) =>
      (await claims).some((claim, index) => claim !== null && index <= upTo);
    const takenUp = () => ({ kind: 'taken', error: new QueuedInputTakenError(id, keyHash) }) as const;
    let gone = false;
    for (const [at, generation] of generations.entries()) {
      const key = queuedKey({ ...scope, generation }, keyHash);
      for (let tries = 0; tries < MAX_REWRITES; tries++) {
        const object = await log.store.get(key);
        if (!object) {
          gone = true;
          break;
        }
        // Withdrawn already (its withdraw deletes it, or a pickup once it is stale).
        if (object.body.length === 0) {
          sight = 'withdrawn';
          break;
        }
        const marked = parseStored(key, object.body, queuedInputSchema).taking_at !== undefined;
        if (marked || (await taken(at))) return takenUp();
        // Read unmarked: a tombstone put that fails may have landed.
        sight = 'maybe';
        const put = await log.store.put(key, '', { ifMatch: object.etag });
        sight = put ? 'withdrawn' : 'standing';
        if (put) {
          await log.store.delete(key);
          return { kind: 'withdrawn' };
        }
      }
    }
    if (await taken()) return takenUp();
    // An entry found gone may have been removed by a pickup whose claim landed after those reads.
    if (gone) {
      claims = readClaims();
      if (await taken()) return takenUp();
    }
    const error = new NotFoundError(`no input is queued as ${keyHash} in session ${id}`, {
      id,
      session_id: id,
      queued_turn: keyHash,
    });
    return { kind: 'absent', error };
  } catch (error) {
    if (error instanceof QueuedInputTakenError) return { kind: 'taken', error };
    if (error instanceof NotFoundError) return { kind: 'absent', error };
    return { kind: 'failed', error, sight };
  }
}

import { IdempotencyKeyReusedError, NotFoundError } from '../../errors.ts';
import { putJsonCreateOnly } from '../../store/create-only.ts';
import { idempotencyKey, queuedKey, queuedPrefix, queueSignalKey, type LogScope } from '../keys.ts';
import { queuedInputSchema, type QueuedInput } from '../queued-input.ts';
import { idempotencyClaimSchema, parseStored } from '../records.ts';
import { sessionScope } from './config-object.ts';
import { backoff, type LogContext } from './context.ts';
import { markQueue } from './queue-markers.ts';
import { takenUp, takingFirst } from './queue-taking.ts';
import {
  attemptWithdraw,
  queuedSight,
  tombstoneCleared,
  type WithdrawOutcome,
  type WithdrawSight,
} from './queue-withdraw.ts';

/**
 * Inputs queued while a turn ran (the busy policy `enqueue`, docs/STORAGE.md "Queued inputs"):
 * `queue/<g>/<key sha256>`, create-only, in the session's generation, so a delete removes them. They are taken in
 * the order the store received them (upload time; where the store gives two one time, their `enqueued_at`; then key),
 * each claimed as a turn under its `key_sha256`, so one queued input is stored at most once however many pickups race
 * or die: a second claim under the key replays the first. A delete of the newest turn names the generation it leaves in
 * the config's `queued_in`, whose queue is read with the session's own from then on (log/rewind.ts). Every enqueue
 * marks the session first (`queues/<id>`, log/queue-markers.ts), for the sweep that takes up queues nobody closed.
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
  onlyAgain = false,
): Promise<{ queued_turn: string; position: number | null; replayed: boolean } | null> {
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
    for (let waits = 0; !written && !onlyAgain; waits++) {
      written = await putJsonCreateOnly(log.store, key, entry, `"writer":"${writer}"`);
      if (!written && !(await tombstoneCleared(log, scope, input.key_sha256, waits))) break;
    }
  } catch (error) {
    // A put whose answer was lost and whose read failed may have landed: an unkeyed entry is
    // withdrawn before the 503 (its retry queues it once), unless a pickup took it up (202), or
    // it stands and cannot be withdrawn (202, its signal raised if the store lets it).
    if (input.request_sha256 !== undefined) throw error;
    const again = () =>
      log.store.put(key, JSON.stringify(entry), { onlyIfAbsent: true, contentType: 'application/json' });
    const position = await withdrawUnanswered(log, scope, input.key_sha256, error, { landed: false, again });
    if (position !== 0) await retried(() => raiseSignal(log, scope, writer)).catch(() => undefined);
    return { queued_turn: input.key_sha256, position, replayed: false };
  }
  if (!written) {
    // The same Idempotency-Key queued an input already (`onlyAgain`: in a generation a delete left too; gone, null).
    const existing = await (onlyAgain ? queuedUnder : readQueued)(log, scope, input.key_sha256);
    if (onlyAgain && !existing) return null;
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
  const failure: unknown = [raised, listed].find(
    (result): result is PromiseRejectedResult => result.status === 'rejected',
  )?.reason;
  // A keyed input: a retry under its key finds the entry and queues nothing new, so the failure
  // is answered (503). Its entry is not withdrawn: a retry racing this one may have been answered 202 for it.
  if (input.request_sha256 !== undefined || !written) throw failure;
  return {
    queued_turn: input.key_sha256,
    position: await withdrawUnanswered(log, scope, input.key_sha256, failure, { landed: true, position }),
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
 * a pickup named is read (a get, only then): gone, or marked with its turn stored (log/queue-taking.ts
 * `takenUp`, a head more), it waits no more; marked with nothing stored, it runs at the next pickup.
 */
async function waitingPosition(log: LogContext, scope: LogScope, queued: QueuedEntry[], keyHash: string) {
  const at = queued.findIndex((other) => other.keyHash === keyHash);
  if (at < 0) return 0;
  let position = 1;
  for (const entry of queued.slice(0, at)) {
    if (entry.withdrawn) continue;
    if (entry.named) {
      const read = await readQueued(log, { ...scope, generation: entry.generation }, entry.keyHash);
      if (read === null || (await takenUp(log, scope, entry, read))) continue;
    }
    position++;
  }
  return position;
}

/**
 * For an unkeyed enqueue whose entry landed (`put.landed`), or may have (its put's answer was lost and its read
 * failed: `put.again` puts it again, create-only, never a second input: a pickup of it after its turn was claimed
 * replays that turn), and whose signal or position could not be written or read (`failure`). A 503 would have its
 * client's retry queue the input twice, a 202 without the signal would let a later request run before it: so the entry
 * is withdrawn (log/queue-withdraw.ts) and `failure` thrown (503: it never runs). How the withdraws end (see
 * AfterWithdraw, answerFor) tells the answer otherwise.
 */
async function withdrawUnanswered(
  log: LogContext,
  scope: LogScope,
  keyHash: string,
  failure: unknown,
  put: { landed: true; position: number | null } | { landed: false; again: () => Promise<unknown> },
): Promise<number | null> {
  const { left, cause } = await withdrawTried(log, scope, keyHash, failure, put);
  if (left === 'tombstone') await removeQueued(log, scope, keyHash).catch(() => undefined);
  const answer = answerFor(left, put.landed ? put.position : null);
  if (answer.note !== undefined)
    log.log(`tailgate: session ${scope.id}: input ${keyHash}, queued, could not be withdrawn: ${answer.note}`, cause);
  if (answer.position === undefined) throw failure;
  return answer.position;
}

/**
 * What an enqueue's withdraws left of its entry:
 * - `withdrawn`: a withdraw finished;
 * - `tombstone`: its tombstone landed (a try read it, or its put was answered and its delete
 *   failed; or a try found none: an earlier one's answer was lost), though no try finished: no
 *   pickup runs it; deleted here (no other input is queued under the random key of an unkeyed
 *   one), else left to a pickup;
 * - `taken`: a pickup took it up (marked it, or a turn holds its key; or it is gone after a failed
 *   tombstone put);
 * - `standing`: it stands unwithdrawn (a withdraw read it, or its put again landed or was refused,
 *   which only the entry itself can refuse: no withdraw read it, so none wrote a tombstone);
 * - `tombstone-unknown`: its last tombstone put failed and what stands could not be read;
 * - `put-unknown`: no withdraw read it and every put again failed too.
 */
type AfterWithdraw = 'withdrawn' | 'tombstone' | 'taken' | 'standing' | 'tombstone-unknown' | 'put-unknown';

/**
 * The answer by what is left (pure): a 202 with the `position` (0 once taken up), or a 503 (no
 * position); `note`, logged, when the input runs though its withdraw failed, or may run though
 * answered 503 (a 202 must not answer an input stored nowhere, or that never runs).
 */
function answerFor(left: AfterWithdraw, position: number | null): { position?: number | null; note?: string } {
  switch (left) {
    case 'withdrawn':
    case 'tombstone':
      return {};
    case 'taken':
      return { position: 0 };
    case 'standing':
      return { position, note: 'it runs' };
    case 'tombstone-unknown':
      return { note: 'answered 503, it runs if its tombstone did not land' };
    case 'put-unknown':
      return { note: 'answered 503, it runs if its put landed' };
  }
}

/** Withdraws the entry (tried again), then finds out what is left of it; `cause`: the error to log. */
async function withdrawTried(
  log: LogContext,
  scope: LogScope,
  keyHash: string,
  failure: unknown,
  put: { landed: true } | { landed: false; again: () => Promise<unknown> },
): Promise<{ left: AfterWithdraw; cause: unknown }> {
  const outcome = await withdrawRetried(log, scope.id, keyHash);
  if (outcome.kind !== 'failed') {
    const left = outcome.kind === 'absent' ? 'tombstone' : outcome.kind;
    return { left, cause: failure };
  }
  const { error: cause, sight } = outcome;
  if (sight === 'withdrawn') return { left: 'tombstone', cause };
  if (sight === 'maybe') {
    // The last tombstone's put failed: what stands tells whether it landed (a read, tried again).
    const found = await retried(() => queuedSight(log, scope.id, keyHash)).catch((error: unknown) =>
      error instanceof NotFoundError ? ('withdrawn' as const) : ('maybe' as const),
    );
    const left = { gone: 'taken', withdrawn: 'tombstone', standing: 'standing', maybe: 'tombstone-unknown' } as const;
    return { left: left[found], cause };
  }
  // Read standing, or never read: a landed entry stands, else its put again tells whether it does.
  if (sight === 'standing' || put.landed) return { left: 'standing', cause };
  const stands = await retried(put.again).then(
    () => true,
    () => false,
  );
  return { left: stands ? 'standing' : 'put-unknown', cause: failure };
}

/** attemptWithdraw, tried again while it fails; a failure's sight is the last any try had. */
async function withdrawRetried(log: LogContext, id: string, keyHash: string): Promise<WithdrawOutcome> {
  let sight: WithdrawSight | undefined;
  for (let tries = 1; ; tries++) {
    const outcome = await attemptWithdraw(log, id, keyHash);
    if (outcome.kind !== 'failed') return outcome;
    sight = outcome.sight ?? sight;
    if (tries >= ENQUEUE_TRIES) return { ...outcome, sight };
    await backoff(tries + 3);
  }
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
  // Inputs the store stamped alike (S3 keeps upload times to the second) go in the order they
  // were queued: each one's `enqueued_at`, read (a get each; none where the times differ). A
  // tombstone among them is not read (its size tells it): it goes first, as listed.
  const ordered: QueuedEntry[] = [];
  for (let start = 0; start < byUpload.length; ) {
    let end = start + 1;
    while (end < byUpload.length && byUpload[end]!.uploaded.getTime() === byUpload[start]!.uploaded.getTime()) end++;
    const tied = byUpload.slice(start, end).filter((entry) => !entry.withdrawn);
    ordered.push(...byUpload.slice(start, end).filter((entry) => entry.withdrawn));
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
 * Whether an input queued under `generation`, an older one (`queued_in`), was taken up: its key
 * names a turn (`idem/`, which a turn's claim, completion or lease close writes) in that
 * generation or one a delete made after it (listed before it in `queued_in`), a turn a delete may
 * have taken out since. A pickup claims the input in the session's generation as it reads the
 * config after the entry landed, so that one or a later one: a key in a generation older than
 * the entry's names a turn a delete took out before the input was queued (its key free again),
 * never its own. Such an input is not run again.
 */
export async function takenBefore(
  log: LogContext,
  scope: LogScope,
  entry: { keyHash: string; generation: string },
): Promise<boolean> {
  const left = scope.queuedIn ?? [];
  const since = left.slice(0, left.indexOf(entry.generation) + 1);
  const claims = await Promise.all(
    since.map((generation) => log.store.head(idempotencyKey({ ...scope, generation }, entry.keyHash))),
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

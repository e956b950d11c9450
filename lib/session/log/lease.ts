import {
  CorruptObjectError,
  LEASE_EXPIRED,
  leaseExpired,
  SESSION_DELETED,
  TURN_CANCELLED,
  turnCancelled,
  TurnNotOpenError,
} from '../../errors.ts';
import { putJsonCreateOnly } from '../../store/create-only.ts';
import { contextKey, doneKey, idempotencyKey, leaseKey, recordKey, sessionConfigKey, type LogScope } from '../keys.ts';
import {
  doneSchema,
  parseStored,
  sessionConfigSchema,
  type DoneRecord,
  type LogRecord,
  type TurnStatus,
  type Undelivered,
} from '../records.ts';
import type { LogContext } from './context.ts';
import { countsOf, isEmpty, NOTHING_UNDELIVERED, readHead, RecordMissingError, withFreshListing } from './head.ts';
import { indexKey } from './idempotency-index.ts';
import { heldError, renewedLease } from './busy-lease.ts';
import { packedCloser, packedTurn } from './packed-turn.ts';
import { missingTurn } from './turns.ts';
import type { ClosedTurn, IntentTurn, OpenTurn, StoredOutcome } from './types.ts';

/**
 * A model turn's lease: when it runs out, its renewal, and the closes by someone other than
 * the turn's owner (an expired lease, a cancel, a delete). A background turn's runner takes,
 * renews and releases its lease in log/held-lease.ts.
 */

/** What a lease is written for: a turn, or a manual compaction's claim (its record and writer). */
export type LeaseHolder = Pick<OpenTurn, 'scope' | 'record' | 'writer'>;

/** How often a running turn renews its lease (ms): every third of the lease. */
export function renewalMs(leaseMs: number): number {
  return Math.max(1, Math.floor(leaseMs / 3));
}

/**
 * The lease of `turn` from now (or, given `after`, the ms of the expiry of a lease read before,
 * past it), and how it is put (its `writer` metadata tells a lost answer).
 */
export function leaseWrite(log: LogContext, turn: LeaseHolder, after = -Infinity) {
  const expires = new Date(Math.max(log.clock().getTime() + log.leaseMs, after + 1)).toISOString();
  const lease = { format: 'tailgate.lease.v1', record: turn.record, lease_expires_at: expires };
  return {
    expires,
    body: JSON.stringify(lease),
    options: { contentType: 'application/json', metadata: { writer: turn.writer } },
  };
}

/**
 * Writes the turn's lease again, `leaseMs` from now (`.lease` beside its record), so a newcomer
 * does not close it while the model is still answering. Call it every third of the lease while
 * the turn runs. A turn closed meanwhile keeps its completion: the lease object is then a
 * leftover the packer deletes.
 */
export async function renewLease(log: LogContext, turn: LeaseHolder): Promise<string> {
  const { expires, body, options } = leaseWrite(log, turn);
  await log.store.put(leaseKey(turn.scope, turn.record), body, options);
  return expires;
}

/** See SessionLog.closedBy. */
export async function closedBy(log: LogContext, turn: OpenTurn): Promise<{ code: string; details?: unknown } | null> {
  const key = doneKey(turn.scope, turn.record);
  const object = await log.store.get(key);
  if (!object) return null;
  // Buried: closed and packed since; its segment line tells by whom (a cancel, an interrupt, a
  // lapsed lease). A segment listed may be merged into a newer one before it is read.
  if (object.body.length === 0)
    return packedCloser(await withFreshListing(() => packedTurn(log, turn.scope, turn.record)));
  const done = parseStored(key, object.body, doneSchema);
  return done.writer === turn.writer ? null : (done.error ?? { code: LEASE_EXPIRED });
}

/**
 * See SessionLog.leaveDeleted. A delete that met the turn open closed it with a completion
 * (failed, session_deleted) and kept that completion as a fence, which refuses the turn's own
 * completion. Once the turn's attempt has ended (its renewals stopped: none is in flight), its
 * lease goes at once: a renewal that read no fence just before the delete wrote it may have put
 * it after the delete's sweep. The fence goes too, with the turn's `idem/` and its compaction's
 * summary (`context/`), once the sweep has removed the turn's record: before that, the delete
 * may still read the record and fence it again (a summary ending after the sweep was put after it).
 * Nothing is removed unless the completion found is a delete's. Failures leave them to the next
 * delete of the same id, whose sweep removes every object of other incarnations.
 */
export async function leaveDeleted(log: LogContext, turn: OpenTurn): Promise<void> {
  try {
    const key = doneKey(turn.scope, turn.record);
    const [record, fence] = await Promise.all([log.store.head(recordKey(turn.scope, turn.record)), log.store.get(key)]);
    if (!fence || fence.body.length === 0) return;
    const closed = parseStored(key, fence.body, doneSchema);
    if (closed.writer === turn.writer || closed.error?.code !== SESSION_DELETED) return;
    const idem = turn.keyHash ? [idempotencyKey(turn.scope, turn.keyHash)] : [];
    const swept = record ? [] : [key, contextKey(turn.scope, turn.record), ...idem];
    await log.store.delete([leaseKey(turn.scope, turn.record), ...swept]);
  } catch {
    // Left for the next delete of this id.
  }
}

/**
 * See SessionLog.cancelTurn. An `interrupt`'s cancel (`interrupt`) says so in its stored error
 * (`details.interrupted`, which older readers pass over): the turn's own request is answered 409
 * `turn_cancelled` with it, which its client may retry, where a cancel's says `x-should-retry:
 * false` (functions/error-handler.ts).
 */
export async function cancelTurn(
  log: LogContext,
  id: string,
  turnNumber: number,
  interrupt = false,
): Promise<{ turn: number; status: TurnStatus; answered_at_end?: true }> {
  const { newest, scope, config } = await readHead(log, id);
  const open = newest && newest.record.kind === 'turn' && !newest.done ? newest.record : null;
  if (!open || open.turn !== turnNumber) {
    if (turnNumber > countsOf(newest).turns) throw missingTurn(id, turnNumber);
    // The newest record's completion tells how it ended; an older turn's would take a read.
    const own = newest?.record.kind === 'turn' && newest.record.turn === turnNumber;
    throw new TurnNotOpenError(id, turnNumber, (own && newest.done) || undefined);
  }
  const done = await closeTurn(
    log,
    scope,
    open,
    {
      status: 'failed',
      error: turnCancelled(id, turnNumber, interrupt),
    },
    config.webhook_url,
  );
  if (!done) throw new TurnNotOpenError(id, turnNumber);
  // A turn answered at its end (lib/turn/dead-turn.ts): its client never got its id.
  const answeredAtEnd = (open.request as { answered_at_end?: unknown } | undefined)?.answered_at_end === true;
  return { turn: turnNumber, status: 'failed', ...(answeredAtEnd ? { answered_at_end: true } : {}) };
}

/** When an open turn's lease runs out (ms): its record's, or the renewed one beside it. */
export async function leaseOf(log: LogContext, scope: LogScope, record: LogRecord): Promise<number> {
  const claimed = Date.parse(record.lease_expires_at ?? '');
  if (claimed > log.clock().getTime()) return claimed;
  return renewedLease(log, scope, record);
}

/**
 * Writes the completion of `record` for someone other than its owner (an expired lease, a
 * cancel), create-only; null when it was closed already. A keyed turn is indexed first.
 * Once the completion landed the close stands: its webhook event (`onClosed`) failing is logged,
 * the event left to the turn's intent in the outbox (lib/webhooks/intent.ts).
 * The turn may have consumed notices before it died: the completion names it in
 * `undelivered.lost_turns`, so the next turn looks for them. `webhookUrl` is the session's
 * (undefined: not read yet, read only when `onClosed` is set). Every close is told to
 * `onClosedByOther` first (the turn's attempts in this process stop). A close of an expired
 * lease is told to `onLeaseClosed` (the inputs queued behind the turn are taken up), or handed
 * to the closer's `successor` instead.
 */
export async function closeTurn(
  log: LogContext,
  scope: LogScope,
  record: LogRecord,
  outcome: StoredOutcome,
  webhookUrl?: string | null,
  /**
   * The closer claims the session as a model turn next, whose own close takes up the queue: it
   * tells `onLeaseClosed` itself if its claim stores nothing (lib/session/log/claim.ts).
   */
  successor?: (closed: ClosedTurn) => void,
): Promise<DoneRecord | null> {
  if (record.idempotency_key_sha256)
    await indexKey(log, scope, record.idempotency_key_sha256, record.record, record.request_sha256);
  const writer = crypto.randomUUID();
  const done = closingDone(log, scope, record, outcome, writer);
  const key = doneKey(scope, record.record);
  const written = await putJsonCreateOnly(log.store, key, done, `"writer":"${writer}"`);
  if (!written) return null;
  const closed: ClosedTurn = {
    scope,
    turn: record.turn ?? 0,
    status: done.status,
    error: done.error,
    completedAt: done.completed_at,
    webhookUrl,
    claimedAt: record.created_at,
    model: requestedModel(record),
  };
  log.onClosedByOther?.(closed);
  if (log.onClosed) {
    try {
      closed.webhookUrl = webhookUrl !== undefined ? webhookUrl : await sessionWebhookUrl(log, scope);
      await log.onClosed(closed);
    } catch (error) {
      // Closed all the same: the turn's intent, its claim's or put now (when that one failed and
      // its owner is gone), is the outbox drainer's to deliver.
      const intent =
        closed.webhookUrl !== undefined &&
        (await intentStored(log, {
          scope,
          turn: closed.turn,
          leaseExpiresAt: done.completed_at,
          session: closed.webhookUrl === null ? {} : { webhook_url: closed.webhookUrl },
        }));
      eventLeftToOutbox(log, closed, error, intent);
    }
  }
  if (done.error?.code === LEASE_EXPIRED) (successor ?? log.onLeaseClosed)?.(closed);
  return done;
}

/** The completion `closeTurn` writes for `record` now, by `writer`. */
function closingDone(
  log: LogContext,
  scope: LogScope,
  record: LogRecord,
  outcome: StoredOutcome,
  writer: string,
): DoneRecord {
  const carried = record.undelivered ?? NOTHING_UNDELIVERED;
  const undelivered: Undelivered = {
    notices: carried.notices,
    lost_turns:
      record.turn !== undefined
        ? [...carried.lost_turns, { turn: record.turn, since: record.created_at }]
        : carried.lost_turns,
  };
  const done: DoneRecord = {
    format: 'tailgate.done.v1',
    record: record.record,
    completed_at: log.clock().toISOString(),
    writer,
    status: outcome.status,
    items: [],
    counts: record.counts,
    ...(outcome.error ? { error: outcome.error } : {}),
    ...(record.open_calls ? { open_calls: record.open_calls } : {}),
    ...(isEmpty(undelivered) ? {} : { undelivered }),
  };
  // What the turn spent is its own to store: the chain counts it once it did (log/unbilled.ts).
  const unbilled = [
    ...(record.unbilled ?? []),
    ...(record.turn !== undefined
      ? [{ generation: scope.generation, turn: record.turn, closed_at: done.completed_at }]
      : []),
  ];
  if (unbilled.length > 0) done.unbilled = unbilled;
  return done;
}

/**
 * The newest record as the next claim finds it once it closed what it closes (log/commit.ts): an
 * open model turn whose lease ran out (by `leaseOf` and the log's clock, as the claim judges it)
 * with the completion `closeLapsed` would write (a writer of none), `lease_expired`, naming the
 * turn in `undelivered.lost_turns`; under `interrupt` (the busy policy), one whose lease runs with
 * the completion an interrupt's cancel writes (`cancelTurn`); any other as it is. Nothing is
 * written: for a preview (log/preview-context.ts).
 */
export async function asClaimCloses<Newest extends { record: LogRecord; done: DoneRecord | null }>(
  log: LogContext,
  scope: LogScope,
  newest: Newest,
  interrupts = false,
): Promise<Newest> {
  const { record } = newest;
  if (record.kind !== 'turn' || newest.done) return newest;
  const turn = record.turn ?? 0;
  const lapsed = (await leaseOf(log, scope, record)) <= log.clock().getTime();
  if (!lapsed && !interrupts) return newest;
  const outcome: StoredOutcome = {
    status: 'failed',
    error: lapsed ? leaseExpired(scope.id, turn) : turnCancelled(scope.id, turn, true),
  };
  return { ...newest, done: closingDone(log, scope, record, outcome, '') };
}

/**
 * Whether the turn's webhook intent is in the outbox once `onClaimed` puts it (create-only: one
 * found there counts), false when that put failed.
 */
export async function intentStored(log: LogContext, turn: IntentTurn): Promise<boolean> {
  if (!log.onClaimed) return false;
  return log.onClaimed(turn).then(
    () => true,
    () => false,
  );
}

/**
 * Logs that a turn stands closed though its webhook event (`onClosed`) failed: its intent's
 * drainer delivers it, unless no intent could be stored (`intent` false: lost, unless its
 * claim's put of it landed).
 */
export function eventLeftToOutbox(log: LogContext, closed: ClosedTurn, error: unknown, intent = true): void {
  const turn = `turn ${closed.turn} of session ${closed.scope.id} is closed (${closed.error?.code ?? closed.status})`;
  const left = intent ? "left to the outbox's drainer" : 'lost unless its claim stored its intent';
  log.log(`tailgate: ${turn}, its webhook event ${left}`, error);
}

/** Closes `record`, whose lease ran out, as failed `lease_expired` (see closeTurn). */
export function closeLapsed(
  log: LogContext,
  scope: LogScope,
  record: LogRecord,
  webhookUrl?: string | null,
  successor?: (closed: ClosedTurn) => void,
): Promise<DoneRecord | null> {
  const outcome: StoredOutcome = { status: 'failed', error: leaseExpired(scope.id, record.turn ?? 0) };
  return closeTurn(log, scope, record, outcome, webhookUrl, successor);
}

/** The model a turn's stored request named (undefined: none, the session's or the default ran). */
function requestedModel(record: LogRecord): string | undefined {
  const model = (record.request as { model?: unknown } | undefined)?.model;
  return typeof model === 'string' ? model : undefined;
}

/** The session's own `webhook_url`, read from its config (null when it has none or is gone). */
async function sessionWebhookUrl(log: LogContext, scope: LogScope): Promise<string | null> {
  const key = sessionConfigKey(scope.keyPrefix, scope.id);
  const object = await log.store.get(key);
  return object ? (parseStored(key, object.body, sessionConfigSchema).webhook_url ?? null) : null;
}

/** An open turn's outcome once its lease has run out (closed now); TurnInProgressError before. */
export async function closeIfExpired(log: LogContext, scope: LogScope, record: LogRecord): Promise<StoredOutcome> {
  const expires = await leaseOf(log, scope, record);
  if (expires > log.clock().getTime()) throw heldError(log, scope, record, record.turn ?? 0, expires);
  const done = await closeLapsed(log, scope, record);
  if (done) return done;
  const key = doneKey(scope, record.record);
  const object = await log.store.get(key);
  if (!object) throw new CorruptObjectError(key, 'refused as taken but missing');
  // Buried: packed since it was read; the caller reads the log again.
  if (object.body.length === 0) throw new RecordMissingError(key);
  return parseStored(key, object.body, doneSchema);
}

/** See SessionLog.leaseUntil. */
export async function openLeaseUntil(log: LogContext, id: string, turnNumber: number): Promise<number | undefined> {
  const { newest, scope } = await readHead(log, id);
  const open = newest && newest.record.kind === 'turn' && !newest.done ? newest.record : null;
  return open && open.turn === turnNumber ? renewedLease(log, scope, open) : undefined;
}

/** See SessionLog.closeIfExpired. */
export async function closeIfOpenExpired(
  log: LogContext,
  id: string,
  turnNumber?: number,
): Promise<StoredOutcome | null> {
  const { newest, scope } = await readHead(log, id);
  const open = newest && newest.record.kind === 'turn' && !newest.done ? newest.record : null;
  if (!open || (turnNumber !== undefined && open.turn !== turnNumber)) return null;
  return closeIfExpired(log, scope, open);
}

/**
 * Whether a turn's error (stored, or answered) is an `interrupt`'s cancel (cancelTurn,
 * `details.interrupted`), not a cancel's: closed so with no output, a turn answered at its end is
 * taken out as a dead one (lib/turn/dead-turn.ts), and its 409 may be retried.
 */
export function interruptedBy(error: { code: string | null; details?: unknown } | undefined): boolean {
  return (
    error?.code === TURN_CANCELLED && (error.details as { interrupted?: unknown } | undefined)?.interrupted === true
  );
}

/**
 * Tells `onLapsed` (CommitOptions) of the newest record when it is a turn closed failed by its
 * lapsed lease (`lease_expired`, its process died) or by an `interrupt`'s cancel
 * (interruptedBy), with no output stored, as a claim tells it of one still open whose lease ran
 * out: so the caller that would not close such a turn to follow it does not follow it closed
 * either (lib/turn/dead-turn.ts). Told from the head the claim read, with no read more.
 */
export function tellClosedLapsed(
  newest: { record: LogRecord; done: DoneRecord | null } | null,
  onLapsed: ((lapsed: { turn: number; request: unknown }) => void) | undefined,
): void {
  const done = newest?.done;
  if (!onLapsed || !done || newest.record.kind !== 'turn' || done.items.length > 0) return;
  if (done.status === 'failed' && (done.error?.code === LEASE_EXPIRED || interruptedBy(done.error)))
    onLapsed({ turn: newest.record.turn ?? 0, request: newest.record.request });
}

import { NotNewestTurnError, StorageError, TurnInProgressError, TurnNotOpenError } from '../../errors.ts';
import type { Item } from '../../items.ts';
import { idempotencyKey, recordKey, type LogScope } from '../keys.ts';
import type { QueuedInput } from '../queued-input.ts';
import type { ContextStart, LogItem, LogRecord, SessionConfig, Unbilled } from '../records.ts';
import { SegmentMissingError } from '../segment.ts';
import { MAX_CLAIM_ATTEMPTS, type LogContext } from './context.ts';
import {
  contextOf,
  countsOf,
  isEmpty,
  ledgerOf,
  readHead,
  RecordMissingError,
  recordGroups,
  overflowOf,
  undeliveredOf,
} from './head.ts';
import { findKey } from './idempotency.ts';
import { findAppendKey, indexAppend, type AppendReplay } from './append-key.ts';
import { checkQueuedKey, queuedUnder } from './queue.ts';
import { checkCalls, openCallsOf } from './open-calls.ts';
import { checkRetake, retakenBefore } from './retake.ts';
import { checkBudget } from '../../ledger/budget.ts';
import { addToLedger, hasUsage, type TurnUsage } from '../../ledger/usage.ts';
import { closeLapsed, leaseOf, tellClosedLapsed } from './lease.ts';
import { behindLapsedFence, fenceOf } from './fence.ts';
import { heldError } from './busy-lease.ts';
import type { Base, BeginTurnResult, ClosedTurn } from './types.ts';
import type { OnBusy } from '../fields.ts';
import { baseBefore, EMPTY_BASE, prefetchView, readBase, type PrefetchedView } from './views.ts';
import type { StoredObject } from '../../store/object-store.ts';
import { landCommit } from './land-commit.ts';
import { carry } from './record-carry.ts';
import { flaggedCarry, repeatsOf } from './repeat-flags.ts';
import { overdueView, packScheduleOf, type OverdueView } from './pack-schedule.ts';
import { billStopped, chargesClaim, counted, passedClaim, unbilledOf } from './unbilled.ts';
import { billCharges } from './charges.ts';
import { payOwed } from './owed-charges.ts';

/**
 * Commits and claims: the next record written create-only (an append, a model turn's input, a
 * compaction), what it carries and passes on, and the owner's completion of a turn.
 */
/** What `commit` wrote. */
export interface Commit {
  record: LogRecord;
  config: SessionConfig;
  scope: LogScope;
  previous: NonNullable<LogRecord['recent']>;
  /** Model turns: the newest view and every item after it, before the record's items. */
  base: Base | null;
  /** An append that must pack with a view before it answers (overdueView; see CommitOptions.packsOverdue). */
  overdue?: OverdueView | undefined;
  /** Model turns: the call keys of `base.since`, in order (repeat-flags.ts callKeysOf). */
  sinceKeys?: string[] | undefined;
  /** A retake past records of no items: the first seq of the input it takes again (checkRetake). */
  retaken?: number | undefined;
  /** The etag of the queue's signal as the claim listed it, when set (keys.ts queueSignalKey). */
  queueSignal?: string | undefined;
}

/** For a used idempotency key: the `replay` of its turn instead of a commit. */
export interface Replay {
  replay: Extract<BeginTurnResult, { kind: 'replay' }>;
}

/** What a commit carries from one attempt to the next. */
export interface CommitState {
  /** The random id of the records this commit writes (a lost answer is recognised by it). */
  writer: string;
  /** A put that failed with its outcome unknown: the next head read tells. */
  failure: { error: unknown } | null;
  attempt: number;
  /** A dead turn (its lease ran out) a turn's claim closed: told to `onLeaseClosed` if it stores nothing (claim.ts). */
  lapsed?: ClosedTurn | undefined;
  /** The generation whose queue the claim took up first (`onQueueWaiting`): once each (a delete moves its signal). */
  queueTaken?: string;
}

export function commitState(writer: string = crypto.randomUUID()): CommitState {
  return { writer, failure: null, attempt: 0 };
}

export interface CommitOptions {
  kind: 'append' | 'turn' | 'compact';
  keyHash?: string;
  requestHash?: string;
  request?: unknown;
  context?: ContextStart;
  /** A turn that must follow this one: NotNewestTurnError otherwise (judged after a key's replay). */
  afterTurn?: number;
  /**
   * The caller's own check of the session's config (a turn: that its model can be run), after
   * a key's replay and the session's budget and before anything is written: what it throws refuses
   * the commit.
   */
  check?: (config: SessionConfig) => void | Promise<void>;
  /** Writes what the record references (a turn's images) under `scope`, after every refusal, before its put. */
  beforeRecord?: (scope: LogScope) => Promise<void>;
  /**
   * Take over this turn, claimed already by a record carrying the state's `writer` (a
   * background turn): nothing is written; the turn no longer open is TurnNotOpenError.
   */
  adopt?: number;
  /** A fresh request's key (not a queued input's): refused when a queued input holds it with another request. */
  checkQueued?: boolean;
  /** A compaction's summary: what its model call used, added to the totals the record carries. */
  charge?: TurnUsage;
  /**
   * A manual compaction's claim (compaction-claim.ts): the record carries a lease, and the
   * session's budget is checked first, as a turn's claim does.
   */
  hold?: boolean;
  /** The writer of the caller's own claim, which refuses every other commit while its lease runs. */
  heldBy?: string;
  /**
   * The record of the caller's own claim, whose summary this record charges: a write that passed
   * the claim over named it unbilled, and the record drops it (log/unbilled.ts, passedClaim).
   */
  ownClaim?: number;
  /** The caller packs when `overdue` says so: the record carries none of what its view covers (but in a backoff). */
  packsOverdue?: boolean;
  /** An append as the session's first record or not at all: with a record there, the commit answers that one. */
  onlyFirst?: boolean;
  /** A turn without input that takes the newest turn again (retake.ts checkRetake), judged after a key's replay. */
  retake?: boolean;
  /** A queued input's own claim (its pickup's): the queue's signal does not hold it back. */
  fromQueue?: boolean;
  /** The request's busy policy, else the session's: an `interrupt` goes ahead of queued inputs. */
  onBusy?: OnBusy;
  /**
   * A busy refusal is answered by queuing the input (a native turn under its policy,
   * lib/turn/busy.ts): a retry of an input its key queued, still waiting, is then answered as its
   * enqueue was, judged by none of the checks after the key's (busy or free: TurnInProgressError
   * `queuedKey`). Without it such a retry is judged as any request, and runs the input itself.
   */
  enqueues?: boolean;
  /**
   * Told an open turn whose lease ran out before this commit closes it (its number and its
   * record's request settings), or the newest turn closed so with no output (lease.ts
   * tellClosedLapsed; also behind the fence of a delete cut short, its lease run out: fence.ts
   * behindLapsedFence): what it throws refuses the commit, nothing written (a refusal its caller
   * answers by starting again: LapsedTurnRefused, log/claim.ts).
   */
  onLapsed?: (lapsed: { turn: number; request: unknown }) => void;
}

/** A record ready to be put create-only: what `prepareCommit` read and decided. */
export interface PreparedCommit extends Commit {
  key: string;
}

/**
 * Writes the next record (create-only) holding `input`. Closes an expired open turn first;
 * an unexpired one is TurnInProgressError. Retries when another writer took the number.
 * A keyed turn whose key was used already gets `replay` instead (see beginTurn).
 */
export async function commit(
  log: LogContext,
  id: string,
  input: Item[],
  options: CommitOptions,
): Promise<Commit | Replay | AppendReplay> {
  const state = commitState();
  for (; state.attempt < MAX_CLAIM_ATTEMPTS; state.attempt++) {
    const prepared = await prepareCommit(log, id, input, options, state);
    if (!prepared) continue;
    if (!('key' in prepared)) return prepared;
    if (await landCommit(log, prepared, state)) return prepared;
  }
  throw new StorageError(`session ${id}: too many concurrent writers`);
}

/**
 * One attempt's reads: the head (config, listing, newest record with its completion, and in
 * the same round trip the newest view and a keyed turn's `idem/`), then the record to put.
 * Returns what was written already (our own record, found after a lost answer; a compaction
 * overtaken), a replay, the record to put, or null to read again.
 */
export async function prepareCommit(
  log: LogContext,
  id: string,
  input: Item[],
  options: CommitOptions,
  state: CommitState,
): Promise<Commit | Replay | AppendReplay | PreparedCommit | null> {
  const { writer } = state;
  let view: PrefetchedView | undefined;
  let idem: Promise<StoredObject | null> | undefined;
  let queued: Promise<QueuedInput | null> | undefined;
  let queuedRetry = false;
  // Reads that need only the listing go out with the newest record's: the view a turn reads,
  // and `idem/` (read after the listing answered, as the Idempotency-Key protocol requires).
  const head = await readHead(log, id, 100, (scope, cursor, newestRecord) => {
    if (options.kind === 'turn') view = prefetchView(log, cursor, newestRecord);
    if (options.keyHash) {
      idem = log.store.get(idempotencyKey(scope, options.keyHash));
      idem.catch(() => undefined);
    }
    if (options.keyHash && options.checkQueued) queued = queuedUnder(log, scope, options.keyHash);
  });
  const { scope } = head;
  // Charges a delete of the newest turn left owed go on to this generation (none: no call). One
  // carried landed after the listing: read again, so the record, the budget check and the row that
  // a write from the record's state writes (an append's) count it.
  if (head.config.carry_from) {
    let moved = 0;
    await payOwed(log, head.config, head.configEtag, 1, () => moved++);
    if (moved > 0) return null;
  }
  let newest = head.newest;
  // The queue's signal as listed, when raised (keys.ts queueSignalKey): its etag.
  const signal = head.cursor.queueSignal;
  const waiting = signal && signal.size > 0 ? signal.etag : undefined;
  if (options.adopt !== undefined && !(newest?.record.writer === writer && !newest.done))
    throw new TurnNotOpenError(id, options.adopt);
  // A put that failed or lost a race may have landed (a lost answer): the newest record is ours, nothing is repeated.
  if (newest && newest.record.writer === writer) {
    const own = newest.record;
    const base =
      options.kind === 'turn'
        ? baseBefore(await readBase(log, scope, { record: own, done: null }, head.cursor, own.items), own.first_seq)
        : null;
    const retaken = options.kind === 'turn' ? await retakenBefore(log, id, own) : undefined;
    return { record: own, config: head.config, previous: own.recent ?? [], base, scope, retaken, queueSignal: waiting };
  }
  if (state.failure) throw state.failure.error;
  if (options.onlyFirst && newest)
    return { record: newest.record, config: head.config, previous: newest.record.recent ?? [], base: null, scope };
  if (options.keyHash && options.kind === 'append') {
    // A keyed append older than the newest record was indexed before that record (indexAppend).
    const appended = await findAppendKey(log, scope, newest, options.keyHash, options.requestHash, idem);
    if (appended) return appended;
    // A queued input holds the key: its pickup would take the append for its turn and drop it.
    if (queued) checkQueuedKey(await queued, options.requestHash);
  } else if (options.keyHash) {
    // The head is read before the index: a keyed turn older than the newest record was
    // closed, so indexed, before that record was written.
    let replay: Awaited<ReturnType<typeof findKey>>;
    try {
      replay = await findKey(log, scope, newest, options.keyHash, options.requestHash, idem);
    } catch (error) {
      // Packed away since the listing: list again.
      if (error instanceof RecordMissingError) return null;
      throw error;
    }
    // The key's turn may be newer than the head read (the index is read after it).
    if (replay) return { replay };
    // A queued input holds the key: another request under it is refused, as it would be once
    // that input ran. The same request takes up the queue when the session is free, and stores
    // nothing: while its input waits, it is answered as its enqueue was (lib/turn/busy.ts), whatever
    // the session's budget, config, policy or open calls since (its turn judges them when it runs).
    const entry = queued ? await queued : null;
    checkQueuedKey(entry, options.requestHash);
    queuedRetry = entry !== null && options.enqueues === true;
  }
  // Stopped turns' spend and listed charges first (log/unbilled.ts, log/charges.ts; none: no read), then the budget.
  const billed = await billStopped(log, scope, unbilledOf(newest), ledgerOf(newest));
  const { ledger, charged: charges } = await billCharges(log, scope, head.cursor.charges, newest, billed.ledger);
  // A retry of an input still queued under its key is judged by none of the checks below (see above).
  if (!queuedRetry && (options.kind === 'turn' || options.hold)) checkBudget(head.config.budget, ledger);
  if (!queuedRetry) await options.check?.(head.config);
  // The input is checked against the open calls before a busy session refuses it: a bad input
  // is a 400 whatever runs (so neither queued nor interrupting anything). Closing an expired
  // turn below adds no item, so the calls it leaves open are these. An input that must follow
  // an older turn is not judged by the newest one's calls: its caller branches (a fork at that
  // turn, where they are judged).
  const openCalls = openCallsOf(newest);
  const behind = options.afterTurn !== undefined && countsOf(newest).turns !== options.afterTurn;
  const openAfter = openCalls === null || behind || queuedRetry ? null : checkCalls(input, openCalls);
  // Busy, such a retry is answered as its enqueue was whatever the policy; free, once its queue was taken up (below).
  const held = (record: LogRecord, turn: number, until: number) =>
    Object.assign(heldError(log, scope, record, turn, until), { queuedKey: queuedRetry });
  if (newest && newest.record.kind === 'turn' && !newest.done) {
    const open = newest.record;
    const expires = await leaseOf(log, scope, open);
    if (expires > log.clock().getTime()) throw held(open, open.turn ?? 0, expires);
    options.onLapsed?.({ turn: open.turn ?? 0, request: open.request });
    // A model turn claims the session next: its own close takes up the queue.
    const successor =
      options.kind === 'turn'
        ? (closed: ClosedTurn) => {
            state.lapsed = closed;
          }
        : undefined;
    const done = await closeLapsed(log, scope, open, head.config.webhook_url, successor);
    if (!done) return null;
    newest = { record: open, done };
  } else if (options.onLapsed) {
    // A dead turn may stand behind the fence of a take-out cut short, once its lease ran out.
    tellClosedLapsed((await behindLapsedFence(log, scope, newest)) ?? newest, options.onLapsed);
  }
  // A delete of the newest turn moving the session back (log/rewind.ts) holds it for its lease.
  // So does a manual compaction's claim, for its lease (renewed beside it while it summarizes).
  const fenced = await fenceOf(log, scope, newest, options.heldBy);
  if (fenced > log.clock().getTime()) throw held(newest!.record, countsOf(newest).turns, fenced);
  // Inputs queued before this request go first: a new model turn finding the session idle and
  // the queue's signal set has the oldest taken up (a pickup, lib/turn/busy.ts), then reads again.
  // An `interrupt` runs at once, the queued inputs waiting for it (as behind the turn it cancels).
  const interrupts = (options.onBusy ?? head.config.on_busy) === 'interrupt';
  const newTurn = options.kind === 'turn' && !options.fromQueue && options.adopt === undefined && !interrupts;
  if (waiting && newTurn && log.onQueueWaiting && state.queueTaken !== scope.generation) {
    state.queueTaken = scope.generation;
    await log.onQueueWaiting(scope, waiting);
    return null;
  }
  if (queuedRetry) throw Object.assign(new TurnInProgressError(id, countsOf(newest).turns), { queuedKey: true });
  const retaken = options.retake ? await checkRetake(log, id, newest) : undefined;
  const current = contextOf(newest);
  // A compaction overtaken by a newer one (its claim lapsed) still charges its summary, with the newer context.
  const overtaken = current && options.context && current.base_record >= options.context.base_record;
  const context = (overtaken ? current : options.context) ?? current;
  const counts = countsOf(newest);
  if (options.afterTurn !== undefined && counts.turns !== options.afterTurn)
    throw new NotNewestTurnError(id, options.afterTurn, counts.turns);
  // A model turn reads the newest view and what follows it before committing, so a
  // corrupt one fails the claim with nothing stored.
  let base: Base | null = null;
  if (options.kind === 'turn') {
    try {
      base = newest ? await readBase(log, scope, newest, head.cursor, input, view) : EMPTY_BASE;
    } catch (error) {
      // Packed away since the listing: list again.
      if (error instanceof SegmentMissingError || error instanceof RecordMissingError) return null;
      throw error;
    }
  }
  await indexAppend(log, scope, newest?.record);
  await options.beforeRecord?.(scope);
  const now = log.clock();
  const createdAt = now.toISOString();
  const firstSeq = counts.items + 1;
  const items = input.map((item, index) => ({ ...item, seq: firstSeq + index, created_at: createdAt }) as LogItem);
  const number = (newest?.record.record ?? 0) + 1;
  const listedView = head.cursor.views.find((view) => view.record < number);
  const viewRecord = listedView?.record ?? 0;
  const carriedGroups = newest ? carry(log, newest, context?.start_seq, viewRecord) : [];
  const flagged = flaggedCarry(log.viewPolicy, base, newest, carriedGroups);
  const repeats = options.kind === 'append' ? await repeatsOf(log, scope, listedView, newest, items) : undefined;
  const schedule = packScheduleOf(log.store);
  const overdue =
    options.kind === 'append' ? overdueView(schedule, scope, listedView, number, flagged, items) : undefined;
  // The view such an append's caller writes covers the records after the one listed: carried,
  // they would be read twice by a turn after it (its pack takes their items from `overdue.held`).
  // Such a record carries nothing, not the context's records before the view alone: a carry is
  // whole records up to its own, or readers that list below its first would skip the gap.
  const covered = overdue && options.packsOverdue && !schedule.backingOff(id, scope.generation);
  const recent = covered ? [] : flagged.recent;
  const { sinceKeys } = flagged;
  const turn = options.kind === 'turn' ? counts.turns + 1 : undefined;
  const undelivered = undeliveredOf(newest);
  const overflow = overflowOf(newest);
  const totals = options.charge ? addToLedger(ledger, options.charge, 0) : ledger;
  // A compaction's claim passed over (its lease ran out) is named: its summary is stored apart (log/unbilled.ts).
  const passed = passedClaim(scope, newest, createdAt, options.heldBy);
  const charged = (entry: Unbilled[number]) => chargesClaim(scope, entry, options.ownClaim);
  const unbilled = [...unbilledOf(newest).filter((entry) => !counted(billed, entry) && !charged(entry)), ...passed];
  const record: LogRecord = {
    format: 'tailgate.record.v1',
    record: number,
    kind: options.kind,
    created_at: createdAt,
    writer,
    first_seq: firstSeq,
    items,
    ...(repeats ? { repeats } : {}),
    counts: {
      items: counts.items + items.length,
      turns: turn ?? counts.turns,
      tool_calls: counts.tool_calls + items.filter((item) => item.type === 'function_call').length,
    },
    ...(recent.length > 0 ? { recent } : {}),
    ...(turn !== undefined ? { turn } : {}),
    ...(turn !== undefined || options.hold
      ? { lease_expires_at: new Date(now.getTime() + log.leaseMs).toISOString() }
      : {}),
    ...(options.keyHash ? { idempotency_key_sha256: options.keyHash } : {}),
    ...(options.keyHash && options.requestHash ? { request_sha256: options.requestHash } : {}),
    ...(options.request !== undefined ? { request: options.request } : {}),
    ...(context ? { context } : {}),
    ...(overflow ? { overflow } : {}),
    ...(openAfter ? { open_calls: openAfter } : {}),
    ...(isEmpty(undelivered) ? {} : { undelivered }),
    ...(hasUsage(totals) ? { ledger: totals } : {}),
    ...(unbilled.length > 0 ? { unbilled } : {}),
    ...(charges.length > 0 ? { charged: charges } : {}),
  };
  // The records the claim has read (carried, or at least the previous one): the tail read
  // continues below them with the claim's own listing.
  const previous = recent.length > 0 || !newest ? recent : recordGroups(newest).slice(-1);
  const prepared = { key: recordKey(scope, number), record, config: head.config, previous, base, scope, overdue };
  return { ...prepared, sinceKeys, retaken, queueSignal: waiting };
}

export { landCommit };

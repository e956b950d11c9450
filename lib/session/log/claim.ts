import { z } from 'zod';
import { StorageError } from '../../errors.ts';
import { SessionDeletedError } from '../../session-deleted.ts';
import { sha256Hex } from '../../hash.ts';
import type { Item, StoredItem } from '../../items.ts';
import { claimInput } from './claim-input.ts';
import { doneKey } from '../keys.ts';
import type { OnBusy } from '../fields.ts';
import { doneSchema, MAX_OPEN_CALLS, parseStored, type DoneRecord, type LogItem } from '../records.ts';
import type { SegmentTurn } from '../segment-records.ts';
import { LEASE_EXPIRED, SESSION_DELETED, TurnClosedError } from '../../errors.ts';
import {
  commitState,
  landCommit,
  prepareCommit,
  type Commit,
  type CommitOptions,
  type CommitState,
  type PreparedCommit,
} from './commit.ts';
import { toSessionRecord } from './config-object.ts';
import { MAX_CLAIM_ATTEMPTS, checkInvariant, type LogContext } from './context.ts';
import { isEmpty, NOTHING_UNDELIVERED, withFreshListing } from './head.ts';
import { ownerClosed } from './owner-closed.ts';
import { billStopped } from './unbilled.ts';
import { callKeysOf, turnRepeats } from './repeat-flags.ts';
import { indexKey } from './idempotency-index.ts';
import { packedCloser, packedTurn } from './packed-turn.ts';
import type { BeginTurnResult, ClaimLanding, OpenTurn, TurnOutcome } from './types.ts';
import { aggregatesOf, EMPTY_BASE } from './views.ts';
import { addToLedger, EMPTY_LEDGER, type Ledger } from '../../ledger/usage.ts';
import { outcomeSchema } from './outcome-schema.ts';

/**
 * A model turn's claim (its record, create-only, with an Idempotency-Key's `idem/` once it
 * landed) and its owner's completion.
 */

/** An idempotency key as a request gives it. */
const idempotencyKeySchema = z.string().min(1).max(256);

export interface ClaimOptions {
  input: Item[];
  idempotencyKey?: string;
  /** The SHA-256 of an idempotency key, given instead of the key (a queued input's). */
  keyHash?: string;
  requestHash?: string;
  request?: unknown;
  /** The turn must follow this one (else NotNewestTurnError, after a replay of the key). */
  afterTurn?: number;
  /** Refuses the turn, before anything is written, for what the session's config says. */
  check?: CommitOptions['check'];
  /** Writes what the record references, once nothing refuses the claim (see CommitOptions.beforeRecord). */
  beforeRecord?: CommitOptions['beforeRecord'];
  /**
   * Writes what the record references without holding the attempt back (so it refuses
   * nothing): started once nothing refuses the claim, its record's put waits for it, and the
   * turn goes on meanwhile (a failed write fails `landed`); the record's lease runs from its put.
   */
  beforePut?: CommitOptions['beforeRecord'];
  /** The random id the record carries (a background turn's runner takes it over by it). */
  writer?: string;
  /** Take over this claimed turn instead of claiming one (see CommitOptions.adopt). */
  adopt?: number;
  /** An empty input taking the newest turn again, which must have failed (see CommitOptions.retake). */
  retake?: boolean;
  /** A queued input's own claim (see CommitOptions.fromQueue). */
  fromQueue?: boolean;
  /** The request's busy policy, if it names one (see CommitOptions.onBusy). */
  onBusy?: OnBusy;
  /** A busy refusal is answered by queuing the input (see CommitOptions.enqueues). */
  enqueues?: boolean;
  /** Judges an expired open turn before the claim closes it (see CommitOptions.onLapsed). */
  onLapsed?: CommitOptions['onLapsed'];
}

/**
 * What a claim's `onLapsed` throws to refuse closing an expired open turn so that its caller
 * takes the request up again: the claim ran no turn, so no turn is told failed for it
 * (lib/turn/observe.ts), as none is for a claim refused for not following `afterTurn`.
 */
export class LapsedTurnRefused extends Error {}

/**
 * One attempt of a claim: the turn as it will be once its record lands, and that put, already
 * started. `landed` is false when another writer took the number (read again: `next`).
 */
export type ClaimAttempt =
  | Extract<BeginTurnResult, { kind: 'replay' }>
  | { kind: 'claimed'; turn: OpenTurn; landed: Promise<boolean> };

/** See SessionLog.claimTurn. */
export class TurnClaim {
  readonly #log: LogContext;
  readonly #id: string;
  readonly #input: Item[];
  readonly #options: ClaimOptions;
  readonly #keyHash: string | undefined;
  readonly #state: CommitState;

  constructor(log: LogContext, id: string, options: ClaimOptions) {
    this.#log = log;
    this.#id = id;
    this.#options = options;
    this.#state = commitState(options.writer);
    this.#input = claimInput(options.input);
    this.#keyHash =
      options.keyHash ??
      (options.idempotencyKey === undefined
        ? undefined
        : sha256Hex(checkInvariant(idempotencyKeySchema, options.idempotencyKey)));
  }

  /**
   * Reads the head and starts the put of the next record (see ClaimAttempt). A claim that closed
   * a dead turn on its way (its lease ran out) and then stores nothing (refused, failed, or a
   * replay) tells `onLeaseClosed`, so the inputs queued behind that turn do not wait for it.
   */
  async next(): Promise<ClaimAttempt> {
    let attempt: ClaimAttempt;
    try {
      attempt = await this.#next();
    } catch (error) {
      this.#storedNothing();
      throw error;
    }
    if (attempt.kind === 'replay') this.#storedNothing();
    else
      attempt.landed.then(
        (ok) => {
          if (ok) this.#state.lapsed = undefined;
        },
        () => this.#storedNothing(),
      );
    return attempt;
  }

  /** Hands the close of a dead turn this claim made to `onLeaseClosed` (once). */
  #storedNothing(): void {
    const { lapsed } = this.#state;
    this.#state.lapsed = undefined;
    if (lapsed) this.#log.onLeaseClosed?.(lapsed);
  }

  async #next(): Promise<ClaimAttempt> {
    const { requestHash, request, afterTurn, check, beforeRecord, adopt, retake, fromQueue, onBusy, onLapsed } =
      this.#options;
    const { enqueues } = this.#options;
    const options = {
      kind: 'turn' as const,
      ...(adopt !== undefined ? { adopt } : {}),
      ...(this.#keyHash ? { keyHash: this.#keyHash } : {}),
      ...(this.#options.idempotencyKey !== undefined ? { checkQueued: true } : {}),
      ...(requestHash ? { requestHash } : {}),
      ...(request !== undefined ? { request } : {}),
      ...(afterTurn !== undefined ? { afterTurn } : {}),
      ...(check !== undefined ? { check } : {}),
      ...(beforeRecord !== undefined ? { beforeRecord } : {}),
      ...(retake ? { retake } : {}),
      ...(fromQueue ? { fromQueue } : {}),
      ...(onBusy ? { onBusy } : {}),
      ...(enqueues ? { enqueues } : {}),
      ...(onLapsed ? { onLapsed } : {}),
    };
    for (; this.#state.attempt < MAX_CLAIM_ATTEMPTS; this.#state.attempt++) {
      const prepared = await prepareCommit(this.#log, this.#id, this.#input, options, this.#state);
      if (!prepared) continue;
      if ('replay' in prepared) return prepared.replay;
      if ('appended' in prepared) throw new Error('a turn was answered with an append');
      let land: (landing: ClaimLanding) => void = () => undefined;
      const landing = new Promise<ClaimLanding>((resolve) => {
        land = resolve;
      });
      const turn = this.#openTurn(prepared, landing);
      const { onClaimed } = this.#log;
      const { beforePut } = this.#options;
      // After a write beside it, the record's lease runs from its put, as it would have without.
      const claim = !('key' in prepared)
        ? Promise.resolve(true)
        : beforePut
          ? beforePut(prepared.scope).then(() => landCommit(this.#log, leasedFromNow(this.#log, prepared), this.#state))
          : landCommit(this.#log, prepared, this.#state);
      // The webhook intent goes with a new claim's put, in its round (an adopted record's claim
      // put it); when it fails, the completion writes it before its `.done`.
      const hooked = 'key' in prepared && onClaimed ? succeeded(onClaimed(turn)) : undefined;
      this.#state.attempt++;
      // Once the record is there the key is indexed, so the completion does not wait for it
      // (it writes `idem/` itself when this failed).
      const landed = Promise.all([claim, hooked]).then(async ([ok, hookRan]) => {
        const keyIndexed =
          ok &&
          turn.keyHash !== undefined &&
          (await succeeded(indexKey(this.#log, turn.scope, turn.keyHash, turn.record, turn.requestHash)));
        land({ keyIndexed, intent: hookRan === undefined ? 'unknown' : hookRan ? 'stored' : 'failed' });
        return ok;
      });
      // A put that failed may still have landed: the completion then does both again.
      landed.catch(() => land({ keyIndexed: false, intent: hooked ? 'failed' : 'unknown' }));
      return { kind: 'claimed', turn, landed };
    }
    throw new StorageError(`session ${this.#id}: too many concurrent writers`);
  }

  #openTurn(committed: Commit, landing: Promise<ClaimLanding>): OpenTurn {
    const { record, config, previous, base: claimed, scope, sinceKeys } = committed;
    const base = claimed ?? EMPTY_BASE;
    const keys = sinceKeys ? [...sinceKeys, ...callKeysOf(this.#log.viewPolicy, record.items)] : undefined;
    // An adopted record carries its key's hash and request hash itself.
    const keyHash = record.idempotency_key_sha256 ?? this.#keyHash;
    const requestHash = record.request_sha256 ?? this.#options.requestHash;
    const { aggregates } = aggregatesOf(
      this.#log.viewPolicy,
      { ...base, since: [...base.since, ...record.items] },
      true,
      keys,
    );
    // A retake (a record without items claimed as one, or adopted: only a retake stores a
    // background turn without input) takes the failed turn before it again (and a chain of such
    // turns, the one before them): its input is the newest group of items the claim read. Any
    // other turn without input (a library caller's) keeps nothing whole, as the preview does but
    // after a failed turn (the turn an empty input takes then).
    const retakes = record.items.length === 0 && (this.#options.retake || this.#options.adopt !== undefined);
    const retaken = retakes
      ? (committed.retaken ?? previous.findLast((group) => group.items.length > 0)?.items[0]?.seq)
      : undefined;
    // Frozen: nothing writes the claim after it is made (what a turn changes is in its outcome).
    return Object.freeze({
      scope,
      session: toSessionRecord(config, record.counts, record.ledger ?? EMPTY_LEDGER),
      turn: record.turn!,
      input: record.items as StoredItem[],
      aggregates,
      leaseExpiresAt: record.lease_expires_at!,
      claimedAt: record.created_at,
      record: record.record,
      counts: record.counts,
      inputRecords: record.items,
      carried: previous.flatMap((group) => group.items),
      carriedFromRecord: previous[0]?.record ?? record.record,
      base,
      ...(sinceKeys ? { sinceKeys: new Set(sinceKeys) } : {}),
      context: record.context ?? null,
      overflow: record.overflow ?? null,
      writer: crypto.randomUUID(),
      ...(keyHash ? { keyHash } : {}),
      ...(requestHash ? { requestHash } : {}),
      ...(record.request !== undefined ? { request: record.request } : {}),
      landing,
      ...(retaken !== undefined ? { retaken } : {}),
      openCalls: record.open_calls ?? null,
      undelivered: record.undelivered ?? NOTHING_UNDELIVERED,
      ledger: record.ledger ?? EMPTY_LEDGER,
      unbilled: record.unbilled ?? [],
      ...(committed.queueSignal !== undefined ? { queueSignal: committed.queueSignal } : {}),
    });
  }
}

/** See SessionLog.beginTurn: a claim whose record has landed before this resolves. */
export async function beginTurn(log: LogContext, id: string, options: ClaimOptions): Promise<BeginTurnResult> {
  const claim = new TurnClaim(log, id, options);
  for (;;) {
    const attempt = await claim.next();
    if (attempt.kind === 'replay') return attempt;
    if (await attempt.landed) return { kind: 'claimed', turn: attempt.turn };
  }
}

/**
 * The session's totals after the turn: a completed one's usage (a failed one's whose model
 * answered, as no turn), and the summary of its compaction as no turn, whatever became of the
 * turn (the context start it moved stays). Undefined: the record's stand.
 */
function totalsAfter(ledger: Ledger, { status, usage, summaryUsage }: TurnOutcome): Ledger | undefined {
  const turned = usage ? addToLedger(ledger, usage, status === 'completed' ? 1 : 0) : undefined;
  return summaryUsage ? addToLedger(turned ?? ledger, summaryUsage, 0) : turned;
}

/** See SessionLog.completeTurn. */
export async function completeTurn(log: LogContext, turn: OpenTurn, result: TurnOutcome): Promise<StoredItem[]> {
  const outcome = checkInvariant(outcomeSchema, result);
  const createdAt = log.clock().toISOString();
  const stored = outcome.output.map(
    (item, index) => ({ ...item, seq: turn.counts.items + 1 + index, created_at: createdAt }) as StoredItem,
  );
  const items = stored as LogItem[];
  const writer = turn.writer;
  const undelivered = result.undelivered && !isEmpty(result.undelivered) ? result.undelivered : null;
  const repeats = turnRepeats(log, turn, items);
  // What turns closed by someone else spent, once stored, counts here too (log/unbilled.ts).
  const billed = await billStopped(log, turn.scope, turn.unbilled, turn.ledger);
  const totals = totalsAfter(billed.ledger, result) ?? (billed.changed ? billed.ledger : undefined);
  const done: DoneRecord = {
    format: 'tailgate.done.v1',
    record: turn.record,
    completed_at: createdAt,
    writer,
    status: outcome.status,
    items,
    ...(repeats ? { repeats } : {}),
    counts: {
      items: turn.counts.items + stored.length,
      turns: turn.counts.turns,
      tool_calls: turn.counts.tool_calls + stored.filter((item) => item.type === 'function_call').length,
    },
    receipt: outcome.receipt,
    ...(outcome.response !== undefined ? { response: outcome.response } : {}),
    ...(outcome.error ? { error: outcome.error } : {}),
    // Only a moved context: otherwise the record's own `context` stands.
    ...(result.context ? { context: result.context } : {}),
    ...(result.overflow ? { overflow: result.overflow } : {}),
    ...(turn.openCalls ? { open_calls: openCallsAfter(turn.openCalls, stored) } : {}),
    ...(undelivered ? { undelivered } : {}),
    ...(totals ? { ledger: totals } : {}),
    ...(billed.unbilled.length > 0 ? { unbilled: billed.unbilled } : {}),
  };
  const landing = await turn.landing;
  // Indexed at the claim, unless that write failed: then here, still before the completion.
  if (turn.keyHash && !landing.keyIndexed) await indexKey(log, turn.scope, turn.keyHash, turn.record, turn.requestHash);
  // Failing again, it is left to the event that follows the `.done` (the session stays usable).
  const intentStored =
    landing.intent === 'failed' && log.onClaimed ? await succeeded(log.onClaimed(turn)) : landing.intent === 'stored';
  const closedWith = (closed: DoneRecord, spent: Parameters<typeof ownerClosed>[3]) =>
    ownerClosed(log, turn, closed, spent, stored, intentStored);
  const key = doneKey(turn.scope, turn.record);
  let failure: { error: unknown } | null = null;
  let landed = false;
  try {
    landed = !!(await log.store.put(key, JSON.stringify(done), {
      onlyIfAbsent: true,
      contentType: 'application/json',
    }));
  } catch (error) {
    failure = { error };
  }
  // Its event's failure is not the put's: the completion is not read back and told again.
  if (landed) return await closedWith(done, result);
  // Refused or failed: it may be our own write whose answer was lost.
  const existing = await log.store.get(key);
  // Buried: packed since, closed by us (a lost answer: the segment keeps this completion) or by someone else.
  // Another's close is refused with the error its segment line keeps (a cancel's, an interrupt's).
  if (existing && existing.body.length === 0) {
    const packed = await withFreshListing(() => packedTurn(log, turn.scope, turn.record));
    if (packedAsWritten(packed, done)) return await closedWith(done, result);
    const closer = packedCloser(packed);
    throw new TurnClosedError(turn.scope.id, turn.turn, closer.code, closer.details);
  }
  if (existing) {
    const closed = parseStored(key, existing.body, doneSchema);
    // Ours (a lost answer): the stored completion is the outcome, whatever this call carried.
    if (closed.writer === writer) return await closedWith(closed, closed.status === result.status ? result : undefined);
    // Its owner removes that fence once its attempt ended (leaveDeleted, log/lease.ts).
    if (closed.error?.code === SESSION_DELETED) throw new SessionDeletedError(turn.scope.id, turn.turn);
    throw new TurnClosedError(turn.scope.id, turn.turn, closed.error?.code ?? LEASE_EXPIRED, closed.error?.details);
  }
  if (failure) throw failure.error;
  throw new TurnClosedError(turn.scope.id, turn.turn, LEASE_EXPIRED);
}

/**
 * Whether the segment's line of the turn is `done`: its status, completion time and response
 * (a line keeps no writer; another closer's completion has its own time and its own status).
 */
function packedAsWritten(packed: SegmentTurn | null, done: DoneRecord): boolean {
  return (
    packed?.status === done.status &&
    packed.completed_at === done.completed_at &&
    JSON.stringify(packed.response) === JSON.stringify(done.response)
  );
}

/** The prepared record with its lease run from now (never shortened). */
function leasedFromNow(log: LogContext, prepared: PreparedCommit): PreparedCommit {
  const { lease_expires_at: lease } = prepared.record;
  if (lease === undefined) return prepared;
  const expires = new Date(Math.max(Date.parse(lease), log.clock().getTime() + log.leaseMs)).toISOString();
  return { ...prepared, record: { ...prepared.record, lease_expires_at: expires } };
}

/** Whether `work` succeeded (a failure is left to the completion, which does it again). */
function succeeded(work: Promise<unknown>): Promise<boolean> {
  return work.then(
    () => true,
    () => false,
  );
}

/** The open calls after a model's output (a model is not refused: its items are what it said). */
function openCallsAfter(open: readonly string[], output: readonly StoredItem[]): string[] {
  const pending = new Set(open);
  for (const item of output) {
    if (item.type === 'function_call') pending.add(item.call_id);
    else if (item.type === 'function_call_output') pending.delete(item.call_id);
  }
  return [...pending].slice(-MAX_OPEN_CALLS);
}

import { z } from 'zod';
import { NotFoundError, InvalidRequestError, StorageError } from '../../errors.ts';
import { sha256Hex } from '../../hash.ts';
import { itemSchema, type Item, type StoredItem } from '../../items.ts';
import { doneKey, recordKey, type LogScope } from '../keys.ts';
import {
  doneSchema,
  MAX_OPEN_CALLS,
  parseStored,
  recordSchema,
  type ContextStart,
  type DoneRecord,
  type LogItem,
  type LogRecord,
  type SessionConfig,
  type TurnStatus,
  type Undelivered,
} from '../records.ts';
import { SegmentMissingError } from '../segment.ts';
import { LEASE_EXPIRED, SESSION_DELETED, TURN_CANCELLED, TurnClosedError } from '../turn-errors.ts';
import { TurnInProgressError } from '../turn-in-progress-error.ts';
import { toSessionRecord } from './config-object.ts';
import { backoff, MAX_CLAIM_ATTEMPTS, parseInput, type LogContext } from './context.ts';
import {
  contextOf,
  countsOf,
  isEmpty,
  NOTHING_UNDELIVERED,
  readHead,
  RecordMissingError,
  recordGroups,
  undeliveredOf,
  type Head,
} from './head.ts';
import { findKey, indexKey } from './idempotency.ts';
import { closeTurn, leaseOf } from './lease.ts';
import type { BeginTurnResult, OpenTurn } from './types.ts';
import { aggregatesOf, EMPTY_BASE, readBase, type Base } from './views.ts';

/**
 * Commits and claims: the next record written create-only (an append, a model turn's input, a
 * compaction), the records it carries, the calls still open and the notices not yet
 * delivered it passes on, and the owner's completion of a turn.
 */

/** An idempotency key as a request gives it. */
const idempotencyKeySchema = z.string().min(1).max(256);

const itemsSchema = z.array(itemSchema).min(1);
const outcomeSchema = z.object({
  status: z.enum(['completed', 'failed', 'aborted']),
  output: z.array(itemSchema),
  receipt: z.unknown(),
  response: z.unknown().optional(),
  error: z.object({ code: z.string(), message: z.string(), details: z.unknown().optional() }).strict().optional(),
});

/** What `commit` wrote. */
interface Commit {
  record: LogRecord;
  config: SessionConfig;
  scope: LogScope;
  previous: NonNullable<LogRecord['recent']>;
  /** Model turns: the newest view and every item after it, before the record's items. */
  base: Base | null;
}

/** For a used idempotency key: the `replay` of its turn instead of a commit. */
interface Replay {
  replay: Extract<BeginTurnResult, { kind: 'replay' }>;
}

/** How a turn ended, as its owner completes it (see SessionLog.completeTurn). */
export interface TurnResult {
  status: TurnStatus;
  output: Item[];
  receipt: unknown;
  response?: unknown;
  error?: { code: string; message: string; details?: unknown };
  /** Notices this turn consumed or carried that no model saw (a failed or aborted turn). */
  undelivered?: Undelivered;
}

/** See SessionLog.append. */
export async function appendItems(
  log: LogContext,
  id: string,
  items: Item[],
): Promise<{ first_seq: number; last_seq: number; record: number }> {
  const input = parseInput(itemsSchema, items);
  const { record } = written(await commit(log, id, input, { kind: 'append' }));
  return { first_seq: record.first_seq, last_seq: record.first_seq + input.length - 1, record: record.record };
}

/** See SessionLog.beginTurn. */
export async function beginTurn(
  log: LogContext,
  id: string,
  options: { input: Item[]; idempotencyKey?: string; requestHash?: string; request?: unknown },
): Promise<BeginTurnResult> {
  const input = parseInput(z.array(itemSchema), options.input);
  const keyHash =
    options.idempotencyKey === undefined
      ? undefined
      : sha256Hex(parseInput(idempotencyKeySchema, options.idempotencyKey));
  const committed = await commit(log, id, input, {
    kind: 'turn',
    ...(keyHash ? { keyHash } : {}),
    ...(options.requestHash ? { requestHash: options.requestHash } : {}),
    ...(options.request !== undefined ? { request: options.request } : {}),
  });
  if ('replay' in committed) return committed.replay;
  const { record, config, previous, base: claimed, scope } = committed;
  const base = claimed ?? EMPTY_BASE;
  const { aggregates } = aggregatesOf(log.viewPolicy, { ...base, since: [...base.since, ...record.items] });
  const session = toSessionRecord(config, record.counts);
  const turn: OpenTurn = {
    sessionId: id,
    scope,
    session,
    turn: record.turn!,
    input: record.items as StoredItem[],
    aggregates,
    leaseExpiresAt: record.lease_expires_at!,
    record: record.record,
    counts: record.counts,
    inputRecords: record.items,
    carried: previous.flatMap((group) => group.items),
    carriedFromRecord: previous[0]?.record ?? record.record,
    base,
    context: record.context ?? null,
    contextMoved: false,
    readPastView: false,
    writer: crypto.randomUUID(),
    ...(keyHash ? { keyHash } : {}),
    ...(options.requestHash ? { requestHash: options.requestHash } : {}),
    openCalls: record.open_calls ?? null,
    undelivered: record.undelivered ?? NOTHING_UNDELIVERED,
  };
  return { kind: 'claimed', turn };
}

/** See SessionLog.completeTurn. */
export async function completeTurn(log: LogContext, turn: OpenTurn, result: TurnResult): Promise<StoredItem[]> {
  const outcome = parseInput(outcomeSchema, result);
  const createdAt = log.clock().toISOString();
  const stored = outcome.output.map(
    (item, index) => ({ ...item, seq: turn.counts.items + 1 + index, created_at: createdAt }) as StoredItem,
  );
  const items = stored as LogItem[];
  const writer = turn.writer;
  const undelivered = result.undelivered && !isEmpty(result.undelivered) ? result.undelivered : null;
  const done: DoneRecord = {
    format: 'tailgate.done.v1',
    record: turn.record,
    completed_at: createdAt,
    writer,
    status: outcome.status,
    items,
    counts: {
      items: turn.counts.items + stored.length,
      turns: turn.counts.turns,
      tool_calls: turn.counts.tool_calls + stored.filter((item) => item.type === 'function_call').length,
    },
    receipt: outcome.receipt,
    ...(outcome.response !== undefined ? { response: outcome.response } : {}),
    ...(outcome.error ? { error: outcome.error } : {}),
    // Only a moved context: otherwise the record's own `context` stands.
    ...(turn.context && turn.contextMoved ? { context: turn.context } : {}),
    ...(turn.openCalls ? { open_calls: openCallsAfter(turn.openCalls, stored) } : {}),
    ...(undelivered ? { undelivered } : {}),
  };
  if (turn.keyHash) await indexKey(log, turn.scope, turn.keyHash, turn.record, turn.requestHash);
  const key = doneKey(turn.scope, turn.record);
  let failure: { error: unknown } | null = null;
  try {
    if (await log.store.put(key, JSON.stringify(done), { onlyIfAbsent: true, contentType: 'application/json' }))
      return stored;
  } catch (error) {
    failure = { error };
  }
  // Refused or failed: it may be our own write whose answer was lost.
  const existing = await log.store.get(key);
  // Buried: closed by someone else and packed since.
  if (existing && existing.body.length === 0) throw new TurnClosedError(turn.sessionId, turn.turn, LEASE_EXPIRED);
  if (existing) {
    const closed = parseStored(key, existing.body, doneSchema);
    if (closed.writer === writer) return stored;
    if (closed.error?.code === SESSION_DELETED)
      throw new NotFoundError(`session ${turn.sessionId} was deleted during turn ${turn.turn}`, { id: turn.sessionId });
    throw new TurnClosedError(
      turn.sessionId,
      turn.turn,
      closed.error?.code === TURN_CANCELLED ? TURN_CANCELLED : LEASE_EXPIRED,
    );
  }
  if (failure) throw failure.error;
  throw new TurnClosedError(turn.sessionId, turn.turn, LEASE_EXPIRED);
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
  options: {
    kind: 'append' | 'turn' | 'compact';
    keyHash?: string;
    requestHash?: string;
    request?: unknown;
    context?: ContextStart;
  },
): Promise<Commit | Replay> {
  const writer = crypto.randomUUID();
  let failure: { error: unknown } | null = null;
  for (let attempt = 0; attempt < MAX_CLAIM_ATTEMPTS; attempt++) {
    const head = await readHead(log, id, 100);
    const { scope } = head;
    let newest = head.newest;
    // A put that failed or lost a race may still have landed (a lost answer, an adapter's
    // retry meeting its own write): then the newest record is ours, and nothing is repeated.
    if (newest && newest.record.writer === writer) {
      const own = newest.record;
      const base =
        options.kind === 'turn'
          ? before(await readBase(log, scope, { record: own, done: null }, head.cursor, own.items), own.first_seq)
          : null;
      return { record: own, config: head.config, previous: own.recent ?? [], base, scope };
    }
    if (failure) throw failure.error;
    if (options.keyHash) {
      // The head is read before the index: a keyed turn older than the newest record was
      // closed, so indexed, before that record was written.
      let replay: Awaited<ReturnType<typeof findKey>>;
      try {
        replay = await findKey(log, scope, newest, options.keyHash, options.requestHash);
      } catch (error) {
        // Packed away since the listing: list again.
        if (error instanceof RecordMissingError) continue;
        throw error;
      }
      // The key's turn may be newer than the head read (the index is read after it).
      if (replay) return { replay };
    }
    if (newest && newest.record.kind === 'turn' && !newest.done) {
      const open = newest.record;
      const expires = await leaseOf(log, scope, open);
      if (expires > log.clock().getTime())
        throw new TurnInProgressError(id, open.turn ?? 0, new Date(expires).toISOString());
      const done = await closeTurn(log, scope, open, {
        status: 'failed',
        error: { code: LEASE_EXPIRED, message: `turn ${open.turn ?? 0} did not complete before its lease expired` },
      });
      if (!done) continue;
      newest = { record: open, done };
    }
    const current = contextOf(newest);
    // A compaction committed already (by a concurrent caller), or overtaken by a newer one.
    if (
      options.kind === 'compact' &&
      newest &&
      current &&
      options.context &&
      current.base_record >= options.context.base_record
    ) {
      return { record: newest.record, config: head.config, previous: newest.record.recent ?? [], base: null, scope };
    }
    const context = options.context ?? current;
    const counts = countsOf(newest);
    const openCalls = openCallsOf(newest);
    const openAfter = openCalls === null ? null : checkCalls(input, openCalls);
    // A model turn reads the newest view and what follows it before committing, so a
    // corrupt one fails the claim with nothing stored.
    let base: Base | null = null;
    if (options.kind === 'turn') {
      try {
        base = newest ? await readBase(log, scope, newest, head.cursor, input) : EMPTY_BASE;
      } catch (error) {
        // Packed away since the listing: list again.
        if (error instanceof SegmentMissingError || error instanceof RecordMissingError) continue;
        throw error;
      }
    }
    const now = log.clock();
    const createdAt = now.toISOString();
    const firstSeq = counts.items + 1;
    const items = input.map((item, index) => ({ ...item, seq: firstSeq + index, created_at: createdAt }) as LogItem);
    const number = (newest?.record.record ?? 0) + 1;
    const recent = newest
      ? carry(
          log,
          newest,
          context?.start_seq,
          head.cursor.views.find((view) => view.record <= newest!.record.record)?.record ?? 0,
        )
      : [];
    const turn = options.kind === 'turn' ? counts.turns + 1 : undefined;
    const undelivered = undeliveredOf(newest);
    const record: LogRecord = {
      format: 'tailgate.record.v1',
      record: number,
      kind: options.kind,
      created_at: createdAt,
      writer,
      first_seq: firstSeq,
      items,
      counts: {
        items: counts.items + items.length,
        turns: turn ?? counts.turns,
        tool_calls: counts.tool_calls + items.filter((item) => item.type === 'function_call').length,
      },
      ...(recent.length > 0 ? { recent } : {}),
      ...(turn !== undefined ? { turn, lease_expires_at: new Date(now.getTime() + log.leaseMs).toISOString() } : {}),
      ...(options.keyHash ? { idempotency_key_sha256: options.keyHash } : {}),
      ...(options.keyHash && options.requestHash ? { request_sha256: options.requestHash } : {}),
      ...(options.request !== undefined ? { request: options.request } : {}),
      ...(context ? { context } : {}),
      ...(openAfter ? { open_calls: openAfter } : {}),
      ...(isEmpty(undelivered) ? {} : { undelivered }),
    };
    const key = recordKey(scope, number);
    let landed: boolean;
    try {
      landed =
        (await log.store.put(key, JSON.stringify(record), { onlyIfAbsent: true, contentType: 'application/json' })) !==
        null;
    } catch (error) {
      failure = { error };
      landed = false;
    }
    if (!landed) {
      // Refused or failed, the put may still have landed (a lost answer, an adapter's retry
      // meeting its own write): the key itself says whose record it is.
      const ours = await log.store.get(key).then(
        (object) =>
          object && object.body.length > 0 ? parseStored(key, object.body, recordSchema).writer === writer : false,
        () => undefined,
      );
      if (ours) {
        landed = true;
        failure = null;
      } else if (failure) {
        // Not there: nothing was stored. Unknown: the next head read tells (above).
        if (ours === false) throw (failure as { error: unknown }).error;
        continue;
      }
    }
    if (landed) {
      // The records the claim has read (carried, or at least the previous one): the tail read
      // continues below them with the claim's own listing.
      const previous = recent.length > 0 || !newest ? recent : recordGroups(newest).slice(-1);
      return { record, config: head.config, previous, base, scope };
    }
    await backoff(attempt);
  }
  throw new StorageError(`session ${id}: too many concurrent writers`);
}

/**
 * What the record after `newest` carries: whole records after the newest view listed
 * (`viewRecord`; a turn reads the view anyway), newest first, within budget. With a
 * compacted context (`floor`: its start), every record back to the context start within the
 * byte budget, however many: then a turn reads its whole context from the newest record.
 */
function carry(
  log: LogContext,
  newest: { record: LogRecord; done: DoneRecord | null },
  floor: number | undefined,
  viewRecord: number,
): NonNullable<LogRecord['recent']> {
  const groups = recordGroups(newest).filter((group) => floor !== undefined || group.record > viewRecord);
  const kept: NonNullable<LogRecord['recent']> = [];
  let bytes = 0;
  let reachedFloor = false;
  const wanted = () =>
    floor === undefined ? kept.length < log.recentRecords : !reachedFloor || kept.length < log.recentRecords;
  for (let index = groups.length - 1; index >= 0 && wanted(); index--) {
    const first = groups[index]!.items[0];
    if (floor !== undefined && first !== undefined && first.seq <= floor) reachedFloor = true;
    bytes += JSON.stringify(groups[index]!.items).length;
    if (bytes > log.recentBytes) break;
    kept.unshift(groups[index]!);
  }
  return kept;
}

/** A base cut before `firstSeq` (the items of a record just claimed). */
function before(base: Base, firstSeq: number): Base {
  return { ...base, since: base.since.filter((item) => item.seq < firstSeq) };
}

/** The calls without an output after the newest record (null: not tracked by that record). */
function openCallsOf(newest: Head['newest']): string[] | null {
  if (!newest) return [];
  return (newest.done ? newest.done.open_calls : newest.record.open_calls) ?? null;
}

/**
 * Checks input items against the calls still open in the history and returns the calls
 * open after them: a call must not reuse the call_id of an open call, and an output must
 * answer an open call (so a second output for the same call is refused).
 */
function checkCalls(input: readonly Item[], open: readonly string[]): string[] {
  const pending = new Set(open);
  input.forEach((item, index) => {
    if (item.type === 'function_call') {
      if (pending.has(item.call_id))
        throw new InvalidRequestError(`input.${index}.call_id: a call with call_id ${item.call_id} is already open`, {
          field: `input.${index}.call_id`,
        });
      pending.add(item.call_id);
    } else if (item.type === 'function_call_output') {
      if (!pending.delete(item.call_id)) {
        throw new InvalidRequestError(
          `input.${index}.call_id: no open function_call with call_id ${item.call_id} (unknown, or answered already)`,
          { field: `input.${index}.call_id` },
        );
      }
    }
  });
  return [...pending].slice(-MAX_OPEN_CALLS);
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

/** A commit without an idempotency key always writes (or throws). */
function written(committed: Commit | Replay): Commit {
  if ('replay' in committed) throw new Error('a commit without an idempotency key replayed');
  return committed;
}

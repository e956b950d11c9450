import { InvalidRequestError, StorageError, TailgateError } from '../../errors.ts';
import { turnUsageSchema, type TurnUsage } from '../../ledger/usage.ts';
import { ancestorScope, contextKey, contextPrefix, RECORD_BOUND, type LogScope } from '../keys.ts';
import {
  contextObjectSchema,
  contextStartSchema,
  parseStored,
  type ContextStart,
  type SessionConfig,
} from '../records.ts';
import { commit, type CommitOptions } from './commit.ts';
import { checkInvariant, PARALLEL_GETS, type LogContext } from './context.ts';
import { carriedItems, contextOf, countsOf, readHead, withFreshListing } from './head.ts';
import { claimCompaction, ClaimMoved, type CompactionClaim } from './compaction-claim.ts';
import { leaseOf } from './lease.ts';
import { heldError } from './busy-lease.ts';
import { keptUnlessSwept } from './unbilled.ts';
import { writtenGeneration } from './rewind.ts';
import { cursorBelow, readTail } from './tail-reader.ts';
import type { ContextView, NewContext, OpenTurn } from './types.ts';

/** Moving the context start: in a turn (its completion commits it) or by a manual compaction (a `compact` record). */

/** See SessionLog.commitTurnContext. */
export function commitTurnContext(log: LogContext, turn: OpenTurn, next: NewContext): Promise<ContextStart> {
  return storeContext(log, turn.scope, turn.record, next);
}

/** Compactions of a session that moved to another incarnation while each summarized it. */
const MAX_COMPACT_ATTEMPTS = 3;

/** How a manual compaction claims the session (SessionLog.compact): see CommitOptions. */
export type CompactOptions = Pick<CommitOptions, 'onLapsed'>;

/** See SessionLog.compact. */
export async function compact(
  log: LogContext,
  id: string,
  summarize: Summarize,
  options: CompactOptions = {},
): Promise<Compacted> {
  for (let attempt = 0; attempt < MAX_COMPACT_ATTEMPTS; attempt++) {
    const compacted = await compactOnce(log, id, summarize, options);
    if (compacted) return compacted;
  }
  // Other writers kept landing between each head read and its claim (turns, appends, deletes of
  // the newest turn): the session is busy, as a turn holding it would make it; retrying is safe.
  throw new TailgateError(
    'turn_in_progress',
    `session ${id} moved on under every compaction (other writes kept landing); nothing was stored, try again`,
    { session_id: id },
  );
}

/**
 * A manual compaction's summarizer: given the context, it decides whether there is anything to
 * summarize (null: nothing, and nothing is written) and, before its model call, awaits `claim`,
 * which claims the session (compaction-claim.ts: turn_in_progress while a turn or another
 * compaction holds it, budget_exhausted once the session's budget is spent), under the scope it
 * answers. Its signal is
 * aborted once the claim's renewal found the session deleted or moved on: the summarizer then
 * throws its reason (in a ChargedFailure when the call may have been billed).
 */
export type Summarize = (
  view: ContextView,
  claim: () => Promise<{ signal: AbortSignal; scope: LogScope }>,
) => Promise<Summarized | null>;

/**
 * A summarizer's failure after its model call spent `charge` (it timed out): the end of the
 * compaction's claim charges it to the session, and `cause` is what the compaction throws.
 */
export class ChargedFailure extends Error {
  readonly charge: TurnUsage;

  constructor(cause: unknown, charge: TurnUsage) {
    super('the summary failed', { cause });
    this.charge = charge;
  }
}

/** What a manual compaction's summarizer made: the new context start, and what its model call used. */
export interface Summarized {
  context: NewContext;
  usage: TurnUsage;
}

/**
 * A manual compaction's end: the context start after it, the summary's usage when one was
 * stored, and the session as the compaction found it (`made_of`: its incarnation, turns and
 * items then; none for an empty session), whatever it took after.
 */
export interface Compacted {
  compacted: boolean;
  context: ContextStart | null;
  usage?: TurnUsage;
  made_of?: { scope: LogScope; turns: number; items: number };
}

/** The incarnation the summary was made of is not the session's any more (see compactOnce). */
class Moved extends Error {}

/**
 * One compaction; null when the session moved to another incarnation while the summary was
 * made (a delete of its newest turn, or a delete and a create): its summary holds a history the
 * session no longer has, and is not stored.
 */
async function compactOnce(
  log: LogContext,
  id: string,
  summarize: Summarize,
  options: CompactOptions,
): Promise<Compacted | null> {
  const { newest, cursor, scope, config } = await readHead(log, id, 100);
  if (!newest) return { compacted: false, context: null };
  if (newest.record.kind === 'turn' && !newest.done) {
    const expires = await leaseOf(log, scope, newest.record);
    if (expires > log.clock().getTime()) throw heldError(log, scope, newest.record, newest.record.turn ?? 0, expires);
  }
  const current = contextOf(newest);
  const { turns, items: itemCount } = countsOf(newest);
  const madeOf = { scope, turns, items: itemCount };
  cursor.skipTo(newest.record.recent?.[0]?.record ?? newest.record.record);
  const newestItems = carriedItems(newest);
  // The head's listing first; a packer that removed a listed record meanwhile means a new one.
  let listed: typeof cursor | undefined = cursor;
  const items = await withFreshListing(() => {
    const walk = listed ?? cursorBelow(log, scope, newest);
    listed = undefined;
    return readTail(log, scope, newestItems, walk, { toolCalls: 'all', seqs: [] }, current?.start_seq ?? 0);
  });
  const check = (now: SessionConfig) => {
    if (now.created_at !== config.created_at || (now.generation ?? '') !== scope.generation) throw new Moved();
  };
  let claim: CompactionClaim | undefined;
  const claimSession = async () => {
    claim = await claimCompaction(log, id, newest.record.record, check, options.onLapsed);
    return { signal: claim.signal, scope: claim.scope };
  };
  let summary: Summarized | null;
  try {
    summary = await summarize({ items, context: current, carriedFromSeq: newestItems[0]?.seq ?? null }, claimSession);
    // Added to the totals the record carries, or stored as the claim's spend: as their readers take it.
    if (summary) checkInvariant(turnUsageSchema, summary.usage);
  } catch (error) {
    // No summary: a claim not ended stores an empty spend, so the write passing it over waits for
    // none; or what a call that failed spent, which the end of the claim charges (as its readers take it).
    const charged = error instanceof ChargedFailure ? error.charge : undefined;
    const charge = turnUsageSchema.safeParse(charged).success ? charged : undefined;
    if (claim && !(await claim.release(check, charge))) await claim.storeSpend(charge);
    const cause = error instanceof ChargedFailure ? error.cause : error;
    if (cause instanceof ClaimMoved || cause instanceof Moved) return null;
    throw cause;
  }
  if (!summary) {
    if (claim && !(await claim.release(check))) await claim.storeSpend();
    return { compacted: false, context: current, made_of: madeOf };
  }
  let stored: ContextStart;
  try {
    stored = await storeContext(log, scope, newest.record.record, summary.context);
    // The record carries the session's totals with the summary's usage, and ends the claim.
    await commit(log, id, [], {
      kind: 'compact',
      context: stored,
      check,
      charge: summary.usage,
      ...(claim && { heldBy: claim.writer, ownClaim: claim.record }),
    });
  } catch (error) {
    // The summary was made: a record ending the claim charges it, unless one came after the claim
    // (or the session moved), whose writer passed the claim over and named it unbilled: its
    // spend, stored, is counted by the write after that (log/unbilled.ts). Stored when not known
    // charged: a record of its own landed unseen follows the claim, so nobody names it, or follows
    // the write naming it, and drops it (ownClaim).
    // A summary put after a delete of the session swept it: taken out again (its put came before this read).
    await keptUnlessSwept(log, scope, contextKey(scope, newest.record.record)).catch(() => undefined);
    const released = !(error instanceof Moved) && (await claim?.release(check, summary.usage));
    if (claim && !released) await claim.storeSpend(summary.usage);
    if (error instanceof Moved) return null;
    throw error;
  } finally {
    await claim?.stop();
  }
  return { compacted: true, context: stored, usage: summary.usage, made_of: madeOf };
}

/** See SessionLog.currentContext. */
export async function currentContext(log: LogContext, id: string): Promise<ContextStart | null> {
  return contextOf((await readHead(log, id)).newest);
}

/** See SessionLog.turnContext. */
export async function turnContext(log: LogContext, scope: LogScope, record: number): Promise<ContextStart | null> {
  const key = contextKey(scope, record);
  const stored = await log.store.get(key);
  if (!stored) return null;
  const { format: _format, ...context } = parseStored(key, stored.body, contextObjectSchema);
  return context;
}

/**
 * See SessionLog.contextAt: the session's compactions are listed newest first (its own, then each
 * ancestor's up to the fork point) and read, PARALLEL_GETS at a time, until one starts at
 * `startSeq`, or one starts before it (a later compaction never starts before an earlier one).
 */
export async function contextAt(log: LogContext, scope: LogScope, startSeq: number): Promise<ContextStart | null> {
  let found: ContextStart | null = null;
  await walkContexts(log, scope, (context) => {
    if (context.start_seq === startSeq) found = context;
    return context.start_seq <= startSeq;
  });
  return found;
}

/** See SessionLog.contextsAfter: contextAt's walk, back to the first compaction starting at or before `seq`. */
export async function contextsAfter(log: LogContext, scope: LogScope, seq: number): Promise<ContextStart[]> {
  const found: ContextStart[] = [];
  await walkContexts(log, scope, (context) => {
    if (context.start_seq <= seq) return true;
    found.push(context);
    return false;
  });
  return found;
}

/** Reads the session's compactions newest first, PARALLEL_GETS at a time, until `done` says so. */
async function walkContexts(log: LogContext, scope: LogScope, done: (context: ContextStart) => boolean) {
  const lineage = [
    { held: scope, upTo: Number.POSITIVE_INFINITY },
    ...(scope.ancestors ?? []).map((point) => ({ held: ancestorScope(log.keyPrefix, point), upTo: point.record })),
  ];
  for (const { held, upTo } of lineage) {
    const prefix = contextPrefix(held);
    let cursor: string | undefined;
    do {
      const page = await log.store.list(prefix, { limit: 1000, ...(cursor ? { cursor } : {}) });
      const records = page.objects
        .map((object) => RECORD_BOUND - Number(object.key.slice(prefix.length)))
        .filter((record) => Number.isSafeInteger(record) && record >= 1 && record <= upTo);
      // PARALLEL_GETS at a time, looked at in order: a few round trips for many compactions.
      for (let at = 0; at < records.length; at += PARALLEL_GETS) {
        const batch = records.slice(at, at + PARALLEL_GETS);
        for (const context of await Promise.all(batch.map((record) => turnContext(log, held, record))))
          if (context && done(context)) return;
      }
      cursor = page.truncated ? page.cursor : undefined;
    } while (cursor);
  }
}

async function storeContext(
  log: LogContext,
  scope: LogScope,
  baseRecord: number,
  next: NewContext,
): Promise<ContextStart> {
  const key = contextKey(scope, baseRecord);
  // Named by the generation writing it now, whatever the context it was made from named.
  const { generation: _carried, ...made } = next;
  const generation = writtenGeneration(scope);
  const context = checkedContext({
    ...made,
    base_record: baseRecord,
    created_at: log.clock().toISOString(),
    ...(generation ? { generation } : {}),
  });
  let failure: { error: unknown } | null = null;
  try {
    if (
      await log.store.put(key, JSON.stringify({ format: 'tailgate.context.v1', ...context }), {
        onlyIfAbsent: true,
        contentType: 'application/json',
      })
    )
      return context;
  } catch (error) {
    failure = { error };
  }
  // Taken (or a put whose answer was lost): whatever is stored there is the compaction.
  const existing = await log.store.get(key);
  if (!existing) throw failure ? failure.error : new StorageError(`context ${key} was refused but is missing`);
  const { format: _format, ...stored } = parseStored(key, existing.body, contextObjectSchema);
  return stored;
}

/**
 * A context start about to be stored, checked against the schema every reader of it parses it
 * with (`contextStartSchema`: the context object, the records and the segments that carry it):
 * one they would refuse (say an empty `summarized` range, last_seq 0) is refused here, before
 * anything is written, with invalid_request naming the field.
 */
function checkedContext(context: ContextStart): ContextStart {
  const parsed = contextStartSchema.safeParse(context);
  if (parsed.success) return context;
  const issue = parsed.error.issues[0];
  const field = ['context', ...(issue?.path ?? [])].join('.');
  throw new InvalidRequestError(`a compaction's context is invalid: ${issue?.message ?? 'refused'} at ${field}`, {
    field,
  });
}

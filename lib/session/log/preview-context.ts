import { fenceOf } from './fence.ts';
import type { HistoryAggregates, TailRequirement } from '../../history.ts';
import { EMPTY_LEDGER } from '../../ledger/usage.ts';
import type { LogScope } from '../keys.ts';
import type { PromptItem } from '../../items.ts';
import type { ContextStart, LogItem, LogRecord, OverflowBoundary, SessionCounts, Undelivered } from '../records.ts';
import { logCursor } from '../unit-cursor.ts';
import { toSessionRecord } from './config-object.ts';
import type { LogContext } from './context.ts';
import { planFork, type ForkOptions } from './fork.ts';
import {
  carriedItems,
  contextOf,
  countsOf,
  NOTHING_UNDELIVERED,
  overflowOf,
  readHead,
  undeliveredOf,
  withFreshListing,
  type Head,
} from './head.ts';
import { pastDeadTurn } from './dead-preview.ts';
import { asClaimCloses } from './lease.ts';
import type { RewindOptions } from './rewind.ts';
import { openCallsOf } from './open-calls.ts';
import { nextCarried } from './record-carry.ts';
import { cursorBelow, readWindow, wholeAggregatesOf, type ReadSource } from './tail-reader.ts';
import type { SessionRecord } from './types.ts';
import { readBase } from './views.ts';

/**
 * The tail view of a session's committed history for a prompt preview (no turn, no writes), of a
 * stored session or of a fork that is not written (`ForkSketch`): the fork's first turn reads its
 * history so, from its first record (the state at the fork point) down into its ancestors'.
 */

/** What the prompt preview reads: the history's tail, and what the next turn's claim would start from. */
export interface PreviewContext {
  items: PromptItem[];
  aggregates: HistoryAggregates;
  context: ContextStart | null;
  /** The overflow boundary the next turn starts from (null: none). */
  overflow: OverflowBoundary | null;
  /** The items the next turn's record would carry, as `OpenTurn.carried`. */
  carried: LogItem[];
  undelivered: Undelivered;
  /** The counts the next turn goes on from, when not the session's: a dead turn read taken out (./dead-preview.ts). */
  counts?: SessionCounts;
  /** The calls the next turn's input may answer (null: not tracked), as its claim checks them (./open-calls.ts). */
  openCalls: string[] | null;
  scope: LogScope;
  /** When the next turn's items would be stored, by the log's clock (now), as its claim stamps them (log/commit.ts). */
  created_at: string;
  /**
   * Whether the next turn's claim would take the oldest queued input up first, its own request
   * then refused as busy: the session idle (or its turn's lease run out), the queue's signal
   * raised, its busy policy not `interrupt` (log/commit.ts).
   */
  queueFirst: boolean;
  /** The first seq of the failed turn's input that a next turn without input takes again. */
  retaken?: number | undefined;
}

/** A fork of a session as it would be written (log/fork.ts), nothing written: see SessionLog.sketchFork. */
export interface ForkSketch {
  /** The fork as `get` would answer it right after it was written (its own usage none yet). */
  readonly session: SessionRecord;
  readonly scope: LogScope;
  /** Its first record: no items, the state at the fork point. */
  readonly first: LogRecord;
  /** The calls left open at the fork point (null: none), which its first turn's input may answer. */
  readonly openCalls: string[] | null;
}

/** See SessionLog.sketchFork. */
export async function sketchFork(log: LogContext, parentId: string, options: ForkOptions): Promise<ForkSketch> {
  const { config, scope, first, counts } = await planFork(log, parentId, options);
  return { session: toSessionRecord(config, counts, EMPTY_LEDGER), scope, first, openCalls: first.open_calls ?? null };
}

/** See SessionLog.previewContext. */
export async function previewContext(
  log: LogContext,
  of: string | ForkSketch,
  requirement: (aggregates: HistoryAggregates, context: ContextStart | null) => TailRequirement,
  fromOverflow = false,
  from?: number,
  tookNothing?: RewindOptions['tookNothing'],
): Promise<PreviewContext> {
  const created_at = log.clock().toISOString();
  return withFreshListing(async () => {
    const head: Omit<Head, 'config'> & Partial<Pick<Head, 'config'>> =
      typeof of === 'string'
        ? await readHead(log, of, 100)
        : {
            scope: of.scope,
            newest: { record: of.first, done: null },
            // Its own records are none but the first: the listing goes on into its ancestors'.
            cursor: logCursor(log.store, of.scope, { pageLimit: 100, below: of.first.record }),
          };
    const { scope } = head;
    let { cursor } = head;
    // An open turn whose lease ran out is read closed, as the next turn's claim closes it first;
    // under `interrupt` one whose lease runs too, as the next turn cancels it (lib/turn/busy.ts).
    const interrupts = head.config?.on_busy === 'interrupt';
    let newest =
      head.newest && typeof of === 'string' ? await asClaimCloses(log, scope, head.newest, interrupts) : head.newest;
    // The dead turn of a turn answered at its end, which the next turn takes out first: read from before it.
    const past = newest && tookNothing ? await pastDeadTurn(log, scope, newest, tookNothing) : undefined;
    if (past) ({ newest, cursor } = past);
    // Its items' seqs and its number are the next turn's (log/rewind.ts).
    const counts = past ? { counts: countsOf(newest) } : {};
    if (!newest)
      return {
        ...counts,
        items: [],
        aggregates: log.viewPolicy.emptyAggregates(),
        context: null,
        overflow: null,
        carried: [],
        undelivered: NOTHING_UNDELIVERED,
        openCalls: [],
        scope,
        created_at,
        queueFirst: false,
      };
    const context = contextOf(newest);
    // The claim of a new turn that finds the session idle (once it closed a lapsed turn) and the
    // queue's signal raised takes the oldest queued input up first, unless it interrupts (log/commit.ts).
    const signal = head.config ? cursor.queueSignal : null;
    const idle = !(newest.record.kind === 'turn' && !newest.done);
    const waiting = idle && !interrupts && signal !== null && signal.size > 0;
    // A fence holding the session (a delete's, a manual compaction's) refuses that claim first.
    const next = {
      queueFirst: waiting && !((await fenceOf(log, scope, newest)) > log.clock().getTime()),
      context,
      overflow: overflowOf(newest),
      carried: nextCarried(log, newest, context?.start_seq, cursor.views),
      undelivered: undeliveredOf(newest),
      openCalls: openCallsOf(newest),
      scope,
      created_at,
      ...counts,
      // The failed input an empty input takes again (./retake.ts), kept whole as a turn's own.
      ...(newest.record.kind === 'turn' &&
        newest.done?.status === 'failed' && { retaken: newest.record.items[0]?.seq }),
    };
    const base = await readBase(log, scope, newest, cursor);
    const aggregates = await wholeAggregatesOf(log, scope, base);
    // As the next turn reads it (readContext): from the overflow boundary when its prompt is fitted by the safety net.
    const source: ReadSource = {
      base,
      newer: [],
      below: () => ({ newest: carriedItems(newest), cursor: cursorBelow(log, scope, newest) }),
    };
    const boundary = fromOverflow ? next.overflow : null;
    const { items } = await readWindow(
      log,
      scope,
      source,
      requirement(aggregates, context),
      from ?? context?.start_seq ?? 0,
      boundary,
    );
    return { items, aggregates, ...next };
  });
}

import { DeleteRefusedError, StorageError } from '../../errors.ts';
import {
  newGeneration,
  queueSignalKey,
  recordKey,
  responseObjectKey,
  sessionConfigKey,
  type ForkPoint,
  type LogScope,
} from '../keys.ts';
import type { ContextStart, DoneRecord, LogRecord, SessionConfig, Undelivered } from '../records.ts';
import { backoff, MAX_CLAIM_ATTEMPTS, type LogContext } from './context.ts';
import { toSessionRecord } from './config-object.ts';
import { fenceOf, otherFence } from './fence.ts';
import { raiseSignal } from './queue.ts';
import { forkMarkers } from './fork-refs.ts';
import { MAX_FORK_DEPTH } from '../fork-point.ts';
import type { PackOptions } from './types.ts';
import { writeViewIfDue } from './view-writer.ts';
import { forkChain, forkRecord, putForkStart, type Point } from './fork.ts';
import { flattened, leave, orSwept, type Flattened } from './flatten.ts';
import { clipNames } from './flatten-copy.ts';
import { stateOf, type RecordState } from '../segment-states.ts';
import { contextOf, countsOf, readConfig, readHead, readRecord, scopeOf, undeliveredOf, type Head } from './head.ts';
import { RecordMissingError } from './head.ts';
import { refreshIndex } from './session-index.ts';
import { missingTurn, openTurnRefused } from './turns.ts';
import type { SessionRecord } from './types.ts';
import { withTotals } from './state-record.ts';
import { passedClaim, shownLedger } from './unbilled.ts';
import { dropCharges, withCharges } from './charges.ts';
import { owedAfter, payOwed } from './owed-charges.ts';
import { heldError } from './busy-lease.ts';

/**
 * Deleting a session's newest turn (docs/STORAGE.md, "Deleting the newest turn"). The history
 * is append-only, so the session goes back by becoming a fork of its own incarnation at the
 * record before that turn: a new generation whose first record carries the state there, the
 * same id, config and creation time, and `fork_of` naming the incarnation it leaves (whose
 * objects that reference keeps). The turn's items stay stored under the old generation,
 * which no reader of the session goes past the fork point in. One that would read more generations
 * than a config names gets the history it would read as its own instead (./flatten.ts), written
 * before the fence.
 *
 * In order: a fence, record n+1 of the current generation (create-only, no items, a lease):
 * its landing commits that the turn is still the newest, and a claim meeting it answers 409
 * `turn_in_progress` while its lease runs. Then the references and the new first record, as
 * a fork writes them, then the config, replaced if-match: **the commit point**. A claim that
 * read the old config before that met the fence; one after it reads the new generation. A
 * crash leaves the fence (an empty record: the session goes on after its lease) and objects
 * no config names, which the next delete of the id removes.
 *
 * The next turn takes the deleted one's number and seqs again, so the new generation is named
 * in the config's `rewound`, and an id built from a turn's number and seqs (a facade response
 * id) names the generation holding the turn when it is one of those (idGeneration): an id of
 * the deleted turn never names the turn that took its place.
 */

export interface RewindOptions {
  /**
   * The turn as an id names it: its first input seq and idGeneration there. A turn held
   * elsewhere (another turn took the number of the one named) is not found.
   */
  names?: { seq: number; generation: string | undefined };
  /**
   * Whether turns closed by someone else (`undelivered.lost_turns`) consumed no notice (the
   * inbox's delivery records say, lib/inbox/carry.ts): then they do not refuse the delete.
   * Absent: they do.
   */
  tookNothing?: (lost: Undelivered['lost_turns']) => Promise<boolean>;
  /** What the session's strategies need of a view: a delete that flattens writes the first one. */
  pack?: (config: SessionConfig) => PackOptions;
}

/**
 * The generation an id of the item at `seq` (or of the turn whose input starts there) names:
 * the one holding it, when a delete of the newest turn wrote that one; undefined otherwise, so
 * the ids of a session no turn was ever deleted from name no generation.
 */
export function idGeneration(scope: LogScope, seq: number): string | undefined {
  const holder = holderOf(scope, seq);
  return scope.rewound?.includes(holder) ? holder : undefined;
}

/**
 * The generation that held the item at `seq` before a flattening took it in (log/flatten.ts), if
 * one did: not one of another session's history this one forked (read on from it as it was).
 */
function namedHolder(scope: LogScope, seq: number): string | undefined {
  const floor = scope.ancestors?.find((point) => point.id !== scope.id)?.seq ?? 0;
  const named = seq > floor ? (scope.named ?? []) : [];
  return named.find((point, index) => seq <= point.seq && seq > (named[index + 1]?.seq ?? 0))?.generation;
}

/**
 * The generation an item id (lib/openai/ids.ts) names at `seq`: idGeneration, when a delete of the
 * newest turn wrote it (not the one the incarnation started with), so an id of an item a delete
 * took out never names the item that took its seq, and the ids of items no delete went back past
 * name none (as they did before deletes named one).
 */
export function itemGeneration(scope: LogScope, seq: number): string | undefined {
  const generation = idGeneration(scope, seq);
  return generation === scope.incarnation ? undefined : generation;
}

/**
 * The generation what `scope` writes now names in its id, as itemGeneration names an item's: its
 * own, when a delete of the newest turn wrote it (lib/openai/ids.ts, a compaction's).
 */
export function writtenGeneration(scope: LogScope): string | undefined {
  const { generation } = scope;
  return scope.rewound?.includes(generation) && generation !== scope.incarnation ? generation : undefined;
}

/**
 * The generation that wrote the item at `seq` (a delete of the newest turn keeps the ones before
 * it): for a flattened history, the one that held it before (`named`), not the one it is read from.
 */
export function holderOf(scope: LogScope, seq: number): string {
  return namedHolder(scope, seq) ?? holderScope(scope, seq).generation;
}

/**
 * The incarnation that wrote the item at `seq`: the session's own, one of its earlier
 * generations, or (a fork) its parent's; what it keeps of a turn (its event journal) is there.
 */
export function holderScope(scope: LogScope, seq: number): LogScope {
  const ancestors = scope.ancestors ?? [];
  const owner = ancestors.find((point, index) => seq <= point.seq && seq > (ancestors[index + 1]?.seq ?? 0));
  return owner ? { keyPrefix: scope.keyPrefix, id: owner.id, generation: owner.generation } : scope;
}

/** See SessionLog.deleteTurn. */
export async function deleteNewestTurn(
  log: LogContext,
  id: string,
  turn: number,
  options: RewindOptions = {},
): Promise<SessionRecord> {
  const fences = new Set<string>();
  for (let attempt = 0; attempt < MAX_CLAIM_ATTEMPTS; attempt++) {
    const head = await readHead(log, id, 100);
    const named = options.names;
    if (named && idGeneration(head.scope, named.seq) !== named.generation) throw missingTurn(id, turn);
    let previous: Point | null;
    try {
      previous = await pointBefore(log, head, turn, options);
    } catch (error) {
      // The record before the turn went since the head was read: a delete of the session swept
      // it (its config gone: not found), or a pack moved it (read again).
      if (!(error instanceof RecordMissingError)) throw error;
      await readConfig(log, id);
      continue;
    }
    // Past the generations a config names, the history is flattened first (nothing names it yet).
    const flat = await flattened(log, head, forkPoint(head, previous), options.pack?.(head.config));
    const fenced = await orSwept(log, flat, async () => {
      // The charges listed count in the fence's totals, and so in the next generation's.
      const counted = await withCharges(log, head, !otherFence(head.newest, fences));
      const started = log.clock().getTime();
      const fence: LogRecord = {
        ...withTotals(forkRecord(stateAt(head.newest), new Date(started).toISOString()), counted.newest),
        lease_expires_at: new Date(started + log.leaseMs).toISOString(),
      };
      const put = { onlyIfAbsent: true, contentType: 'application/json' };
      fences.add(fence.writer!);
      if (!(await log.store.put(recordKey(head.scope, fence.record), JSON.stringify(fence), put))) return null;
      // Counted, they go before the config moves: one still there after it is carried (carriedOn).
      await dropCharges(log, counted);
      // Its response object the facade kept goes first (the turn that takes its number keeps its own).
      await log.store.delete(responseObjectKey(log.keyPrefix, head.config, turn));
      return { counted, started };
    });
    if (!fenced) {
      await backoff(attempt);
      continue;
    }
    const { counted, started } = fenced;
    const moved = await moveBack(log, counted, previous, started, flat);
    if (moved) {
      // The charges put there after the head read go on to the generation the config names
      // (log/charges.ts carry): by this delete or, owed (`carry_from`), by the next write.
      await payOwed(log, moved.config, moved.etag);
      // Written once those charges were carried, so the row counts them as a read does; replacing:
      // fewer turns and items than the entries of the turns taken out, which would outrank it.
      await refreshIndex(log, id, undefined, true).catch(() => {
        // Listed again from its next turn, append or PATCH.
      });
      return moved.session;
    }
    await backoff(attempt);
  }
  throw new StorageError(`session ${id}: too many concurrent changes`);
}

/**
 * The record the session goes back to: the one before turn `turn`, which must be the newest
 * record with items (records without any, a fork's first or a fence, are passed over), and
 * closed. Null when the turn is the session's first record. Reads only (a prompt preview's, ./dead-preview.ts).
 */
async function pointBefore(log: LogContext, head: Head, turn: number, options: RewindOptions): Promise<Point | null> {
  const id = head.config.id;
  // Past the turns counted (taken out already): not found, whatever the records before hold.
  if (turn > countsOf(head.newest).turns) throw missingTurn(id, turn);
  let candidate = head.newest;
  // A manual compaction's claim holds the session while its lease runs, as for a turn's claim.
  if (candidate?.record.kind === 'compact') {
    const held = await fenceOf(log, head.scope, candidate);
    if (held > log.clock().getTime())
      throw heldError(log, head.scope, candidate.record, countsOf(candidate).turns, held);
  }
  // `compact` records of no items passed over: a manual compaction's claim, or the record ending
  // one that failed, moved nothing (log/compaction-claim.ts); one that moved the context refuses.
  const compactions: LogRecord[] = [];
  while (candidate && candidate.record.kind !== 'turn' && candidate.record.items.length === 0) {
    if (candidate.record.kind === 'compact') compactions.push(candidate.record);
    const unit = await head.cursor.next();
    if (unit?.kind === 'segment')
      throw new DeleteRefusedError(`turn ${turn} of session ${id} is packed into a segment`);
    candidate = unit ? await readRecord(log, unit) : null;
  }
  const found = candidate?.record.kind === 'turn' && candidate.record.turn === turn;
  if (!found) {
    if (turn > countsOf(head.newest).turns) throw missingTurn(id, turn);
    const after = candidate?.record.kind === 'turn' ? `turn ${candidate.record.turn}` : 'an append';
    throw new DeleteRefusedError(
      `turn ${turn} is not the newest of session ${id}: ${after} came after it; only the newest turn can be deleted`,
      { id, turn },
    );
  }
  // Unlike the others, this refusal passes once the turn ended (`running`).
  if (!candidate!.done) throw await openTurnRefused(log, head.scope, candidate!.record, id, turn);
  const context = contextOf(candidate);
  if (compactions.some((record) => !sameContext(record.context ?? null, context)))
    throw new DeleteRefusedError(
      `turn ${turn} is not the newest of session ${id}: a compaction came after it; ` +
        'only the newest turn can be deleted',
      { id, turn },
    );
  // Notices are delivered once: taking out the turn that delivered them would lose them or deliver
  // them again (the inbox's delivery records name turns by number, which the next generation reuses).
  const after = undeliveredOf(candidate);
  const lostAny = async (lost: Undelivered['lost_turns']) => lost.length > 0 && !(await options.tookNothing?.(lost));
  if (deliveredNotices(candidate!.done) || after.notices.length > 0 || (await lostAny(after.lost_turns)))
    throw new DeleteRefusedError(
      `turn ${turn} of session ${id} took inbox notices, which are delivered once; it cannot be taken out`,
      { id, turn },
    );
  const unit = await head.cursor.next();
  if (unit?.kind === 'segment')
    throw new DeleteRefusedError(
      `the record before turn ${turn} of session ${id} is packed into a segment; only recent turns can be deleted`,
      { id, turn },
    );
  const previous = unit ? await readRecord(log, unit) : null;
  const waiting = undeliveredOf(previous);
  if (waiting.notices.length > 0 || (await lostAny(waiting.lost_turns)))
    throw new DeleteRefusedError(
      `notices consumed before turn ${turn} of session ${id} were not delivered yet (the inbox's delivery records ` +
        'name turns by number, which the session would number again); delete it once a turn delivered them',
      { id, turn },
    );
  return previous;
}

/**
 * Writes the new generation (a fork of the current one at `previous`) and moves the config to
 * it, if-match. Null when the config changed meanwhile (what was written is removed: try again).
 */
async function moveBack(
  log: LogContext,
  head: Head,
  previous: Point | null,
  started: number,
  flat: Flattened | null,
): Promise<{ session: SessionRecord; config: SessionConfig; etag: string | undefined } | null> {
  const point = forkPoint(head, previous);
  // Flattened: the generation reads none (its references keep the ones it copied from).
  const read = flat ? [...(flat.scope.ancestors ?? [])] : forkChainBack(head, previous);
  const chain = flat?.chain ?? read;
  const generation = flat?.scope.generation ?? newGeneration(log.clock());
  const scope = flat?.scope ?? scopeOf(log.keyPrefix, { ...head.config, generation, fork_of: chain });
  const named = flat ? flat.named : clipNames(head.config.named, point?.counts.items ?? 0);
  const markers = forkMarkers(log, chain, head.config.id, generation);
  const start = withTotals(forkRecord(point, new Date(started).toISOString()), head.newest);
  // A compaction's claim passed over (pointBefore: its lease ran out) is named, as a commit names it.
  const passed = passedClaim(head.scope, head.newest, start.created_at);
  const first = passed.length > 0 ? { ...start, unbilled: [...(start.unbilled ?? []), ...passed] } : start;
  // Inputs queued before the delete still wait (from `queued_in`), so the new generation's claims
  // must take them up first too: the queue's signal as the head listed it goes with it, raised.
  const signal = head.cursor.queueSignal;
  const undone = signal && signal.size > 0 ? [...markers, queueSignalKey(scope)] : markers;
  let config: SessionConfig = head.config;
  let written = false;
  let etag: string | undefined;
  try {
    await Promise.all([
      putForkStart(log, { ...head.config, generation }, scope, first, markers),
      undone !== markers ? raiseSignal(log, scope, crypto.randomUUID()) : undefined,
    ]);
    // A flattened history's first view, from what the flattening held (as an import's is).
    const views = flat?.views;
    if (views) await writeViewIfDue(log, scope, { ...flat.pack, refresh: true }, views.held, views.prior);
    // A fence older than half its lease may have been passed by a claim: go no further.
    if (log.clock().getTime() - started > log.leaseMs / 2)
      throw new StorageError('the delete took too long to write its new generation; try again');
    const current = await readConfig(log, head.config.id);
    const { fork_of: _, rewound: before = [], queued_in: left = [], named: __, ...fields } = current.config;
    const held = new Set([...read, ...named].map((point) => point.generation));
    const rewound = [generation, ...before.filter((older) => held.has(older))];
    // Inputs queued under the generation left are still taken up (log/queue.ts).
    const queued_in = [head.config.generation ?? '', ...left];
    config = {
      ...fields,
      generation,
      ...(read.length > 0 ? { fork_of: read } : {}),
      ...(named.length > 0 ? { named } : {}),
      rewound,
      queued_in,
      // The charges put there after the head read are owed until carried (log/owed-charges.ts).
      carry_from: owedAfter(current.config, head.config.generation ?? ''),
    };
    const put = { ifMatch: current.info.etag, contentType: 'application/json' };
    const same = current.config.generation === head.config.generation;
    const key = sessionConfigKey(log.keyPrefix, config.id);
    etag = same ? (await log.store.put(key, JSON.stringify(config), put))?.etag : undefined;
    written = etag !== undefined;
  } catch (error) {
    // A put whose answer was lost may have landed: the config says.
    written = (await readConfig(log, head.config.id).catch(() => null))?.config.generation === generation;
    if (!written) {
      await leave(log, { ...head.config, generation, fork_of: chain }, scope, first.record, undone, flat);
      throw error;
    }
  }
  if (!written) {
    await leave(log, { ...head.config, generation, fork_of: chain }, scope, first.record, undone, flat);
    return null;
  }
  const session = toSessionRecord(config, countsOf(previous), await shownLedger(log, head.scope, head.newest));
  return { session, config, etag };
}

/**
 * The generations the session reads once it went back to `previous` (its `fork_of`); a
 * DeleteRefusedError past MAX_FORK_DEPTH.
 */
function forkChainBack(head: Head, previous: Point | null): ForkPoint[] {
  const point = forkPoint(head, previous);
  const chain = point ? forkChain(head.scope, point.record, point.counts.items) : [];
  if (chain.length > MAX_FORK_DEPTH)
    throw new DeleteRefusedError(
      `the session would read ${chain.length} generations' histories, past the ${MAX_FORK_DEPTH} a config names`,
      { id: head.config.id },
    );
  return chain;
}

/** Whether two context starts are the same compaction's (none: both none). */
function sameContext(a: ContextStart | null, b: ContextStart | null): boolean {
  if (!a || !b) return a === b;
  return a.base_record === b.base_record && a.start_seq === b.start_seq && a.created_at === b.created_at;
}

/** The state a record closes with, for the fork record that continues from it. */
function stateAt(point: Point | null): RecordState | null {
  return point && stateOf(point.record, point.done);
}

/**
 * Where the new generation forks: at `previous`, or, when that is the current generation's own
 * first record (a fork record: no items, numbered right after the ancestor's point), at the
 * point that generation forked from. So a session whose newest turn is taken out again and
 * again (a failed response each time) keeps its ancestry as deep as it was, not one level
 * deeper a delete, past what a config may name (MAX_FORK_DEPTH).
 */
function forkPoint(head: Head, previous: Point | null): RecordState | null {
  const state = stateAt(previous);
  const forkedAt = head.scope.ancestors?.[0];
  const own =
    previous && forkedAt && previous.record.record === forkedAt.record + 1 && previous.record.items.length === 0;
  return state && own ? { ...state, record: forkedAt.record } : state;
}

/**
 * Whether a closed turn took notices: its stored response says its model call delivered some,
 * or an `abort` notice stopped it.
 */
function deliveredNotices(done: DoneRecord): boolean {
  const context = (done.response as { context?: { notices_delivered?: unknown } } | undefined)?.context;
  // An aborted turn took its `abort` notice (its delivery record names the turn).
  const aborted = (done.receipt as { abort?: unknown } | undefined)?.abort !== undefined;
  return aborted || (Array.isArray(context?.notices_delivered) && context.notices_delivered.length > 0);
}

export { pointBefore };

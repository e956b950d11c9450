import type { HistoryAggregates, TailRequirement } from '../../history.ts';
import type { PromptItem } from '../../items.ts';
import { recordsPrefix, viewKey, type LogScope } from '../keys.ts';
import { logCursor, type UnitCursor } from '../unit-cursor.ts';
import { chunkBody, chunkOfView, layoutView, newerViewListed, rememberChunk, viewBody } from './view-chunks.ts';
import type { LogItem } from '../records.ts';
import { VIEW_VERSION, type LogView } from '../view-records.ts';
import { incrementalTail, viewBuilds, viewItems } from './view-increment.ts';
import type { LogContext } from './context.ts';
import { MAX_RECORDS_AFTER_VIEW } from './pack-schedule.ts';
import { sortedUnion } from '../../sorted.ts';
import { carried } from './record-cache.ts';
import { heldBytes, listBytes, slotBytes } from './item-bytes.ts';
import { bodyLength } from '../../store/object-store.ts';
import {
  carriedItems,
  checkDense,
  contextOf,
  countsOf,
  overflowOf,
  readNewest,
  recordGroups,
  type Head,
} from './head.ts';
import { cursorBelow, readTail, wholeAggregatesOf } from './tail-reader.ts';
import { ancestorBase } from './ancestor-view.ts';
import { dropOlderRepeated, viewAggregates } from './older-repeated.ts';
import type { Base, PackOptions } from './types.ts';
import { loadKnownKeys, rememberIndex, ShardMissingError, writeKeyShards } from './key-shards.ts';
import { callKeysOf, sinceKeysOf } from './repeat-flags.ts';
import {
  aggregatesOf,
  fromBoundary,
  pinnedFrom,
  readBase,
  tailFromBase,
  VIEW_MARGIN_CALLS,
  type WindowStart,
} from './views.ts';

/**
 * Writing views: when one is due, and the tail it holds (whole where the strategies may show it,
 * compacted elsewhere).
 */

/** `pack` also writes a view once the records after the newest one hold this many bytes. */
const VIEW_EVERY_BYTES = 64 * 1024;
/** See viewDue. */
const LARGE_VIEW_BYTES = 512 * 1024;
/** The tail a view holds when `pack` is not told what the strategies need. */
const DEFAULT_VIEW_CALLS = 256;

/**
 * Writes the view of the newest closed record when `viewEveryRecords` records have come
 * since the newest view, or VIEW_EVERY_BYTES of items, or a compaction, or when asked to
 * (`refresh`: see `needsView`) (create-only; a view already there is kept). Its tail holds what
 * `requirement` asks for now plus a margin, so the next turns read it and not the segments.
 * Its repeat index takes the call keys new since the base view into its delta, or, when they
 * cross the delta bound, its shards that changed are written first, and the shards they replace
 * are deleted after it (a reader of an older view that meets one gone lists again).
 * `held`: items the caller holds of the log (see readBase). `prior`: the view before, held in
 * memory (see heldView), with `held` every item after it; else the newest view listed is read
 * (`lastView` when it is that one), or, by a fork listing none, its ancestor's (ancestorBase).
 * Returns the view's key and, when this call stored it, the view and its bytes (its chunk's
 * included); null when none was due. `onListing`: given the
 * listing (a page of 100 of `scope`'s records, newest first) the decision was made from.
 */
export async function writeViewIfDue(
  log: LogContext,
  scope: LogScope,
  { requirement, refresh = false, lastView }: PackOptions,
  held: readonly LogItem[] = [],
  prior?: LogView | null,
  onListing?: (listing: UnitCursor) => void,
): Promise<{ key: string; view?: LogView; bytes?: number; listing: UnitCursor } | null> {
  const { newest, cursor } = await readNewest(log, scope, 100);
  onListing?.(cursor);
  if (!newest || (newest.record.kind === 'turn' && !newest.done)) return null;
  const listed = cursor.views[0]?.record ?? 0;
  if (newest.record.record === listed) return null;
  // A compaction since the newest view makes its tail stale (it starts at the old context start).
  const compacted = (contextOf(newest)?.base_record ?? 0) >= listed && listed > 0;
  if (!refresh && !compacted && !viewDue(log, newest, listed, cursor.views[0]?.size ?? 0)) return null;
  // A fork listing no view of its own starts from its ancestor's (log/ancestor-view.ts).
  const adopted = prior === undefined ? await ancestorBase(log, scope, newest, cursor, held) : null;
  const { base, keys } = adopted
    ? await heldBase(log, scope, adopted.view, adopted.since)
    : prior === undefined
      ? await listedBase(log, scope, newest, cursor, lastView, held)
      : await heldBase(log, scope, prior, held);
  const { view, replaced } = await composeView(log, scope, newest, base, requirement, keys).catch(async (error) => {
    // A flush meeting a base shard gone with no newer view to take (an older view outliving a
    // newer one, as readBase meets it): the index is built again from the log, read without views.
    if (
      !(error instanceof ShardMissingError) ||
      !base.view ||
      (!base.skipped && (await newerViewListed(log, scope, base.view.record)))
    )
      throw error;
    const cursor = logCursor(log.store, scope);
    const fresh = await readBase(log, scope, newest, cursor, [], undefined, false, held);
    return composeView(log, scope, newest, fresh, requirement);
  });
  const key = viewKey(scope, view.record);
  const priorChunk = base.view ? chunkOfView(base.view) : undefined;
  let layout = layoutView(scope, view, priorChunk, log.viewChunkBytes, base.view);
  // A chunk named again must still be there: a pack of another process from the same base may
  // have replaced it (and deleted it) meanwhile.
  if (layout.chunk && !layout.write && !(await log.store.head(layout.chunk.key)))
    layout = layoutView(scope, view, null, log.viewChunkBytes, base.view);
  const { chunk } = layout;
  if (chunk && layout.write)
    await log.store.put(chunk.key, chunkBody(chunk), { onlyIfAbsent: true, contentType: 'application/json' });
  const body = viewBody(view, layout);
  const bytes = bodyLength(body) + (chunk?.bytes ?? 0);
  const written = await log.store.put(key, body, { onlyIfAbsent: true, contentType: 'application/json' });
  // The next turn and pack take it from here: it is what a read of these bytes would give
  // (test/session/view-writer.test.ts). (Null: a writer of the same record came first, and its
  // view is the one stored.)
  if (written) {
    rememberChunk(view, chunk);
    // Counted with the bytes of its tail kept to build the next view from (item-bytes.ts).
    const held = heldBytes(view.tail?.items ?? []);
    log.viewCache?.set(key, view, bytes + held, base.view);
    rememberIndex(log, scope, key, view.keys);
  }
  // A view naming another chunk (or none) replaces the one its base named (the views that name
  // that one are older); a chunk of a view not stored is named by none.
  const gone = written
    ? priorChunk && priorChunk.key !== chunk?.key
      ? [priorChunk.key]
      : []
    : layout.write
      ? [chunk!.key]
      : [];
  if (replaced.length > 0 || gone.length > 0) await log.store.delete([...replaced, ...gone]);
  if (written) await dropOlderRepeated(log, scope, base.view, view);
  return written ? { key, view, bytes, listing: cursor } : { key, listing: cursor };
}

/**
 * Whether the records after the newest view (record `listed`, `viewBytes` of JSON) call for a
 * view of `newest`: `viewEveryRecords` of them, or a carry grown past VIEW_EVERY_BYTES (a
 * burst of big appends: every turn would read it). After an append, a view larger than
 * LARGE_VIEW_BYTES waits until the records after it also hold an eighth of its bytes, so that
 * writing views (each as large as the prompt) costs a constant per byte appended however long
 * the history, but no longer than MAX_RECORDS_AFTER_VIEW records (what a cold turn reads past the
 * view stays bounded; an append past it packs before it answers, lib/turn/append.ts).
 */
function viewDue(log: LogContext, newest: NonNullable<Head['newest']>, listed: number, viewBytes: number): boolean {
  const since = newest.record.record - listed;
  const append = newest.record.kind === 'append';
  if (append && since >= MAX_RECORDS_AFTER_VIEW) return true;
  // The bytes of the records after the view that the newest record carries (measured last).
  let bytes: number | undefined;
  const after = () => {
    bytes ??= recordGroups(newest).reduce(
      (sum, group) => (group.record > listed ? sum + carried(group.items).length : sum),
      0,
    );
    return bytes;
  };
  if (append && viewBytes > LARGE_VIEW_BYTES && after() <= viewBytes / 8) return false;
  return since >= log.viewEveryRecords || after() > VIEW_EVERY_BYTES;
}

/**
 * The view of `newest` as writeViewIfDue would write it after `prior`, kept in memory and not
 * stored (an import's views between its first and its last: each is only the base of the next).
 * `held`: every item after `prior` up to `newest`. The shards of its repeat index are written.
 */
export async function heldView(
  log: LogContext,
  scope: LogScope,
  newest: NonNullable<Head['newest']>,
  prior: LogView | null,
  held: readonly LogItem[],
  requirement: PackOptions['requirement'],
): Promise<LogView> {
  const { base, keys } = await heldBase(log, scope, prior, held);
  const { view, replaced } = await composeView(log, scope, newest, base, requirement, keys, true);
  // No stored view names the shards it replaced.
  if (replaced.length > 0) await log.store.delete(replaced);
  await dropOlderRepeated(log, scope, prior, view);
  return view;
}

/**
 * The base of the view of `newest` from the newest view listed (see readBase), with the call
 * keys of its items (those of the records `newest` carries hashed once, when they were appended).
 */
async function listedBase(
  log: LogContext,
  scope: LogScope,
  newest: NonNullable<Head['newest']>,
  cursor: UnitCursor,
  lastView: PackOptions['lastView'],
  held: readonly LogItem[],
): Promise<{ base: Base; keys: string[] }> {
  const base = await readBase(log, scope, newest, cursor, [], lastView, true, held);
  return { base, keys: sinceKeysOf(log.viewPolicy, base, recordGroups(newest)) };
}

/** The base of a view held in memory and every item after it (`held`, dense), with their calls' keys. */
async function heldBase(
  log: LogContext,
  scope: LogScope,
  view: LogView | null,
  held: readonly LogItem[],
): Promise<{ base: Base; keys: string[] }> {
  const since = held.filter((item) => item.seq > (view?.last_seq ?? 0));
  checkDense(recordsPrefix(scope), since, (view?.last_seq ?? 0) + 1);
  const keys = callKeysOf(log.viewPolicy, since);
  return { base: { view, since, known: await loadKnownKeys(log, scope, view, keys) }, keys };
}

/**
 * The view of `newest` from its base (its repeat index's new shards written; `replaced`: the
 * shards it replaces). `keys`: the call keys of `base.since`, when the caller has them. `held`: a
 * view kept in memory only (heldView), whose tail's bytes are not built: its filters take the fewest bits.
 */
async function composeView(
  log: LogContext,
  scope: LogScope,
  newest: NonNullable<Head['newest']>,
  base: Base,
  requirement: PackOptions['requirement'],
  keys?: readonly string[],
  held = false,
): Promise<{ view: LogView; replaced: string[] }> {
  const { aggregates: claimed, newKeys } = aggregatesOf(log.viewPolicy, base, true, keys);
  const whole = () => wholeAggregatesOf(log, scope, base);
  const tailOf = (aggregates: HistoryAggregates) => viewTail(log, scope, newest, base, requirement, aggregates);
  const { tail, aggregates } = await viewAggregates(log, scope, newest, claimed, whole, tailOf);
  // A stored view's tail bytes, built here once (its layout takes them as built).
  const tailBytes = !held && tail ? () => slotBytes(listBytes(tail.items, base.view?.tail?.items)) : undefined;
  const { index, replaced } = await writeKeyShards(log, scope, base.view, newKeys, newest.record.record, tailBytes);
  const view: LogView = {
    format: 'tailgate.view.v1',
    v: VIEW_VERSION,
    policy: log.viewPolicy.version,
    record: newest.record.record,
    last_seq: countsOf(newest).items,
    aggregates,
    keys: index,
    tail,
    created_at: log.clock().toISOString(),
  };
  return { view, replaced };
}

/** The tail of the view of `newest` for the strategies' requirement of `aggregates` (see composeView). */
async function viewTail(
  log: LogContext,
  scope: LogScope,
  newest: NonNullable<Head['newest']>,
  base: Base,
  requirement: PackOptions['requirement'],
  aggregates: HistoryAggregates,
): Promise<LogView['tail']> {
  const lastSeq = countsOf(newest).items;
  const context = contextOf(newest);
  const boundary = overflowOf(newest);
  let tail: LogView['tail'] = null;
  // With a compacted context, the tail starts at the context start; with an overflow
  // boundary, at its message start or the window's, whichever is earlier (what the turns
  // that use it read: see fromBoundary).
  const {
    requirement: needed,
    floor: fromSeq,
    start,
  } = fromBoundary(
    requirement ? requirement(aggregates, context) : { toolCalls: DEFAULT_VIEW_CALLS, seqs: [] },
    context?.start_seq ?? 1,
    boundary,
  );
  if (needed.toolCalls !== 'all' || context) {
    const pinned = pinnedFrom(aggregates, boundary);
    const toolCalls = needed.toolCalls === 'all' ? 'all' : needed.toolCalls + VIEW_MARGIN_CALLS;
    const wanted: TailRequirement = {
      toolCalls,
      seqs: sortedUnion(needed.seqs, pinned),
      ...(needed.wholeCalls !== undefined ? { wholeCalls: needed.wholeCalls } : {}),
    };
    const whole = () => wholeTail(log, scope, newest, base, { wanted, needed, pinned, fromSeq, start, lastSeq });
    const incremental =
      context || boundary
        ? null
        : await incrementalTail(log, scope, base, wanted, { wholeCalls: needed.wholeCalls, pinned, lastSeq });
    viewBuilds[incremental ? 'fromBase' : 'whole'] += 1;
    tail = incremental
      ? { from_seq: fromSeq, window_start: incremental.windowStart, items: incremental.items }
      : await whole();
    if (incremental && log.checkViews && JSON.stringify(await whole()) !== JSON.stringify(tail))
      throw new Error(`the view of record ${newest.record.record} built from its base differs from the whole build`);
  }
  return tail;
}

/**
 * The tail of a view built the whole way: from the newest view when it holds enough, or with
 * the few tool items its window lacks read from the log (the margin again), or without the
 * margin; else the log is walked.
 */
async function wholeTail(
  log: LogContext,
  scope: LogScope,
  newest: NonNullable<Head['newest']>,
  base: Base,
  {
    wanted,
    needed,
    pinned,
    fromSeq,
    start,
    lastSeq,
  }: {
    wanted: TailRequirement;
    needed: TailRequirement;
    pinned: number[];
    fromSeq: number;
    start: WindowStart;
    lastSeq: number;
  },
): Promise<NonNullable<LogView['tail']>> {
  const policy = log.viewPolicy;
  const toolCalls = wanted.toolCalls;
  const withMargin =
    tailFromBase(policy, base, [], wanted, fromSeq, start) ??
    (await extendedTail(log, scope, base, wanted, fromSeq, start));
  const withoutMargin = withMargin
    ? null
    : tailFromBase(policy, base, [], { ...wanted, toolCalls: needed.toolCalls }, fromSeq, start);
  const held = withMargin || !withoutMargin ? toolCalls : needed.toolCalls;
  const items = (withMargin ??
    withoutMargin ??
    (await readTail(
      log,
      scope,
      carriedItems(newest),
      cursorBelow(log, scope, newest),
      wanted,
      fromSeq,
      false,
      start.messageStart,
    ))) as LogItem[];
  const cut = held === 'all' ? null : policy.tailCut(items, held);
  const windowStart = cut === null ? fromSeq : (items[cut]?.seq ?? lastSeq + 1);
  return {
    from_seq: Math.max(fromSeq, Math.min(start.messageStart, windowStart)),
    window_start: windowStart,
    items: await viewItems(log, scope, items, needed.wholeCalls, pinned, start.toolStart),
  };
}

/**
 * The tail for `wanted` from the base's view with its window moved back: the log is read from
 * the window start down to the cut of `wanted.toolCalls` (whole items, as a view written from
 * the log holds them), and the view's items before the cut (messages, the calls it pinned and
 * their outputs) are kept. When the view holds compacted an item that must be whole now, its
 * whole window is read from the log instead. A need that grows faster than the calls come (an
 * epoch growing, calls whose outputs are still to come) uses up a view's margin within a few
 * views; this gets it back without reading every message of the history again. Null when the
 * view does not hold what comes before the cut either (a required call it lacks): then the
 * log is walked.
 */
async function extendedTail(
  log: LogContext,
  scope: LogScope,
  base: Base,
  wanted: TailRequirement,
  fromSeq: number,
  start: WindowStart,
): Promise<PromptItem[] | null> {
  const view = base.view;
  if (!view?.tail || wanted.toolCalls === 'all' || wanted.toolCalls <= 0) return null;
  const held = view.tail.items as LogItem[];
  const window = held.filter((item) => item.seq >= view.tail!.window_start);
  for (const newer of [[...window, ...base.since], base.since]) {
    // The units up to the view's record hold its items; `newer` (dense up to the newest) clips them.
    const cursor = logCursor(log.store, scope, { pageLimit: 100, below: view.record + 1 });
    const tools = { toolCalls: wanted.toolCalls, seqs: [] };
    const suffix = (await readTail(log, scope, newer, cursor, tools, fromSeq, true)) as LogItem[];
    const cut = suffix[0]?.seq ?? view.last_seq + 1;
    const tail = { ...view.tail, window_start: cut, items: [...held.filter((item) => item.seq < cut), ...suffix] };
    const items = tailFromBase(
      log.viewPolicy,
      { view: { ...view, tail }, since: [], known: null },
      [],
      wanted,
      fromSeq,
      start,
    );
    if (items) return items;
  }
  return null;
}

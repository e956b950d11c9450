import { CorruptObjectError } from '../../errors.ts';
import type { StoredItem } from '../../items.ts';
import { lowerBound } from '../../sorted.ts';
import { repeatedSeqs, type HistoryAggregates, type TailRequirement } from '../../history.ts';
import { recordsPrefix, viewKey, type LogScope } from '../keys.ts';
import type { LogItem, OverflowBoundary } from '../records.ts';
import type { LogView } from '../view-records.ts';
import { loadKnownKeys, seenBefore, ShardMissingError } from './key-shards.ts';
import { newerViewListed, readView } from './view-chunks.ts';
import { keysAfterView } from './repeat-flags.ts';
import type { PromptItem } from '../../items.ts';
import { logCursor, unitTop, type UnitCursor } from '../unit-cursor.ts';
import type { StoredObject } from '../../store/object-store.ts';
import type { LogContext } from './context.ts';
import { checkDense, countsOf, readRecord, RecordMissingError, recordGroups, segmentRange, type Head } from './head.ts';
import type { Base, OpenTurn, ViewPolicy } from './types.ts';

/**
 * Views, as turns read them: the newest view and every item after it (a base), the tail a
 * base serves, the aggregates it gives, and whether a turn's view is due to be written again.
 */

/**
 * A view holds this many tool calls beyond what the strategies need when it is written (the
 * need of the epoch strategies moves by whole epochs; a view that falls short is read past).
 */
export const VIEW_MARGIN_CALLS = 8;
/** A turn asks for a fresh view once its view holds this many bytes the strategies no longer need. */
const VIEW_EXCESS_BYTES = 32 * 1024;

/** The base of an empty log. */
export const EMPTY_BASE: Base = Object.freeze({ view: null, since: [], known: null }) as Base;

/** See SessionLog.needsView. */
export function needsView(
  policy: ViewPolicy,
  turn: OpenTurn,
  requirement: (aggregates: HistoryAggregates) => TailRequirement,
  output: readonly StoredItem[] = [],
): boolean {
  if (turn.context || !turn.base.view) return false;
  const base = {
    ...turn.base,
    since: [...turn.base.since, ...turn.inputRecords, ...(output as LogItem[])],
  };
  // The output's calls may fall in shards the claim did not read: counted as new (an estimate).
  const { aggregates } = aggregatesOf(policy, base, false);
  const { requirement: needed, floor, start } = fromBoundary(requirement(aggregates), 0, turn.overflow);
  // A view written before the overflow boundary moved holds messages no prompt shows any more.
  const tail = turn.base.view.tail;
  if (tail && tail.from_seq < Math.min(start.messageStart, tail.window_start)) return true;
  return (
    viewExcessBytes(policy, base, needed, pinnedFrom(aggregates, turn.overflow)) > VIEW_EXCESS_BYTES ||
    tailFromBase(policy, base, [], needed, floor, start) === null
  );
}

/**
 * Where a read under an overflow boundary starts: messages from `messageStart` (and before it
 * only the suffix the strategies keep whole), and tool items of calls older than `toolStart`
 * may come compacted, since the safety net drops them whatever they hold (see fromBoundary).
 */
export interface WindowStart {
  messageStart: number;
  toolStart: number;
}

/**
 * A read as a stored overflow boundary leaves it (lib/compaction/fit-prompt.ts). A prompt the
 * safety net fits shows no message older than the boundary's `message_start_seq` and no call
 * older than its `tool_start_seq` (it drops them all), so the read asks for no pinned call
 * older than the latter, reads messages from the former on (the tail view of the history from
 * the cut of `requirement`, or from the message start when that is earlier: `readStart`), and
 * takes the calls older than the tool start as a view holds them compacted. The strategies see
 * the same items, at the same places, as in the whole history; a turn reads and builds only
 * the window and the tail the strategies need.
 */
export function fromBoundary(
  requirement: TailRequirement,
  floor: number,
  boundary: OverflowBoundary | null,
): { requirement: TailRequirement; floor: number; start: WindowStart } {
  if (!boundary) return { requirement, floor, start: { messageStart: floor, toolStart: 0 } };
  return {
    requirement: { ...requirement, seqs: requirement.seqs.filter((seq) => seq >= boundary.tool_start_seq) },
    floor,
    start: { messageStart: Math.max(floor, boundary.message_start_seq), toolStart: boundary.tool_start_seq },
  };
}

/**
 * The call ids of the calls among `items` older than `toolStart` and answered before it (their
 * items may come compacted). A call answered at or after `toolStart` is not among them: the
 * safety net keeps a call whose output is in the newest turn, as the strategies show it.
 */
export function earlyCallIds(items: readonly LogItem[], toolStart: number): Set<string> {
  const ids = new Set<string>();
  for (const item of items) {
    if (item.type === 'function_call' && item.seq < toolStart) ids.add(item.call_id);
    else if (item.type === 'function_call_output' && item.seq >= toolStart) ids.delete(item.call_id);
  }
  return ids;
}

/** Whether a view holds `item` only for its place, as behind the overflow boundary (viewItemSchema). */
export function isBehind(item: PromptItem): boolean {
  return item.type !== 'message' && 'behind' in item && item.behind === true;
}

/**
 * The first seq of a read (`items` ascending, from its floor): the cut of `requirement`
 * (the first item of the suffix kept whole), or `messageStart` when that is earlier. Before
 * it the tail view holds only messages and required calls, which a read from `messageStart`
 * does not want.
 */
export function readStart(
  policy: ViewPolicy,
  items: readonly LogItem[],
  requirement: TailRequirement,
  messageStart: number,
): number {
  if (requirement.toolCalls === 'all' || messageStart <= (items[0]?.seq ?? 0)) return 0;
  const cut = policy.tailCut(items, requirement.toolCalls);
  return cut === null ? 0 : Math.min(messageStart, items[cut]?.seq ?? Number.POSITIVE_INFINITY);
}

/** The seqs of the newest instances of repeated calls that a prompt may still show (see fromBoundary). */
export function pinnedFrom(aggregates: HistoryAggregates, boundary: OverflowBoundary | null): number[] {
  const seqs = repeatedSeqs(aggregates);
  return seqs.slice(lowerBound(seqs, boundary?.tool_start_seq ?? 0));
}

/**
 * The newest view listed by `cursor` (at or below the newest record) and every item after
 * it up to the newest record: from what the newest record carries, and from the log (records
 * or segments, via `cursor`) for the records it does not carry. Without a view, the whole log.
 * The shards of the repeat index loaded are those of the calls after the view and of `input`.
 * `held`: items of the log the caller already holds (dense, as an import just wrote them);
 * when they cover what the newest record does not carry, the log is not read for them.
 */
export async function readBase(
  log: LogContext,
  scope: LogScope,
  newest: NonNullable<Head['newest']>,
  cursor: UnitCursor,
  input: readonly PromptItem[] = [],
  prefetched?: PrefetchedView,
  useViews = true,
  held: readonly LogItem[] = [],
): Promise<Base> {
  let view: LogView | null = null;
  let gone: string | undefined;
  let unusable = false;
  for (const listed of useViews ? cursor.views : []) {
    if (listed.record > newest.record.record) continue;
    const object = prefetched?.key === listed.key ? prefetched : undefined;
    const read =
      object && 'view' in object ? object.view : await readView(log, scope, listed.key, listed.record, object?.object);
    // Deleted since the listing (a newer one replaced it): an older one may still serve.
    if (read === 'gone') gone ??= listed.key;
    else if (read) {
      view = read;
      break;
    } else unusable = true;
  }
  // Every view it listed was deleted since (packs wrote newer ones): list again rather than
  // read the whole log. (Not when one of them cannot serve as it is, another version's or one
  // whose chunk is gone with no newer view listed: listing again would meet it again.)
  if (!view && gone !== undefined && !unusable) throw new RecordMissingError(gone);
  const lastSeq = view?.last_seq ?? 0;
  const viewRecord = view?.record ?? 0;
  if (viewRecord === newest.record.record && lastSeq !== countsOf(newest).items) {
    throw new CorruptObjectError(
      viewKey(scope, viewRecord),
      `ends at seq ${lastSeq}, its record at ${countsOf(newest).items}`,
    );
  }
  const { walked, carried, groups } = await itemsAfterView(log, scope, newest, cursor, viewRecord, lastSeq, held);
  const since = [...walked, ...carried];
  try {
    const { keys, flags } = keysAfterView(log.viewPolicy, walked, groups, input);
    const known = await loadKnownKeys(log, scope, view, keys, flags);
    return { view, since, known, ...(unusable && view ? { skipped: true as const } : {}) };
  } catch (error) {
    // A newer view that cannot serve (skipped above) is no newer view to take.
    if (!(error instanceof ShardMissingError) || (!unusable && (await newerViewListed(log, scope, view!.record))))
      throw error;
    // Its index is gone with no newer view to take (an older view outliving a newer one):
    // the log itself, read without views, is exact.
    return readBase(log, scope, newest, logCursor(log.store, scope), input, undefined, false);
  }
}

/**
 * The items after a view (of record `viewRecord`, ending at seq `lastSeq`; 0 and 0: the log's
 * start) up to the newest record: those the newest record carries (`carried`, of its `groups`),
 * and those of the log before them (`walked`: from `held` where it covers them, else read via
 * `cursor`, which the newest record was listed from), dense (see readBase).
 */
export async function itemsAfterView(
  log: LogContext,
  scope: LogScope,
  newest: NonNullable<Head['newest']>,
  cursor: UnitCursor,
  viewRecord: number,
  lastSeq: number,
  held: readonly LogItem[] = [],
): Promise<{ walked: LogItem[]; carried: LogItem[]; groups: ReturnType<typeof recordGroups> }> {
  const groups = recordGroups(newest).filter((group) => group.record > viewRecord);
  const carried = groups.flatMap((group) => group.items);
  const older: LogItem[][] = [];
  let low = carried[0]?.seq ?? countsOf(newest).items + 1;
  const heldFirst = held[0]?.seq ?? Number.POSITIVE_INFINITY;
  const heldLast = held[held.length - 1]?.seq ?? 0;
  if (low > lastSeq + 1 && heldFirst <= lastSeq + 1 && heldLast >= low - 1) {
    older.push(held.slice(lastSeq + 1 - heldFirst, low - heldFirst));
    low = lastSeq + 1;
  }
  if (low > lastSeq + 1 && groups.length > 0) {
    cursor.skipTo(groups[0]!.record);
    for (let unit = await cursor.next(); unit && low > lastSeq + 1; unit = await cursor.next()) {
      if (unit.kind === 'record') {
        // A record carries whole records before it: one read gives them all, and the walk
        // goes on below the oldest (each of them, read again, would carry the same items).
        const read = await readRecord(log, unit);
        const readGroups = recordGroups(read);
        const items = readGroups.flatMap((group) => group.items);
        older.push(items.filter((item) => item.seq > lastSeq && item.seq < low));
        low = Math.min(low, read.record.first_seq, items[0]?.seq ?? low);
        cursor.skipTo(readGroups[0]!.record);
        continue;
      }
      const top = Math.min(unitTop(unit), low - 1);
      const bottom = Math.max(unit.firstSeq, lastSeq + 1);
      if (top >= bottom) older.push(await segmentRange(log, unit, bottom, top));
      low = Math.min(low, unit.firstSeq);
    }
  }
  const walked = older.reverse().flat();
  checkDense(recordsPrefix(scope), [...walked, ...carried], lastSeq + 1);
  return { walked, carried, groups };
}

/**
 * The newest view a listing shows at or below record `newest`, its read started now (see
 * readBase), or a view this process wrote, as it wrote it (PackOptions.lastView).
 */
export type PrefetchedView = { key: string; object: Promise<StoredObject | null> } | { key: string; view: LogView };

export function prefetchView(log: LogContext, cursor: UnitCursor, newest: number): PrefetchedView | undefined {
  const listed = cursor.views.find((view) => view.record <= newest);
  // A view parsed before is not fetched again (readView takes it from the cache).
  if (!listed || log.viewCache?.get(listed.key)) return undefined;
  const object = log.store.get(listed.key);
  // Settled either way: a claim that stops early (a 409) never reads it.
  object.catch(() => undefined);
  return { key: listed.key, object };
}

/**
 * The tail view for `requirement` from a base and the items after it (`newer`), or null when
 * the base's view does not hold enough of the history: its tail starts too late for the cut,
 * or a required call before its window is not in it. Without a view the base holds the
 * whole log. Equal to `selectTail` of the whole history from `floor` on (from `readStart`
 * with a later `messageStart`), except that tool items outside `requirement.wholeCalls` (and
 * its seqs) may come as the strategies compact them, which is what they make of them anyway.
 */
export function tailFromBase(
  policy: ViewPolicy,
  base: Base,
  newer: readonly LogItem[],
  requirement: TailRequirement,
  floor: number,
  start: WindowStart = { messageStart: floor, toolStart: 0 },
): PromptItem[] | null {
  const tail = base.view ? base.view.tail : { from_seq: 1, window_start: 1, items: [] };
  // A tail written from a later context start (or overflow boundary) lacks the messages before it.
  if (!tail || tail.from_seq > Math.max(start.messageStart, 1)) return null;
  const read = [...(tail.items as LogItem[]), ...base.since, ...newer].filter((item) => item.seq >= floor);
  const first = readStart(policy, read, requirement, start.messageStart);
  const items = first > floor ? read.filter((item) => item.seq >= first) : read;
  // Items the view holds compacted must be ones the strategies compact or drop now (or ones
  // the safety net drops); those it holds only for their place, ones the safety net drops: an
  // output before the tool start (its call is older), or a call answered before it.
  const early = earlyCallIds(items, start.toolStart);
  const misplaced = (item: LogItem) =>
    item.type === 'function_call' ? !early.has(item.call_id) : item.seq >= start.toolStart;
  if (items.some((item) => item.type !== 'message' && isBehind(item) && misplaced(item))) return null;
  const compacted = items.filter((item) => item.compacted && item.type !== 'message' && !early.has(item.call_id));
  if (compacted.length > 0) {
    if (requirement.toolCalls === 'all' || requirement.wholeCalls === undefined) return null;
    const whole = wholeCallIds(items, requirement.wholeCalls, requirement.seqs)!;
    if (compacted.some((item) => item.type !== 'message' && whole.has(item.call_id))) return null;
  }
  if (tail.window_start > Math.max(floor, 1)) {
    if (requirement.toolCalls === 'all') return null;
    const cut = policy.tailCut(items, requirement.toolCalls);
    if (cut === null || (cut < items.length && items[cut]!.seq < tail.window_start)) return null;
    const held = new Set<number>();
    for (const item of tail.items)
      if (item.type === 'function_call' && item.seq < tail.window_start) held.add(item.seq);
    if (requirement.seqs.some((seq) => seq >= floor && seq < tail.window_start && !held.has(seq))) return null;
  }
  return policy.selectTail(items, requirement);
}

/**
 * The call ids of the newest `wholeCalls` calls of `items` and of the calls with `seqs`: the
 * tool items the strategies may show whole. Null (all of them) when `wholeCalls` is undefined.
 */
export function wholeCallIds(
  items: readonly LogItem[],
  wholeCalls: number | undefined,
  seqs: readonly number[],
): Set<string> | null {
  if (wholeCalls === undefined) return null;
  const pinned = new Set(seqs);
  const ids = new Set<string>();
  let calls = 0;
  for (let index = items.length - 1; index >= 0; index--) {
    const item = items[index]!;
    if (item.type !== 'function_call') continue;
    calls += 1;
    if (calls <= wholeCalls || pinned.has(item.seq)) ids.add(item.call_id);
  }
  return ids;
}

/**
 * How many bytes of the base's view the strategies no longer need: tool items before the cut
 * of `needed` (plus the margin) that are not required, and what whole items they would now
 * compact would lose by it. A new epoch, or a repeat making an older instance unprotected,
 * leaves a view so; reading it costs that much more than the prompt it serves.
 */
function viewExcessBytes(policy: ViewPolicy, base: Base, needed: TailRequirement, pinned: readonly number[]): number {
  const tail = base.view?.tail;
  if (!tail || needed.toolCalls === 'all') return 0;
  const items: LogItem[] = [...(tail.items as LogItem[]), ...base.since];
  const cut = policy.tailCut(items, needed.toolCalls + VIEW_MARGIN_CALLS);
  const cutSeq = cut === null ? 0 : (items[cut]?.seq ?? Number.POSITIVE_INFINITY);
  const required = wholeCallIds(items, 0, [...needed.seqs, ...pinned])!;
  const whole = wholeCallIds(items, needed.wholeCalls, [...needed.seqs, ...pinned]);
  let excess = 0;
  for (const item of tail.items as LogItem[]) {
    if (item.type === 'message') continue;
    if (item.seq < cutSeq) {
      if (!required.has(item.call_id)) excess += JSON.stringify(item).length;
    } else if (whole !== null && !item.compacted && !whole.has(item.call_id)) {
      const compacted = policy.compact(item);
      if (compacted !== item) excess += JSON.stringify(item).length - JSON.stringify(compacted).length;
    }
  }
  return excess;
}

/**
 * The aggregates of the history up to the end of a base: the view's, extended over the items
 * after it (a call is a repeat when its key is in the view's repeat index or earlier among
 * them). `strict`: every call's shard must have been loaded (otherwise an estimate). `keys`:
 * the call keys of `base.since` (repeat-flags.ts callKeysOf), when the caller has them.
 */
export function aggregatesOf(
  policy: ViewPolicy,
  base: Base,
  strict = true,
  keys?: readonly string[],
): { aggregates: HistoryAggregates; newKeys: string[] } {
  return policy.extendAggregates(
    base.view?.aggregates ?? policy.emptyAggregates(),
    base.since,
    (key) => seenBefore(base.known, key, strict),
    keys,
  );
}

/** A base cut before `firstSeq` (the items of a record just claimed). */
export function baseBefore(base: Base, firstSeq: number): Base {
  return { ...base, since: base.since.filter((item) => item.seq < firstSeq) };
}

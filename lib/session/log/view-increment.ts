import type { TailRequirement } from '../../history.ts';
import { lowerBound } from '../../sorted.ts';
import type { LogScope } from '../keys.ts';
import type { LogItem } from '../records.ts';
import type { LogContext } from './context.ts';
import { hydrate } from './item-pages.ts';
import type { Base } from './types.ts';
import { viewItemSchema } from '../view-records.ts';
import { earlyCallIds, isBehind, wholeCallIds } from './views.ts';

/** How many views this process built from their base, and the whole way (for tests and benches). */
export const viewBuilds = { fromBase: 0, whole: 0 };

/**
 * A view's tail built from its base's tail without walking all of it again. Without a context
 * start or an overflow boundary, the tail of a long history is mostly what comes before its
 * base's window: messages, which a view holds as they are, and the calls the strategies need
 * before the window (`seqs`: pinned repeats), with their outputs, whole where pinned. A newer
 * view holds the same items there but for the calls no longer needed (a newer repeat took
 * their place), so it filters them in one pass and builds only what comes after the base's
 * window (the window and the items since) as the whole build does (view-writer.ts
 * `composeView`). The result is the whole build's, item for item (every test that packs builds
 * both and compares them: `checkViews`, test/support/session-log.ts); null when that cannot be
 * told from the base alone (a call needed whole that the base holds compacted, a need that
 * reaches before its window, a call id given to two open calls, a context start or boundary):
 * then the whole build runs.
 */
export async function incrementalTail(
  log: LogContext,
  scope: LogScope,
  base: Base,
  wanted: TailRequirement,
  { wholeCalls, pinned, lastSeq }: { wholeCalls: number | undefined; pinned: readonly number[]; lastSeq: number },
): Promise<{ items: LogItem[]; windowStart: number } | null> {
  const tail = base.view?.tail;
  const toolCalls = wanted.toolCalls;
  if (!tail || toolCalls === 'all' || wanted.wholeCalls === undefined || wholeCalls === undefined) return null;
  // The newest calls whole are then all after the cut (below).
  if (wholeCalls > toolCalls || wanted.wholeCalls > toolCalls) return null;
  if (tail.from_seq !== 1) return null;
  const held = tail.items as readonly LogItem[];
  let split = 0;
  for (let high = held.length; split < high; ) {
    const middle = (split + high) >>> 1;
    if (held[middle]!.seq < tail.window_start) split = middle + 1;
    else high = middle;
  }
  const recent = [...held.slice(split), ...base.since];
  const cut = log.viewPolicy.tailCut(recent, toolCalls);
  if (cut === null) return null;
  // Before the base's window: messages, and the needed calls with their outputs, as they were
  // (the whole build takes none of them compacted: it reads such a call from the log). Only
  // the index of the tool items there is looked at, numbers only; the messages between them
  // are copied in runs.
  const index = toolsBefore(held, split);
  if (!index.usable) return null;
  const decisions = decide(index, wanted.seqs, pinned);
  /** Positions, ascending, and the item that takes the place of each (null: none). */
  const changed: [number, LogItem | null][] = [];
  /** The calls kept whose output is not before the window, by call id -> whether held whole. */
  const awaiting = new Map<string, { call: LogItem; whole: boolean; at: number }>();
  let keptCalls = 0;
  let compactedCalls = 0;
  for (let at = 0; at < index.length; at++) {
    const decision = decisions[at]!;
    const position = index.positions[at]!;
    if (decision === DROP) {
      changed.push([position, null]);
      continue;
    }
    const isCall = index.calls[at] === at;
    if (isCall) keptCalls += 1;
    if (isCall && decision === COMPACTED) compactedCalls += 1;
    if (isCall && !index.answered[at]) {
      const call = held[position]!;
      awaiting.set(call.type === 'message' ? '' : call.call_id, { call, whole: decision === WHOLE, at });
    }
    if (decision === COMPACTED) {
      const item = held[position]!;
      const kept = compactedItem(log, item);
      if (kept !== item) changed.push([position, kept]);
    }
  }
  // Made at its length (a long history's tail is hundreds of thousands of items): no array grown
  // and copied again as it fills.
  const kept: LogItem[] = new Array(split - changed.filter(([, item]) => item === null).length);
  let from = 0;
  let length = 0;
  for (const [position, item] of changed) {
    for (let at = from; at < position; at++) kept[length++] = held[at]!;
    if (item) kept[length++] = item;
    from = position + 1;
  }
  for (let at = from; at < split; at++) kept[length++] = held[at]!;
  // Every needed call before the window is among them.
  if (keptCalls !== lowerBound(wanted.seqs, tail.window_start)) return null;
  // The whole build holds a tool item whole by its call id: one of a kept call held compacted
  // must not share its id with one held whole.
  if (compactedCalls > 0 && sharesId(held, index, decisions)) return null;
  // The call ids of the tool items after the base's window: a kept call before it with one of
  // them (an id given again, as providers numbering calls per response do) decides, as the
  // whole build does by id, whether those items are held whole.
  const shared = new Map<string, boolean>();
  const ids = callIdsOf(index, held);
  for (const item of recent) {
    if (item.type === 'message' || shared.has(item.call_id)) continue;
    for (const seq of ids.seqs.get(item.call_id) ?? []) {
      if (wanted.seqs[lowerBound(wanted.seqs, seq)] !== seq) continue;
      const whole = pinned[lowerBound(pinned, seq)] === seq;
      shared.set(item.call_id, (shared.get(item.call_id) ?? false) || whole);
    }
  }
  // After it, as the whole build selects: the calls still awaiting their output lead, so that
  // the output is taken as it would be after them. The seqs before all of them match none.
  const leading = [...awaiting.values()].map((entry) => entry.call);
  const first = Math.min(leading[0]?.seq ?? Number.POSITIVE_INFINITY, recent[0]?.seq ?? Number.POSITIVE_INFINITY);
  const seqs = wanted.seqs.slice(lowerBound(wanted.seqs, first));
  const selected = log.viewPolicy
    .selectTail([...leading, ...recent], { ...wanted, seqs })
    .slice(leading.length) as LogItem[];
  const checked = wholeCallIds(selected, wanted.wholeCalls, seqs)!;
  const whole = wholeCallIds(selected, wholeCalls, pinned.slice(lowerBound(pinned, first)))!;
  // A kept call before the window that the whole build holds whole by an id it shares with a
  // newer call (held compacted above): the whole build runs.
  for (const [callId, isWhole] of shared) if (!isWhole && whole.has(callId)) return null;
  for (const [callId, isWhole] of [...shared, ...[...awaiting].map(([id, entry]) => [id, entry.whole] as const)]) {
    checked.add(callId);
    if (isWhole) whole.add(callId);
  }
  const rest: LogItem[] = [];
  for (const item of selected) {
    if (item.type === 'message') rest.push(item);
    else if (isBehind(item) || (item.compacted && checked.has(item.call_id))) return null;
    else rest.push(whole.has(item.call_id) ? item : compactedItem(log, item));
  }
  // The new items added to `kept` itself, not to a copy of it.
  const keptLength = kept.length;
  const items = kept;
  for (const item of (await hydrate(log, scope, rest)) as LogItem[]) items.push(item);
  const windowStart = recent[cut]?.seq ?? lastSeq + 1;
  toolIndexes.set(items, nextIndex(index, held, decisions, changed, awaiting, items, keptLength, windowStart));
  return { items, windowStart };
}

/** What a view built from its base does with a tool item before the base's window. */
const DROP = 0;
const COMPACTED = 1;
const WHOLE = 2;

/**
 * For each entry of `index`: DROP when its call is not needed (`seqs`, ascending), WHOLE when it
 * is pinned (`pinned`, ascending), else COMPACTED. Its calls come in seq order, so one merge.
 */
function decide(index: ToolIndex, seqs: readonly number[], pinned: readonly number[]): Uint8Array {
  const decisions = new Uint8Array(index.length);
  let wanted = 0;
  let whole = 0;
  for (let at = 0; at < decisions.length; at++) {
    const call = index.calls[at]!;
    if (call !== at) {
      decisions[at] = call < 0 ? DROP : decisions[call]!;
      continue;
    }
    const seq = index.owners[at]!;
    while (wanted < seqs.length && seqs[wanted]! < seq) wanted++;
    while (whole < pinned.length && pinned[whole]! < seq) whole++;
    decisions[at] = seqs[wanted] !== seq ? DROP : pinned[whole] === seq ? WHOLE : COMPACTED;
  }
  return decisions;
}

/** Whether two calls kept before the window share a call id, one whole and one not. */
function sharesId(held: readonly LogItem[], index: ToolIndex, decisions: Uint8Array): boolean {
  const wholeOf = new Map<string, boolean>();
  for (let at = 0; at < index.length; at++) {
    const item = held[index.positions[at]!]!;
    if (item.type !== 'function_call' || decisions[at] === DROP) continue;
    const whole = decisions[at] === WHOLE;
    if (wholeOf.get(item.call_id) === !whole) return true;
    wholeOf.set(item.call_id, whole);
  }
  return false;
}

/**
 * Where the tool items before a view's window are in its tail (`positions`, ascending), the seq
 * of the call each belongs to (`owners`; -1: none before it), where in the index that call is
 * (`calls`: the entry itself for a call, -1 for an output without one), and for a call whether
 * its output is there too (`answered`): kept by the tail's items array, so that the next view
 * built from it looks at no message and at no item it keeps as it is (see toolsBefore). In
 * typed arrays, of which the first `length` entries are used: a long history's index is tens of
 * thousands of entries, copied by each view built from its base.
 */
interface ToolIndex {
  length: number;
  positions: Int32Array;
  owners: Float64Array;
  calls: Int32Array;
  answered: Uint8Array;
  /**
   * False once a call id was given again while its call was open (the output goes to the first,
   * selectTail), or an item is held compacted or for its place (the whole build reads such a
   * call from the log): then the index is not used.
   */
  usable: boolean;
  /** The call ids of its calls (see callIdsOf), when this index holds them. */
  ids?: CallIds;
}

/**
 * Call id -> the seqs of the calls of an index with that id. One table is handed on from each
 * index to the one built from it (`holder`), which brings it up to date; an index whose table
 * went on to a newer one builds its own again.
 */
interface CallIds {
  holder: ToolIndex;
  seqs: Map<string, number[]>;
}

const toolIndexes = new WeakMap<readonly LogItem[], ToolIndex>();

/** The tool index of `items` (a view's tail) before `split` (its window): kept, or made in one pass. */
function toolsBefore(items: readonly LogItem[], split: number): ToolIndex {
  let index = toolIndexes.get(items);
  if (!index) {
    index = emptyIndex(split, true);
    addTools(index, items, 0, split, new Map());
    toolIndexes.set(items, index);
  }
  return index;
}

/** The call ids of the calls of `index` (over `items`, the tail it indexes). */
function callIdsOf(index: ToolIndex, items: readonly LogItem[]): CallIds {
  if (index.ids?.holder === index) return index.ids;
  const ids: CallIds = { holder: index, seqs: new Map() };
  for (let at = 0; at < index.length; at++) if (index.calls[at] === at) addId(ids, items[index.positions[at]!]!);
  index.ids = ids;
  return ids;
}

function addId(ids: CallIds, call: LogItem): void {
  if (call.type === 'message') return;
  const seqs = ids.seqs.get(call.call_id);
  if (seqs) seqs.push(call.seq);
  else ids.seqs.set(call.call_id, [call.seq]);
}

/**
 * Adds the tool items of `items` from `from` up to `to` to `index`. `calls`: call id -> where
 * in the index its call is, for the calls whose output may still come.
 */
function addTools(index: ToolIndex, items: readonly LogItem[], from: number, to: number, calls: Map<string, number>) {
  for (let position = from; position < to; position++) {
    const item = items[position]!;
    if (item.type === 'message') continue;
    if (isBehind(item) || item.compacted) index.usable = false;
    const call = calls.get(item.call_id);
    const at = index.length;
    if (item.type === 'function_call') {
      // A second call of an id still open: the output goes to the first (selectTail), not to
      // the one this index would name.
      if (call !== undefined) index.usable = false;
      calls.set(item.call_id, at);
      if (index.ids) addId(index.ids, item);
    } else if (call !== undefined) {
      index.answered[call] = 1;
      calls.delete(item.call_id);
    }
    const owner = item.type === 'function_call' ? at : (call ?? -1);
    index.positions[at] = position;
    index.calls[at] = owner;
    index.owners[at] = owner < 0 ? -1 : item.type === 'function_call' ? item.seq : index.owners[owner]!;
    index.answered[at] = 0;
    index.length = at + 1;
  }
}

/** An index with room for `capacity` entries (addTools adds at most one per item it is handed). */
function emptyIndex(capacity: number, usable: boolean): ToolIndex {
  const [positions, calls, answered] = [new Int32Array(capacity), new Int32Array(capacity), new Uint8Array(capacity)];
  return { length: 0, positions, owners: new Float64Array(capacity), calls, answered, usable };
}

/**
 * The tool index of a tail built from one indexed as `index` (over `held`): its kept tool items,
 * moved up over those dropped (`decisions`, `changed`), then those of the new part (from
 * `keptLength`) before `windowStart`. It takes over the index's call ids.
 */
function nextIndex(
  index: ToolIndex,
  held: readonly LogItem[],
  decisions: Uint8Array,
  changed: readonly [number, LogItem | null][],
  awaiting: ReadonlyMap<string, { at: number }>,
  items: readonly LogItem[],
  keptLength: number,
  windowStart: number,
): ToolIndex {
  // An item held compacted now: the next view built from it runs the whole build.
  const usable = index.usable && changed.every(([, item]) => item === null);
  let end = keptLength;
  while (end < items.length && items[end]!.seq < windowStart) end++;
  const next = emptyIndex(index.length + end - keptLength, usable);
  const moved = new Int32Array(index.length);
  let gone = 0;
  for (let at = 0; at < index.length; at++) {
    if (decisions[at] === DROP) {
      gone += 1;
      moved[at] = -1;
      continue;
    }
    const call = index.calls[at]!;
    const to = at - gone;
    moved[at] = to;
    next.positions[to] = index.positions[at]! - gone;
    next.owners[to] = index.owners[at]!;
    next.calls[to] = call === at ? to : moved[call]!;
    next.answered[to] = index.answered[at]!;
  }
  next.length = index.length - gone;
  const ids = index.ids;
  if (ids?.holder === index) {
    for (let at = 0; at < index.length; at++) {
      if (decisions[at] !== DROP || index.calls[at] !== at) continue;
      const call = held[index.positions[at]!]!;
      if (call.type === 'message') continue;
      const left = ids.seqs.get(call.call_id)?.filter((seq) => seq !== call.seq) ?? [];
      if (left.length > 0) ids.seqs.set(call.call_id, left);
      else ids.seqs.delete(call.call_id);
    }
    ids.holder = next;
    next.ids = ids;
  }
  const calls = new Map([...awaiting].map(([callId, entry]) => [callId, moved[entry.at]!] as const));
  addTools(next, items, keptLength, end, calls);
  return next;
}

/**
 * A tool item as the strategies compact it, its keys in the schema's order: what a read of the
 * view gives (lib/session/view-check.ts), and what the view cache keeps as built.
 */
export function compactedItem(log: LogContext, item: LogItem): LogItem {
  const kept = log.viewPolicy.compact(item);
  if (kept === item) return item;
  const keys = VIEW_ITEM_KEYS.get(kept.type)!.filter((key) => key in kept);
  return Object.fromEntries(keys.map((key) => [key, kept[key as keyof typeof kept]])) as unknown as LogItem;
}

const VIEW_ITEM_KEYS = new Map(
  viewItemSchema.options.map((option) => [option.shape.type.value, Object.keys(option.shape)] as const),
);

/**
 * A view's tail as it is stored: tool items of the newest `wholeCalls` calls (all when
 * undefined) and of the calls with `pinned` seqs whole and inline, since the strategies may
 * show them whole; the others as the strategies compact them (`compactCallItem`,
 * `compactOutputItem`: the same bytes a prompt holds), since they only compact or drop them.
 * Those of calls older than `toolStart` (answered before it), which the overflow safety net
 * drops whatever they hold, are kept only for their place (`behindBoundary`).
 */
export async function viewItems(
  log: LogContext,
  scope: LogScope,
  items: LogItem[],
  wholeCalls: number | undefined,
  pinned: number[],
  toolStart: number,
): Promise<LogItem[]> {
  const whole = wholeCallIds(items, wholeCalls, pinned);
  const early = earlyCallIds(items, toolStart);
  const kept = items.map((item) => {
    if (item.type === 'message') return item;
    if (early.has(item.call_id)) return behindBoundary(log.viewPolicy.compact(item));
    if (whole !== null && !whole.has(item.call_id)) return compactedItem(log, item);
    return item;
  });
  // The whole outputs kept out of line are read (hydrate reads only those).
  return (await hydrate(log, scope, kept)) as LogItem[];
}

/**
 * A tool item behind the overflow boundary as a view holds it (`behind`): its place, its call
 * id and name, and whether the strategies compact it (the context notice's place and whether
 * one is placed depend on that), without its arguments or output, which no prompt shows.
 */
function behindBoundary(item: LogItem): LogItem {
  if (item.type === 'message' || isBehind(item)) return item;
  const { seq, created_at, call_id } = item;
  // In the schema's order, as a read checks it (lib/session/view-check.ts).
  const kept = { seq, created_at, ...(item.compacted ? { compacted: true as const } : {}), behind: true };
  return (
    item.type === 'function_call'
      ? { type: 'function_call', call_id, name: item.name, arguments: '', ...kept }
      : { type: 'function_call_output', call_id, output: '', ...kept }
  ) as LogItem;
}

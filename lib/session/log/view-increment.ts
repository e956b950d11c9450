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
  // the tool items there are looked at; the messages between them are copied in runs.
  const needed = new Set(wanted.seqs);
  const pinnedSeqs = new Set(pinned);
  const index = toolsBefore(held, split);
  if (!index.usable) return null;
  // The call ids of the tool items after the base's window: a kept call before it with one of
  // them (an id given again, as providers numbering calls per response do) decides, as the
  // whole build does by id, whether those items are held whole.
  const recentIds = new Set<string>();
  for (const item of recent) if (item.type !== 'message') recentIds.add(item.call_id);
  const shared = new Map<string, boolean>();
  /** Position -> the item that takes its place (null: none). */
  const changed = new Map<number, LogItem | null>();
  /** The calls kept whose output is not before the window, by call id -> whether held whole. */
  const awaiting = new Map<string, { call: LogItem; whole: boolean; at: number }>();
  let keptCalls = 0;
  let compactedCalls = 0;
  for (let at = 0; at < index.positions.length; at++) {
    const position = index.positions[at]!;
    const owner = index.owners[at]!;
    const item = held[position]!;
    if (item.type === 'message' || isBehind(item) || item.compacted) return null;
    if (!needed.has(owner)) {
      changed.set(position, null);
      continue;
    }
    const whole = pinnedSeqs.has(owner);
    if (item.type === 'function_call') {
      keptCalls += 1;
      if (!whole) compactedCalls += 1;
      if (!index.answered[at]) awaiting.set(item.call_id, { call: item, whole, at });
      if (recentIds.has(item.call_id)) shared.set(item.call_id, (shared.get(item.call_id) ?? false) || whole);
    }
    const kept = whole ? item : compactedItem(log, item);
    if (kept !== item) changed.set(position, kept);
  }
  const runs: LogItem[][] = [];
  let from = 0;
  for (const [position, item] of changed) {
    runs.push(held.slice(from, position), item ? [item] : []);
    from = position + 1;
  }
  const kept = runs.concat([held.slice(from, split)]).flat();
  // Every needed call before the window is among them.
  if (keptCalls !== lowerBound(wanted.seqs, tail.window_start)) return null;
  // The whole build holds a tool item whole by its call id: one of a kept call held compacted
  // must not share its id with one held whole.
  if (compactedCalls > 0 && sharesId(held, index, needed, pinnedSeqs)) return null;
  // After it, as the whole build selects: the calls still awaiting their output lead, so that
  // the output is taken as it would be after them.
  const leading = [...awaiting.values()].map((entry) => entry.call);
  const selected = log.viewPolicy.selectTail([...leading, ...recent], wanted).slice(leading.length) as LogItem[];
  const checked = wholeCallIds(selected, wanted.wholeCalls, wanted.seqs)!;
  const whole = wholeCallIds(selected, wholeCalls, pinned)!;
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
  const items = kept.concat((await hydrate(log, scope, rest)) as LogItem[]);
  const windowStart = recent[cut]?.seq ?? lastSeq + 1;
  toolIndexes.set(items, nextIndex(index, changed, awaiting, items, kept.length, windowStart));
  return { items, windowStart };
}

/** Whether two calls kept before the window (`needed`) share a call id, one whole (`pinned`) and one not. */
function sharesId(held: readonly LogItem[], index: ToolIndex, needed: Set<number>, pinned: Set<number>): boolean {
  const wholeOf = new Map<string, boolean>();
  for (let at = 0; at < index.positions.length; at++) {
    const item = held[index.positions[at]!]!;
    const owner = index.owners[at]!;
    if (item.type !== 'function_call' || !needed.has(owner)) continue;
    const whole = pinned.has(owner);
    if (wholeOf.get(item.call_id) === !whole) return true;
    wholeOf.set(item.call_id, whole);
  }
  return false;
}

/**
 * Where the tool items before a view's window are in its tail (`positions`, ascending), the seq
 * of the call each belongs to (`owners`), and for a call whether its output is there too
 * (`answered`): kept by the tail's items array, so that the next view built from it looks at
 * no message (see toolsBefore).
 */
interface ToolIndex {
  positions: number[];
  owners: number[];
  answered: boolean[];
  /** False once a call id was given again while its call was open: then the index is not used. */
  usable: boolean;
}

const toolIndexes = new WeakMap<readonly LogItem[], ToolIndex>();

/** The tool index of `items` (a view's tail) before `split` (its window): kept, or made in one pass. */
function toolsBefore(items: readonly LogItem[], split: number): ToolIndex {
  let index = toolIndexes.get(items);
  if (!index) {
    index = { positions: [], owners: [], answered: [], usable: true };
    addTools(index, items, 0, split, new Map());
    toolIndexes.set(items, index);
  }
  return index;
}

/**
 * Adds the tool items of `items` from `from` up to `to` to `index`. `calls`: call id -> where
 * in the index its call is, for the calls whose output may still come.
 */
function addTools(index: ToolIndex, items: readonly LogItem[], from: number, to: number, calls: Map<string, number>) {
  for (let position = from; position < to; position++) {
    const item = items[position]!;
    if (item.type === 'message') continue;
    const call = calls.get(item.call_id);
    if (item.type === 'function_call') {
      // A second call of an id still open: the output goes to the first (selectTail), not to
      // the one this index would name.
      if (call !== undefined) index.usable = false;
      calls.set(item.call_id, index.positions.length);
    } else if (call !== undefined) {
      index.answered[call] = true;
      calls.delete(item.call_id);
    }
    index.positions.push(position);
    index.owners.push(item.type === 'function_call' ? item.seq : call === undefined ? -1 : index.owners[call]!);
    index.answered.push(false);
  }
}

/**
 * The tool index of a tail built from one indexed as `index`: its kept tool items, moved up
 * over those dropped, then those of the new part (from `keptLength`) before `windowStart`.
 */
function nextIndex(
  index: ToolIndex,
  changed: ReadonlyMap<number, LogItem | null>,
  awaiting: ReadonlyMap<string, { at: number }>,
  items: readonly LogItem[],
  keptLength: number,
  windowStart: number,
): ToolIndex {
  const next: ToolIndex = { positions: [], owners: [], answered: [], usable: index.usable };
  const moved = new Map<number, number>();
  let gone = 0;
  for (let at = 0; at < index.positions.length; at++) {
    const position = index.positions[at]!;
    if (changed.get(position) === null) {
      gone += 1;
      continue;
    }
    moved.set(at, next.positions.length);
    next.positions.push(position - gone);
    next.owners.push(index.owners[at]!);
    next.answered.push(index.answered[at]!);
  }
  const calls = new Map([...awaiting].map(([callId, entry]) => [callId, moved.get(entry.at)!] as const));
  let end = keptLength;
  while (end < items.length && items[end]!.seq < windowStart) end++;
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

import type { TailRequirement } from '../../history.ts';
import { lowerBound } from '../../sorted.ts';
import type { LogScope } from '../keys.ts';
import type { LogItem } from '../records.ts';
import type { LogContext } from './context.ts';
import { hydrate } from './item-pages.ts';
import type { Base } from './types.ts';
import { viewItemSchema } from '../view-records.ts';
import { isBehind, wholeCallIds } from './views.ts';

/**
 * A view's tail built from its base's tail without walking all of it again. Without a context
 * start or an overflow boundary, the tail of a long history is mostly what comes before its
 * base's window: messages, which a view holds as they are, and the calls the strategies need
 * before the window (`seqs`: pinned repeats), with their outputs, whole where pinned. A newer
 * view holds the same items there but for the calls no longer needed (a newer repeat took
 * their place), so it filters them in one pass and builds only what comes after the base's
 * window (the window and the items since) as the whole build does (view-writer.ts
 * `composeView`). The result is the whole build's, item for item (property-tested in
 * test/session/view-increment.test.ts); null when that cannot be told from the base alone (a
 * call needed whole that the base holds compacted, a need that reaches before its window, a
 * context start or boundary): then the whole build runs.
 */
/** How many views this process built from their base, and the whole way (for tests and benches). */
export const viewBuilds = { fromBase: 0, whole: 0 };

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
  const positions = toolsBefore(held, split);
  /** Call id -> whether the view holds it whole, for the calls kept. */
  const keptCalls = new Map<string, boolean>();
  const awaiting = new Map<string, LogItem>();
  /** Position -> the item that takes its place (null: none). */
  const changed = new Map<number, LogItem | null>();
  for (const position of positions) {
    const item = held[position]!;
    if (item.type === 'message' || isBehind(item) || item.compacted) return null;
    if (item.type === 'function_call' && needed.has(item.seq)) {
      keptCalls.set(item.call_id, pinnedSeqs.has(item.seq));
      awaiting.set(item.call_id, item);
    } else if (item.type === 'function_call_output' && keptCalls.has(item.call_id)) awaiting.delete(item.call_id);
    else {
      changed.set(position, null);
      continue;
    }
    const kept = keptCalls.get(item.call_id) ? item : compactedItem(log, item);
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
  if (keptCalls.size !== lowerBound(wanted.seqs, tail.window_start)) return null;
  // After it, as the whole build selects: the calls still awaiting their output lead, so that
  // the output is taken as it would be after them.
  const selected = log.viewPolicy
    .selectTail([...awaiting.values(), ...recent], wanted)
    .slice(awaiting.size) as LogItem[];
  const checked = wholeCallIds(selected, wanted.wholeCalls, wanted.seqs)!;
  const whole = wholeCallIds(selected, wholeCalls, pinned)!;
  for (const [callId, pinnedCall] of keptCalls) {
    checked.add(callId);
    if (pinnedCall) whole.add(callId);
  }
  const rest: LogItem[] = [];
  for (const item of selected) {
    if (item.type === 'message') rest.push(item);
    else if (isBehind(item) || (item.compacted && checked.has(item.call_id))) return null;
    else rest.push(whole.has(item.call_id) ? item : compactedItem(log, item));
  }
  const items = kept.concat((await hydrate(log, scope, rest)) as LogItem[]);
  const windowStart = recent[cut]?.seq ?? lastSeq + 1;
  // The new tail's tool items before its window: those kept, and those selected before it.
  const next: number[] = [];
  let gone = 0;
  for (const position of positions) {
    if (changed.get(position) === null) gone += 1;
    else next.push(position - gone);
  }
  for (let index = kept.length; index < items.length && items[index]!.seq < windowStart; index++)
    if (items[index]!.type !== 'message') next.push(index);
  toolPositions.set(items, next);
  return { items, windowStart };
}

/** The positions of the tool items before a view's window, by its tail's items (see toolsBefore). */
const toolPositions = new WeakMap<readonly LogItem[], number[]>();

/** The positions of the tool items among `items` (a view's tail) before `split` (its window). */
function toolsBefore(items: readonly LogItem[], split: number): number[] {
  let positions = toolPositions.get(items);
  if (!positions) {
    positions = [];
    for (let index = 0; index < split; index++) if (items[index]!.type !== 'message') positions.push(index);
    toolPositions.set(items, positions);
  }
  return positions;
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

import { lowerBound } from '../../sorted.ts';
import type { PromptItem } from '../../items.ts';
import type { HistoryAggregates, TailRequirement } from '../../history.ts';
import type { LogScope } from '../keys.ts';
import { mapLimit } from '../../store/object-store.ts';
import type { LogItem, OverflowBoundary } from '../records.ts';
import { CorruptObjectError } from '../../errors.ts';
import { SegmentReader, TOOL_BLOCK } from '../segment.ts';
import { logCursor, unitTop, type UnitCursor } from '../unit-cursor.ts';
import { PARALLEL_GETS, type LogContext } from './context.ts';
import { readRecord, withFreshListing, type Head } from './head.ts';
import type { Base, OpenTurn, TurnHistory } from './types.ts';
import { aggregatesOf, fromBoundary, tailFromBase } from './views.ts';
import { servedRead, withOlderRepeated } from './older-repeated.ts';

/**
 * Reading the log from its tail: the tail view a prompt is built from (past the view when it
 * falls short). Pages of items newest first and out-of-line payloads are item-pages.ts; a
 * preview's read, preview-context.ts.
 */

/** See SessionLog.readContext. */
export async function readContext(
  log: LogContext,
  turn: OpenTurn,
  needed: TailRequirement | ((aggregates: HistoryAggregates) => TailRequirement),
  start: OverflowBoundary | null = null,
  from?: number,
): Promise<TurnHistory> {
  const requirement = typeof needed === 'function' ? needed : () => needed;
  const base = { ...turn.base, since: [...turn.base.since, ...turn.inputRecords] };
  return servedRead(
    turn.aggregates,
    start?.tool_start_seq ?? null,
    () => wholeAggregatesOf(log, turn.scope, base),
    (aggregates) => readTurnWindow(log, turn, requirement(aggregates), start, from),
  );
}

/** The tail view a turn reads, from `start` or, when that lacks a call its input answers, without it. */
async function readTurnWindow(
  log: LogContext,
  turn: OpenTurn,
  needed: TailRequirement,
  start: OverflowBoundary | null,
  from: number | undefined,
): Promise<{ history: TurnHistory; toolStart: number | null }> {
  const source: ReadSource = {
    base: turn.base,
    newer: turn.inputRecords,
    // Usually the claim read all it takes (the newest view and what came after); else the log below.
    below: () => ({
      newest: [...turn.carried, ...turn.inputRecords],
      cursor: logCursor(log.store, turn.scope, { pageLimit: 100, below: turn.carriedFromRecord }),
    }),
  };
  const floor = from ?? turn.context?.start_seq ?? 0;
  const read = await withFreshListing(() => readWindow(log, turn.scope, source, needed, floor, start));
  // An output of the input answering a call the window lacks: the safety net keeps such a call
  // with its output, as the whole history shows it (a protected call older than the boundary).
  if (start && answersUnread(turn.inputRecords, read.items))
    return {
      history: await withFreshListing(() => readWindow(log, turn.scope, source, needed, floor, null)),
      toolStart: null,
    };
  return { history: read, toolStart: start?.tool_start_seq ?? null };
}

/**
 * aggregatesOf `base` with every entry of `repeated`: a split one's older entries read from
 * their object, or, when it is gone (a newer view replaced it), from the history up to the view,
 * read from the log (exact, and rare: a read racing a pack, or an older view a rewind left).
 */
export async function wholeAggregatesOf(log: LogContext, scope: LogScope, base: Base): Promise<HistoryAggregates> {
  const view = base.view;
  if (view?.aggregates.repeated_older) {
    const cursor = () => logCursor(log.store, scope, { pageLimit: 100, below: view.record + 1 });
    // Up to the view's last seq: the segment of its record may reach past it (records after the
    // view packed into it), and the aggregates are extended over those items from `base.since`.
    const upToView = async () =>
      ((await readTail(log, scope, [], cursor(), { toolCalls: 'all', seqs: [] })) as LogItem[]).filter(
        (item) => item.seq <= view.last_seq,
      );
    const aggregates =
      (await withOlderRepeated(log, scope, view.aggregates)) ??
      log.viewPolicy.extendAggregates(log.viewPolicy.emptyAggregates(), await upToView(), () => false).aggregates;
    base = { ...base, view: { ...view, aggregates } };
  }
  return aggregatesOf(log.viewPolicy, base).aggregates;
}

/**
 * Where a read of the tail view finds its items: a base and the items after it (`newer`), and,
 * when the base falls short, the log below: the items newer than every unit of the cursor.
 */
export interface ReadSource {
  base: Base;
  newer: readonly LogItem[];
  below: () => { newest: readonly LogItem[]; cursor: UnitCursor };
}

/**
 * The tail view for `needed` from `floor` on, read from the overflow boundary `boundary` when
 * given (fromBoundary): from the base when it holds enough, else by walking the log.
 */
export async function readWindow(
  log: LogContext,
  scope: LogScope,
  source: ReadSource,
  needed: TailRequirement,
  floor: number,
  boundary: OverflowBoundary | null,
): Promise<TurnHistory> {
  const read = fromBoundary(needed, floor, boundary);
  const fromBase = tailFromBase(log.viewPolicy, source.base, source.newer, read.requirement, read.floor, read.start);
  if (fromBase) return { items: fromBase, readPastView: false };
  const { newest, cursor } = source.below();
  const items = await readTail(
    log,
    scope,
    newest,
    cursor,
    read.requirement,
    read.floor,
    false,
    read.start.messageStart,
  );
  return { items, readPastView: true };
}

/** Whether an output among `input` answers a call that `items` do not hold. */
function answersUnread(input: readonly LogItem[], items: readonly PromptItem[]): boolean {
  const calls = new Set<string>();
  for (const item of items) if (item.type === 'function_call') calls.add(item.call_id);
  return input.some((item) => item.type === 'function_call_output' && !calls.has(item.call_id));
}

/** A fresh listing that starts below the records `newest` carries (and below `newest`). */
export function cursorBelow(log: LogContext, scope: LogScope, newest: NonNullable<Head['newest']>): UnitCursor {
  return logCursor(log.store, scope, {
    pageLimit: 100,
    below: newest.record.recent?.[0]?.record ?? newest.record.record,
  });
}

/**
 * The tail walk behind readContext and previewContext. `newest` are the items newer than
 * every unit of `cursor` (seq order). Collects the suffix until it holds enough calls and
 * outputs, then only messages, required calls and candidate outputs for them. `untilCut`:
 * stops at the cut and returns just the suffix (the view writer has what comes before it).
 * `messageStart`: before the cut, nothing older is read (see `fromBoundary`).
 */
export async function readTail(
  log: LogContext,
  _scope: LogScope,
  newest: readonly LogItem[],
  cursor: UnitCursor,
  requirement: TailRequirement,
  floor = 0,
  untilCut = false,
  messageStart = floor,
): Promise<PromptItem[]> {
  const needed = requirement.toolCalls;
  const required = new Set(requirement.seqs);
  const suffix: LogItem[] = [];
  const before: LogItem[] = [];
  let cutSeq = needed !== 'all' && needed <= 0 ? Number.POSITIVE_INFINITY : 0;
  let calls = 0;
  let outputs = 0;
  const visit = (item: LogItem) => {
    // Nothing before the current context start is read into a prompt.
    if (item.seq < floor) return;
    if (cutSeq > 0) {
      if (item.type === 'message' || item.type === 'function_call_output' || required.has(item.seq)) before.push(item);
      return;
    }
    suffix.push(item);
    if (item.type === 'function_call') calls += 1;
    else if (item.type === 'function_call_output') outputs += 1;
    if (needed !== 'all' && calls >= needed && outputs >= needed) cutSeq = item.seq;
  };
  for (let index = newest.length - 1; index >= 0; index--) visit(newest[index]!);
  let lowest = newest.length > 0 ? newest[0]!.seq : Number.POSITIVE_INFINITY;
  // Required calls found in segments, and the segments walked (newest first) for their outputs.
  const pendingCalls: { call: LogItem & { type: 'function_call' }; segment: number }[] = [];
  const segments: {
    reader: SegmentReader;
    orphans: Record<string, number>;
    seqs: number[];
    loaded: Map<number, LogItem>;
    /** Its last seq in this log (a fork's ancestor's segment may hold later ones). */
    top: number;
  }[] = [];
  let block = 1;
  const walking = () => lowest > floor && !(cutSeq > 0 && (untilCut || lowest <= messageStart));
  for (let unit = walking() ? await cursor.next() : null; unit && walking(); unit = await cursor.next()) {
    if (unit.kind === 'record') {
      const { record, done } = await readRecord(log, unit);
      const items = [...record.items, ...(done?.items ?? [])];
      for (let index = items.length - 1; index >= 0; index--) if (items[index]!.seq < lowest) visit(items[index]!);
      if (items.length > 0) lowest = Math.min(lowest, items[0]!.seq);
      continue;
    }
    // A segment may reach over items seen already (carried by a newer record): clip it.
    const top = Math.min(unitTop(unit), lowest - 1);
    if (top < unit.firstSeq) continue;
    lowest = unit.firstSeq;
    // Past the cut only the index and the messages (at the end) are wanted: start small.
    const reader = new SegmentReader(log.store, unit.key, unit, cutSeq > 0 ? 8 * 1024 : undefined);
    const index = await reader.index();
    const messages = (await reader.messages()).filter((item) => item.seq <= top);
    const messageBySeq = new Map(messages.map((item) => [item.seq, item]));
    const toolSeqs = await reader.toolSeqs();
    const loaded = new Map<number, LogItem>();
    let position = lowerBound(toolSeqs, top + 1);
    let seq = top;
    for (; seq >= Math.max(index.first_seq, floor) && cutSeq === 0; seq--) {
      const message = messageBySeq.get(seq);
      if (message) {
        visit(message);
        continue;
      }
      position -= 1;
      if (position < 0 || toolSeqs[position] !== seq)
        throw new CorruptObjectError(unit.key, `segment does not hold seq ${seq}`);
      if (!loaded.has(position)) {
        // At least as many tool items as calls or outputs are still missing, never fewer than before.
        block = Math.max(block, needed === 'all' ? position + 1 : Math.max(needed - calls, needed - outputs, 1));
        const from = Math.max(0, position + 1 - block);
        const tools = await reader.tools(from, position + 1, true);
        for (const [offset, item] of tools.entries()) loaded.set(from + offset, item);
      }
      visit(loaded.get(position)!);
    }
    if (cutSeq === 0 || untilCut) continue;
    // Before the cut in this segment: messages, required calls, and their outputs.
    for (const message of messages) if (message.seq <= seq && message.seq >= floor) before.push(message);
    const wantedPositions: number[] = [];
    for (const requiredSeq of required) {
      const at = lowerBound(toolSeqs, requiredSeq);
      if (at < position && toolSeqs[at] === requiredSeq) wantedPositions.push(at);
    }
    const requiredCalls = await readPositions(reader, wantedPositions, loaded);
    const unmatched = new Set(index.unmatched);
    const segmentNumber = segments.length;
    for (const call of requiredCalls) {
      if (call.type !== 'function_call') continue;
      before.push(call);
      if (unmatched.has(call.seq)) {
        pendingCalls.push({ call, segment: segmentNumber });
        continue;
      }
      // Its output is later in this segment (usually the next lines): scan forward to it.
      let answered = false;
      for (
        let at = lowerBound(toolSeqs, call.seq) + 1;
        at < toolSeqs.length && toolSeqs[at]! < cutSeq && toolSeqs[at]! <= top && !answered;
        at++
      ) {
        if (!loaded.has(at)) await readPositions(reader, [at], loaded);
        const item = loaded.get(at)!;
        answered = item.type === 'function_call_output' && item.call_id === call.call_id;
        if (answered) before.push(item);
      }
      // A fork's ancestor's segment may answer it past the fork point: the fork's answer, if
      // any, is in a newer segment.
      if (!answered && top < index.last_seq) pendingCalls.push({ call, segment: segmentNumber });
    }
    // Kept for the outputs of required calls in older segments: of the tool lines loaded, only
    // those outputs (every block loaded, kept to the end of a long walk, took tens of MiB).
    const kept = new Map<number, LogItem>();
    for (const outputSeq of Object.values(index.orphans)) {
      const at = lowerBound(toolSeqs, outputSeq);
      const item = loaded.get(at);
      if (item) kept.set(at, item);
    }
    segments.push({ reader, orphans: index.orphans, seqs: toolSeqs, loaded: kept, top });
    // A segment that carries every earlier message ends the walk unless a required call is older.
    const carried = await reader.carriedMessages();
    if (carried !== null) {
      before.push(...carried.filter((item) => item.seq >= floor));
      if (![...required].some((requiredSeq) => requiredSeq < index.first_seq)) break;
    }
  }
  // Outputs of required calls stored in a newer segment than the call.
  for (const { call, segment } of pendingCalls) {
    for (let newer = segment - 1; newer >= 0; newer--) {
      const candidate = segments[newer]!;
      const outputSeq = Object.hasOwn(candidate.orphans, call.call_id) ? candidate.orphans[call.call_id] : undefined;
      if (outputSeq === undefined || outputSeq <= call.seq || outputSeq > candidate.top) continue;
      if (outputSeq < cutSeq)
        before.push(
          ...(await readPositions(candidate.reader, [lowerBound(candidate.seqs, outputSeq)], candidate.loaded)),
        );
      break;
    }
  }
  const start = Math.max(floor, messageStart);
  return assembleView(untilCut ? [] : before.filter((item) => item.seq >= start), suffix, cutSeq, required);
}

/** Loads the tool lines at `positions` (whole blocks, one range request per block). */
async function readPositions(
  reader: SegmentReader,
  positions: number[],
  loaded: Map<number, LogItem>,
): Promise<LogItem[]> {
  const sorted = [...new Set(positions)].sort((a, b) => a - b);
  const count = (await reader.toolSeqs()).length;
  const blocks = [
    ...new Set(sorted.filter((position) => !loaded.has(position)).map((position) => Math.floor(position / TOOL_BLOCK))),
  ];
  await mapLimit(blocks, PARALLEL_GETS, async (block) => {
    const from = block * TOOL_BLOCK;
    const items = await reader.tools(from, Math.min(count, from + TOOL_BLOCK), false);
    for (const [offset, item] of items.entries()) loaded.set(from + offset, item);
  });
  return sorted.map((position) => loaded.get(position)!);
}

/** Applies selectTail's rule for the part before the cut, then appends the suffix. */
function assembleView(before: LogItem[], suffix: LogItem[], cutSeq: number, required: Set<number>): PromptItem[] {
  const bySeq = new Map<number, LogItem>();
  for (const item of before) if (item.seq < cutSeq) bySeq.set(item.seq, item);
  const view: PromptItem[] = [];
  const awaiting = new Set<string>();
  for (const item of [...bySeq.values()].sort((a, b) => a.seq - b.seq)) {
    if (item.type === 'message') view.push(item);
    else if (item.type === 'function_call') {
      if (required.has(item.seq)) {
        view.push(item);
        awaiting.add(item.call_id);
      }
    } else if (awaiting.has(item.call_id)) {
      view.push(item);
      awaiting.delete(item.call_id);
    }
  }
  for (let index = suffix.length - 1; index >= 0; index--) view.push(suffix[index]!);
  return view;
}

import type { ContextStart, DoneRecord, LogRecord } from './records.ts';
import type { SegmentStateLine } from './segment-records.ts';

/**
 * The state each record closes with (counts, context start, overflow boundary, open calls),
 * kept per record in a segment's states section (lib/session/segment.ts), so that a fork at a
 * packed record starts from it as from an unpacked one (lib/session/log/fork.ts).
 */
export type RecordState = Omit<SegmentStateLine, 'context'> & { context: ContextStart | null };

/** The state record `record` closes with: its completion's where there is one, else its own. */
export function stateOf(record: LogRecord, done: DoneRecord | null): RecordState {
  const overflow = done?.overflow ?? record.overflow;
  const openCalls = done ? done.open_calls : record.open_calls;
  return {
    record: record.record,
    ...(record.kind === 'turn' && record.turn !== undefined ? { turn: record.turn } : {}),
    counts: done?.counts ?? record.counts,
    context: done?.context ?? record.context ?? null,
    ...(overflow ? { overflow } : {}),
    ...(openCalls ? { open_calls: openCalls } : {}),
  };
}

/**
 * The lines of `states`: each context start written once, on the first line and where it
 * changed. `before`: the context start of the line before them (lines added to a segment's).
 */
export function stateLines(states: readonly RecordState[], before?: ContextStart | null): SegmentStateLine[] {
  let previous = before === undefined ? undefined : JSON.stringify(before);
  return states.map(({ context, ...state }) => {
    const text = JSON.stringify(context);
    const changed = previous === undefined || text !== previous;
    previous = text;
    return changed ? { ...state, context } : state;
  });
}

/** The states of `lines`, each line's context start resolved (null: not one per record from `firstRecord`). */
export function resolveStates(lines: readonly SegmentStateLine[], firstRecord: number): RecordState[] | null {
  let context: ContextStart | null | undefined;
  const states: RecordState[] = [];
  for (const [index, { context: own, ...state }] of lines.entries()) {
    if (own !== undefined) context = own;
    if (context === undefined || state.record !== firstRecord + index) return null;
    states.push({ ...state, context });
  }
  return states;
}

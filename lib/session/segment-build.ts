import type { LogItem } from './records.ts';
import type { SegmentIndex, SegmentTurn } from './segment-records.ts';
import { LineBuffer } from './line-buffer.ts';
import { stateLines, type RecordState } from './segment-states.ts';

/**
 * Writing a segment (its layout: lib/session/segment.ts): from the items, turns and states of
 * its records, or from a segment it extends (`SegmentContent.base`), whose lines are kept as
 * they are and the new records' lines added after each of its sections.
 */

export const FOOTER_LENGTH = 33;
/** Tool lines per index mark. */
export const TOOL_BLOCK = 32;

export interface SegmentContent {
  firstRecord: number;
  lastRecord: number;
  /** Every item of the packed records, in seq order (dense); with `base`, those after it. */
  items: LogItem[];
  /** The outcome of every model turn in the packed records, in record order. */
  turns: SegmentTurn[];
  /**
   * Every message of the history before `items` (seq order), when they fit a small budget:
   * then a tail read that reaches this segment needs no older segment for messages.
   * null when they did not fit (older segments must be read for their messages).
   * With `base`, the base's (its lines are kept).
   */
  carried: LogItem[] | null;
  /** Each record's closing state, in record order (null: not known for every record, as when merging a v1 segment). */
  states: RecordState[] | null;
  /** Each item's UTF-8 line where the caller has one (JSON that parses to the item), else it is stringified. */
  lines?: readonly (Uint8Array | undefined)[];
  /**
   * The segment these records extend (its records come first): its bytes are copied, not
   * parsed and written again, so a merge costs what its new records cost plus a copy.
   */
  base?: SegmentBase;
}

/**
 * What extending a segment needs of it (SegmentReader.base reads it): its index and bytes, its
 * messages and carried ones (what the segment after it carries), its records' states, and the
 * calls its index names unmatched (an output of a new record may answer them).
 */
export interface SegmentBase {
  index: SegmentIndex;
  bytes: Uint8Array;
  messages: LogItem[];
  /** The messages before it that it carries (null: it carries none). */
  carried: LogItem[] | null;
  states: RecordState[];
  unmatched: LogItem[];
}

/**
 * The seq range of a segment of `items`: an empty one (records of no items only, as a fork's
 * first record) names the empty range starting at `firstSeq`, the seq its next item would take.
 */
function seqRange(items: readonly LogItem[], firstSeq: number): { firstSeq: number; lastSeq: number } {
  const first = items[0];
  const last = items[items.length - 1];
  return first && last ? { firstSeq: first.seq, lastSeq: last.seq } : { firstSeq, lastSeq: firstSeq - 1 };
}

/** The seq range of the segment `content` makes (its base's and its items'). */
export function segmentSeqs(content: SegmentContent, firstSeq: number): { firstSeq: number; lastSeq: number } {
  const own = seqRange(content.items, firstSeq);
  const base = content.base?.index;
  if (!base) return own;
  return { firstSeq: base.first_seq, lastSeq: content.items.length > 0 ? own.lastSeq : base.last_seq };
}

/** Serializes a segment (`firstSeq`: see seqRange). Deterministic: the same content gives the same bytes. */
export function buildSegment(content: SegmentContent, firstSeq: number): Uint8Array {
  return segmentBody(content, firstSeq).bytes();
}

/**
 * The bytes of buildSegment in parts, as a put takes them: the base's bytes and the lines given
 * as bytes are views of their arrays, not copies (they must not change until the put settles).
 */
export function segmentParts(content: SegmentContent, firstSeq: number): Uint8Array[] {
  return segmentBody(content, firstSeq).parts();
}

function segmentBody(content: SegmentContent, firstSeq: number): LineBuffer {
  const base = content.base;
  // A base has a states section (SegmentReader.base): what extends it brings its records' states.
  if (base && !content.states) throw new Error('a segment with states is extended without them');
  const at = base?.index;
  const body = new LineBuffer();
  /** Copies the base's bytes [from, to) and returns how far its offsets move. */
  const copy = (from: number, to: number) => {
    const shift = body.length - from;
    if (base && to > from) body.append(base.bytes.subarray(from, to), false);
    return shift;
  };
  const itemLine = (item: LogItem, index: number) => body.append(content.lines?.[index] ?? JSON.stringify(item));
  if (at) copy(0, at.turns.offset);
  const before = base ? base.states[base.states.length - 1]?.context : undefined;
  for (const state of stateLines(content.states ?? [], before)) body.append(JSON.stringify(state));
  const turnsOffset = body.length;
  const turnsShift = at ? copy(at.turns.offset, at.tools.offset) : 0;
  const turnEnds = [
    ...(at?.turns.ends.map((end) => end + turnsShift) ?? []),
    ...content.turns.map((turn) => body.append(JSON.stringify(turn))),
  ];
  const toolsOffset = body.length;
  const toolsShift = at ? copy(at.tools.offset, at.messages.offset) : 0;
  let toolCount = at?.tools.count ?? 0;
  const marks = at?.tools.marks.map((mark) => mark + toolsShift) ?? [];
  content.items.forEach((item, index) => {
    if (item.type === 'message') return;
    const end = itemLine(item, index);
    toolCount += 1;
    if (toolCount % TOOL_BLOCK === 0) marks.push(end);
  });
  const messagesOffset = body.length;
  if (at) copy(at.messages.offset, at.messages.offset + at.messages.length);
  else for (const item of content.carried ?? []) body.append(JSON.stringify(item));
  for (const [index, item] of content.items.entries()) if (item.type === 'message') itemLine(item, index);
  // As if the base's items came first: its unmatched calls still await an output.
  // Keyed by client-chosen call ids (`constructor`, `__proto__`): no prototype, own keys only.
  const orphans: Record<string, number> = Object.assign(Object.create(null), at?.orphans);
  const awaiting = new Map<string, number[]>();
  for (const item of [...(base?.unmatched ?? []), ...content.items]) {
    if (item.type === 'function_call') awaiting.set(item.call_id, [...(awaiting.get(item.call_id) ?? []), item.seq]);
    else if (item.type === 'function_call_output') {
      if (awaiting.has(item.call_id)) awaiting.delete(item.call_id);
      else if (!Object.hasOwn(orphans, item.call_id)) orphans[item.call_id] = item.seq;
    }
  }
  const unmatched = [...awaiting.values()].flat().sort((a, b) => a - b);
  const seqs = segmentSeqs(content, firstSeq);
  const states = base ? base.states.length + (content.states?.length ?? 0) : content.states?.length;
  const index: SegmentIndex = {
    format: content.states ? 'tailgate.segment.v2' : 'tailgate.segment.v1',
    first_record: at?.first_record ?? content.firstRecord,
    last_record: content.lastRecord,
    first_seq: seqs.firstSeq,
    last_seq: seqs.lastSeq,
    turns: {
      offset: turnsOffset,
      records: [...(at?.turns.records ?? []), ...content.turns.map((turn) => turn.record)],
      ends: turnEnds,
    },
    tools: { offset: toolsOffset, count: toolCount, marks },
    unmatched,
    orphans,
    messages: {
      offset: messagesOffset,
      length: body.length - messagesOffset,
      count: (at?.messages.count ?? 0) + content.items.length - (toolCount - (at?.tools.count ?? 0)),
    },
    carried: at ? at.carried : content.carried === null ? null : content.carried.length,
    ...(states !== undefined ? { states } : {}),
  };
  const indexOffset = body.length;
  const indexLength = body.append(JSON.stringify(index), false) - indexOffset;
  body.append(`${String(indexOffset).padStart(12, '0')} ${String(indexLength).padStart(12, '0')} TGSEG1`);
  return body;
}

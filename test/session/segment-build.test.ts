import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { LogItem } from '../../lib/session/records.ts';
import type { SegmentTurn } from '../../lib/session/segment-records.ts';
import {
  buildSegment,
  SegmentReader,
  segmentSeqs,
  type SegmentBase,
  type SegmentContent,
} from '../../lib/session/segment.ts';
import type { RecordState } from '../../lib/session/segment-states.ts';
import { MemoryStore } from '../../lib/store/memory.ts';

const AT = '2026-01-01T00:00:00.000Z';
const CONTEXTS = [
  null,
  {
    base_record: 1,
    start_seq: 1,
    summary: 'a summary',
    summarized: { first_seq: 1, last_seq: 1 },
    interrupted: [],
    model: 'echo',
    created_at: AT,
  },
  {
    base_record: 2,
    start_seq: 3,
    summary: 'another summary',
    summarized: { first_seq: 1, last_seq: 2 },
    interrupted: ['a'],
    model: 'echo',
    created_at: AT,
  },
];

/** One record's part of a segment: its items (seqs given later), whether it is a model turn, its context. */
interface RecordShape {
  items: ({ kind: 'message'; text: string } | { kind: 'call' | 'output'; id: string })[];
  turn: boolean;
  context: number;
}

const recordShape: fc.Arbitrary<RecordShape> = fc.record({
  items: fc.array(
    fc.oneof(
      fc.record({ kind: fc.constant('message' as const), text: fc.string({ maxLength: 8 }) }),
      fc.record({ kind: fc.constant('call' as const), id: fc.constantFrom('a', 'b', 'c') }),
      fc.record({ kind: fc.constant('output' as const), id: fc.constantFrom('a', 'b', 'c') }),
    ),
    { maxLength: 16 },
  ),
  turn: fc.boolean(),
  context: fc.nat({ max: 2 }),
});

/** The content of records `shapes` from record `firstRecord` and seq `firstSeq`. */
function contentOf(
  shapes: RecordShape[],
  firstRecord: number,
  firstSeq: number,
  carried: LogItem[] | null,
): SegmentContent {
  let seq = firstSeq;
  const items: LogItem[] = [];
  const turns: SegmentTurn[] = [];
  const states: RecordState[] = [];
  shapes.forEach((shape, offset) => {
    const record = firstRecord + offset;
    for (const part of shape.items) {
      const at = { seq: seq++, created_at: AT };
      if (part.kind === 'message') items.push({ type: 'message', role: 'user', content: part.text, ...at });
      else if (part.kind === 'call')
        items.push({ type: 'function_call', call_id: part.id, name: 'read', arguments: '{}', ...at });
      else items.push({ type: 'function_call_output', call_id: part.id, output: `out ${seq}`, ...at });
    }
    if (shape.turn) turns.push({ record, turn: record, status: 'completed' });
    states.push({
      record,
      counts: { items: seq - 1, turns: record, tool_calls: 0 },
      context: CONTEXTS[shape.context]!,
    });
  });
  return { firstRecord, lastRecord: firstRecord + shapes.length - 1, items, turns, carried, states };
}

describe('a segment extended by later records', () => {
  it('is byte for byte the segment of all the records, its lines copied and not parsed (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(recordShape, { minLength: 2, maxLength: 8 }),
        fc.nat({ max: 7 }),
        fc.boolean(),
        async (shapes, cut, carries) => {
          const split = 1 + (cut % (shapes.length - 1));
          const carried: LogItem[] | null = carries
            ? [{ type: 'message', role: 'user', content: 'before', seq: 1, created_at: AT }]
            : null;
          const whole = contentOf(shapes, 3, 2, carried);
          const first = contentOf(shapes.slice(0, split), 3, 2, carried);
          const store = new MemoryStore();
          const range = { firstRecord: 3, lastRecord: 2 + split, ...segmentSeqs(first, 2) };
          await store.put('first', buildSegment(first, 2));
          const base = await new SegmentReader(store, 'first', range).base();
          expect(base).not.toBeNull();
          const nextSeq = range.lastSeq + 1;
          const rest = contentOf(shapes.slice(split), 3 + split, nextSeq, null);
          const extended = buildSegment({ ...rest, firstRecord: 3, carried, base: base! }, nextSeq);
          expect(new TextDecoder().decode(extended)).toBe(new TextDecoder().decode(buildSegment(whole, 2)));
          // What a reader gets back from it is the whole content.
          await store.put('extended', extended);
          const read = new SegmentReader(store, 'extended', {
            firstRecord: 3,
            lastRecord: whole.lastRecord,
            ...segmentSeqs(whole, 2),
          });
          const back = await read.content();
          expect(back.items).toEqual(whole.items);
          expect(back.states).toEqual(whole.states);
        },
      ),
      { numRuns: 300 },
    );
  });

  it.each([31, 32, 33, 64])('moves the tool marks of a base of %i tool lines, extended twice', async (baseLines) => {
    // A record per tool item, calls and their outputs in turn: an odd base ends on an unanswered call.
    const all = Array.from({ length: baseLines + 47 }, (_, index) => ({
      items: [{ kind: index % 2 === 0 ? ('call' as const) : ('output' as const), id: `c${index >> 1}` }],
      turn: false,
      context: index % 3,
    }));
    const parts = [all.slice(0, baseLines), all.slice(baseLines, baseLines + 7), all.slice(baseLines + 7)];
    const store = new MemoryStore();
    let record = 3;
    let seq = 2;
    let base: SegmentBase | undefined;
    let bytes: Uint8Array = new Uint8Array();
    for (const [at, part] of parts.entries()) {
      const content = { ...contentOf(part, record, seq, null), ...(base ? { firstRecord: 3, base } : {}) };
      bytes = buildSegment(content, seq);
      const range = { firstRecord: 3, lastRecord: content.lastRecord, ...segmentSeqs(content, seq) };
      await store.put(`part${at}`, bytes);
      base = (await new SegmentReader(store, `part${at}`, range).base())!;
      record += part.length;
      seq = range.lastSeq + 1;
    }
    expect(new TextDecoder().decode(bytes)).toBe(new TextDecoder().decode(buildSegment(contentOf(all, 3, 2, null), 2)));
    expect(base!.index.tools.marks).toHaveLength(Math.floor(base!.index.tools.count / 32));
  });
});

import { describe, expect, it } from 'vitest';
import type { LogItem } from '../../lib/session/records.ts';
import { buildSegment, SegmentReader, type SegmentContent } from '../../lib/session/segment.ts';
import type { RecordState } from '../../lib/session/segment-states.ts';
import { MemoryStore } from '../../lib/store/memory.ts';

const AT = '2026-01-01T00:00:00.000Z';
const items: LogItem[] = [1, 2, 3].map((seq) => ({
  type: 'message',
  role: 'user',
  content: `m${seq}`,
  seq,
  created_at: AT,
}));
const context = {
  base_record: 3,
  start_seq: 2,
  summary: 'a long summary '.repeat(40),
  summarized: { first_seq: 1, last_seq: 1 },
  interrupted: [],
  model: 'echo',
  created_at: AT,
};
const states: RecordState[] = [
  { record: 3, counts: { items: 1, turns: 0, tool_calls: 0 }, context: null, open_calls: [] },
  { record: 4, turn: 1, counts: { items: 2, turns: 1, tool_calls: 0 }, context, open_calls: ['c1'] },
  { record: 5, counts: { items: 3, turns: 1, tool_calls: 0 }, context, open_calls: [] },
];

async function read(content: SegmentContent) {
  const store = new MemoryStore();
  const bytes = buildSegment(content, 1);
  await store.put('s', bytes);
  const reader = new SegmentReader(store, 's', { firstRecord: 3, lastRecord: 5, firstSeq: 1, lastSeq: 3 });
  return { bytes, reader };
}

describe('segment states', () => {
  it("keeps each record's closing state, a context start written once, and reads them back", async () => {
    const { bytes, reader } = await read({ firstRecord: 3, lastRecord: 5, items, turns: [], carried: [], states });
    expect(await reader.states()).toEqual(states);
    expect((await reader.index()).format).toBe('tailgate.segment.v2');
    expect(new TextDecoder().decode(bytes).split('a long summary').length - 1).toBe(40);
    expect((await reader.content()).states).toEqual(states);
    expect(await reader.messages()).toEqual(items);
  });

  it('reads a segment written without states (v1) as one that has none', async () => {
    const { reader } = await read({ firstRecord: 3, lastRecord: 5, items, turns: [], carried: [], states: null });
    expect((await reader.index()).format).toBe('tailgate.segment.v1');
    expect(await reader.states()).toBeNull();
    expect((await reader.content()).states).toBeNull();
    expect(await reader.messages()).toEqual(items);
  });
});

import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { parseRecordsEntry } from '../../lib/session/keys.ts';
import { SegmentReader } from '../../lib/session/segment.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { CountingStore } from '../support/counting-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { SessionLog } from '../support/session-log.ts';

const batch = (from: number, count: number, bytes: number): Item[] =>
  Array.from({ length: count }, (_, index) => ({
    type: 'message',
    role: 'user',
    content: `m${from + index} ${'x'.repeat(bytes)}`,
  }));

/** Above what a segment carries of the messages before it (64 KiB at most), so segments hold several records. */
const TARGET = 100 * 1024;

/** A session of `records` appends of 10 items of about 1 KiB each (about 10 KiB a record), not packed. */
async function backlog(store: MemoryStore | FaultyStore, records: number) {
  const log = new SessionLog(store, { segmentTargetBytes: TARGET, packMinRecords: 8, viewEveryRecords: 1000 });
  await log.create({ id: 's' });
  for (let record = 0; record < records; record++) await log.append('s', batch(record * 10, 10, 1000));
  const expected = (await log.listItems('s', { limit: 1000 })).items;
  return { log, expected };
}

async function segments(store: MemoryStore | FaultyStore) {
  return (await store.list('sessions/s/turn/')).objects.filter((object) => object.key.endsWith('.seg'));
}

describe('packing a backlog', () => {
  it('writes several segments of at most about segmentTargetBytes plus one record, never one huge object', async () => {
    const store = new MemoryStore();
    const { log, expected } = await backlog(store, 40);
    const result = await log.pack('s');
    expect(result).toMatchObject({ packed: true, records: 38, through: 38 });
    const written = await segments(store);
    // 38 records of about 10 KiB: one segment would be about 380 KiB.
    expect(written.length).toBeGreaterThanOrEqual(4);
    for (const segment of written) expect(segment.size).toBeLessThanOrEqual(TARGET + 12 * 1024);
    expect((await log.listItems('s', { limit: 1000 })).items).toEqual(expected);
  });

  it('keeps the segments a failing pack stored; the next pack goes on after them, writing none again', async () => {
    const store = new FaultyStore(new MemoryStore());
    const { log, expected } = await backlog(store, 40);
    let segmentPuts = 0;
    store.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.seg') && ++segmentPuts === 3, {
      times: 1,
    });
    await expect(log.pack('s')).rejects.toThrow();
    const stored = (await segments(store)).map((object) => object.key);
    expect(stored).toHaveLength(2);
    expect((await log.listItems('s', { limit: 1000 })).items).toEqual(expected);
    const puts: string[] = [];
    store.failWhen(({ operation, key }) => {
      if (operation === 'put' && key.endsWith('.seg')) puts.push(key);
      return false;
    });
    const result = await log.pack('s');
    expect(result).toMatchObject({ packed: true, through: 38 });
    for (const key of stored) expect(puts).not.toContain(key);
    expect((await segments(store)).map((object) => object.key)).toEqual(expect.arrayContaining(stored));
    expect((await log.listItems('s', { limit: 1000 })).items).toEqual(expected);
  });
});

describe('packing in small batches', () => {
  it('merges records into the newest segment; the next segment carries the messages before it', async () => {
    const store = new MemoryStore();
    // Records merged into the newest segment until it would pass the target.
    const log = new SessionLog(store, { segmentTargetBytes: TARGET, packMinRecords: 1, keepRecords: 1 });
    await log.create({ id: 's' });
    for (let record = 0; record < 60; record++) {
      // A message, and a call answered in the next record: the merge meets calls still unanswered.
      const call: Item = { type: 'function_call', call_id: `c${record}`, name: 'read', arguments: '{}' };
      const answer: Item[] =
        record > 0 ? [{ type: 'function_call_output', call_id: `c${record - 1}`, output: 'o'.repeat(4000) }] : [];
      await log.append('s', [...answer, ...batch(record, 1, 20), call]);
      // Every fifth record: a pack merges records into the newest segment, then starts the next.
      if (record % 5 === 4) await log.pack('s');
    }
    const items = (await log.listItems('s', { limit: 1000 })).items.sort((a, b) => a.seq - b.seq);
    const prefix = 'sessions/s/turn/';
    let merged = 0;
    let checked = 0;
    for (const object of await segments(store)) {
      const entry = parseRecordsEntry(object.key.slice(prefix.length).split('/')[1]!);
      if (entry?.kind !== 'segment') continue;
      const reader = new SegmentReader(store, object.key, entry);
      if (entry.lastRecord > entry.firstRecord + 1) merged += 1;
      // Every message before the segment, in seq order (all of them fit what a segment carries).
      const before = items.filter((item) => item.seq < entry.firstSeq && item.type === 'message');
      expect((await reader.carriedMessages())?.map((item) => item.seq)).toEqual(before.map((item) => item.seq));
      const own = items.filter((item) => item.seq >= entry.firstSeq && item.seq <= entry.lastSeq);
      expect((await reader.content()).items.map((item) => item.seq)).toEqual(own.map((item) => item.seq));
      // Its unanswered calls: only the newest record's call (the next record answers it).
      const last = own.filter((item) => item.type === 'function_call').at(-1)!;
      const index = await reader.index();
      expect(index.unmatched).toEqual([last.seq]);
      // An output whose call is in the segment is no orphan.
      for (const id of Object.keys(index.orphans))
        expect(items.find((item) => item.type === 'function_call' && item.call_id === id)!.seq).toBeLessThan(
          entry.firstSeq,
        );
      checked += 1;
    }
    expect(merged).toBeGreaterThanOrEqual(2);
    expect(checked).toBeGreaterThanOrEqual(3);
  });

  it('lists the log once when no view is due: the page the view writer listed is the first of the pack', async () => {
    const store = new CountingStore(new MemoryStore());
    const log = new SessionLog(store, { segmentTargetBytes: TARGET, packMinRecords: 1, viewEveryRecords: 8 });
    await log.create({ id: 's' });
    for (let record = 0; record < 8; record++) await log.append('s', batch(record * 10, 10, 100));
    expect(await log.pack('s')).toMatchObject({ packed: true, view: expect.any(String) });
    for (let record = 8; record < 12; record++) await log.append('s', batch(record * 10, 10, 100));
    const expected = (await log.listItems('s', { limit: 1000 })).items;
    expect(expected).toHaveLength(120);
    store.reset();
    const result = await log.pack('s');
    expect(result).toMatchObject({ packed: true });
    expect(result.view).toBeUndefined();
    expect(store.counts.list).toBe(1);
    expect((await log.listItems('s', { limit: 1000 })).items).toEqual(expected);
  });
});

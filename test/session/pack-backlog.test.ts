import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
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

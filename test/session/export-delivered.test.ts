import { describe, expect, it } from 'vitest';
import { sessionPrefix } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { importLines } from '../../lib/transfer.ts';
import { exportText } from '../support/export-lines.ts';
import { CountingStore } from '../support/counting-store.ts';
import { transferWorld } from '../support/transfer-world.ts';

/** More delivery records than one list call returns (1,000 keys). */
const RECORDS = 1_100;

const world = (store: ObjectStore) => transferWorld(store, { inbox: { maxNoticesPerTurn: RECORDS } });

async function* chunks(text: string, size = 4096): AsyncGenerator<Uint8Array> {
  const bytes = new TextEncoder().encode(text);
  for (let start = 0; start < bytes.length; start += size) yield bytes.slice(start, start + size);
}

describe('the delivered notices of a session export', () => {
  it('come page after page, every one in stored_as order, and an import gives them back as they were', async () => {
    const counting = new CountingStore(new MemoryStore());
    const w = world(counting);
    await w.sessions.create({ id: 'many' });
    const prefix = sessionPrefix('', 'many');
    const names = Array.from({ length: RECORDS }, (_, index) => `n${String(index).padStart(5, '0')}.md`);
    for (const name of names) await counting.inner.put(`${prefix}inbox/${name}`, `content of ${name}`);
    expect((await w.inbox.consume('many', { turn: 1 })).delivered).toHaveLength(RECORDS);
    // Takeover markers under a record's key are no records.
    await counting.inner.put(`${prefix}inbox_removed/${names[0]}/taken-1-0`, '2:x');

    const text = await exportText(w.services, 'many');
    const notices = text
      .split('\n')
      .filter((line) => line.includes('"type":"notice"'))
      .map((line) => JSON.parse(line));
    expect(notices.map((notice) => notice.stored_as)).toEqual(names);
    expect(notices.map((notice) => notice.content)).toEqual(names.map((name) => `content of ${name}`));
    expect(notices.every((notice) => notice.turn === 1)).toBe(true);

    // The first lines come before the records after them are read.
    counting.reset();
    const delivered = w.inbox.exportDelivered('many');
    const first = await delivered.next();
    expect(first.value.split('\n').filter(Boolean).length).toBeGreaterThan(0);
    expect(counting.counts.get).toBeLessThanOrEqual(32);
    await delivered.return(undefined);

    const copy = world(new MemoryStore());
    await importLines(copy.services, chunks(text.replace('"id":"many"', '"id":"copy"')), {
      maxItemBytes: 4096,
      maxNoticeBytes: 1024,
      maxLineBytes: 8192,
    });
    expect((await exportText(copy.services, 'copy')).replace('"id":"copy"', '"id":"many"')).toBe(text);
    expect((await copy.inbox.listDelivered('copy')).map((record) => record.stored_as)).toEqual(names);
  });
});

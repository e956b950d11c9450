import { describe, expect, it } from 'vitest';
import { commit } from '../../lib/session/log/commit.ts';
import { logContext } from '../../lib/session/log/context.ts';
import { readHead } from '../../lib/session/log/head.ts';
import { RecordCache } from '../../lib/session/log/record-cache.ts';
import { recordKey } from '../../lib/session/keys.ts';
import type { LogRecord } from '../../lib/session/records.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { toBytes } from '../../lib/store/object-store.ts';
import { viewPolicy } from '../../lib/turn/view-policy.ts';
import { SessionLog } from '../support/session-log.ts';

const bytesOf = (text: string) => toBytes(text);
const fakeRecord = (record: number) => ({ record }) as unknown as LogRecord;

describe('RecordCache', () => {
  it('gives a record back only for the bytes stored with it, and keeps within its bytes', () => {
    const cache = new RecordCache(10);
    cache.remember('a', bytesOf('aaaa'), fakeRecord(1));
    expect(cache.recall('a', bytesOf('aaaa'))?.record).toBe(1);
    // Other bytes under the key (rewritten after a delete, buried): not this record, and forgotten.
    expect(cache.recall('a', bytesOf('aaab'))).toBeUndefined();
    expect(cache.recall('a', bytesOf('aaaa'))).toBeUndefined();
    expect(cache.recall('a', bytesOf(''))).toBeUndefined();
    cache.remember('b', bytesOf('bbbbbb'), fakeRecord(2));
    cache.remember('c', bytesOf('cccccc'), fakeRecord(3));
    // 12 bytes are more than 10: the oldest went.
    expect(cache.recall('b', bytesOf('bbbbbb'))).toBeUndefined();
    expect(cache.recall('c', bytesOf('cccccc'))?.record).toBe(3);
    cache.remember('d', bytesOf('d'.repeat(11)), fakeRecord(4));
    expect(cache.recall('d', bytesOf('d'.repeat(11)))).toBeUndefined();
  });

  it('compares bytes that are not aligned to words', () => {
    const cache = new RecordCache(100);
    const stored = bytesOf('x123456789');
    cache.remember('k', stored, fakeRecord(1));
    const shifted = new Uint8Array(12);
    shifted.set(stored, 1);
    expect(cache.recall('k', shifted.subarray(1, 11))?.record).toBe(1);
    shifted[10] = 0;
    expect(cache.recall('k', shifted.subarray(1, 11))).toBeUndefined();
  });
});

describe('reading back the records a process wrote', () => {
  it('reuses the record it wrote instead of parsing it again, and reads what another wrote there', async () => {
    const store = new MemoryStore();
    await new SessionLog(store).create({ id: 's1' });
    const log = logContext(store, { viewPolicy });
    const item = { type: 'message', role: 'user', content: 'hi' } as const;
    const written = await commit(log, 's1', [item], { kind: 'append' });
    const head = await readHead(log, 's1');
    expect('record' in written && head.newest?.record).toBe('record' in written ? written.record : null);
    // The same key holding other bytes (deleted and written again elsewhere): read from storage.
    const key = recordKey(head.scope, 1);
    const other = { ...head.newest!.record, writer: 'someone-else' };
    await store.delete([key]);
    await store.put(key, JSON.stringify(other));
    const again = await readHead(log, 's1');
    expect(again.newest?.record).toEqual(other);
    expect(again.newest?.record).not.toBe(head.newest?.record);
    // Parsed once, then kept: the next read of the same bytes parses nothing.
    expect((await readHead(log, 's1')).newest?.record).toBe(again.newest?.record);
  });

  it('stores a record carrying earlier ones as the JSON of the record it keeps', async () => {
    const store = new MemoryStore();
    await new SessionLog(store).create({ id: 's1' });
    const log = logContext(store, { viewPolicy });
    let last: LogRecord | null = null;
    for (let index = 0; index < 4; index++) {
      const items = [{ type: 'message', role: 'user', content: `hi "${index}" \u2028 é` } as const];
      const written = await commit(log, 's1', items, { kind: 'append' });
      if ('record' in written) last = written.record;
    }
    expect(last?.recent?.length).toBe(3);
    const stored = await store.get(recordKey((await readHead(log, 's1')).scope, 4));
    expect(JSON.parse(new TextDecoder().decode(stored!.body))).toEqual(JSON.parse(JSON.stringify(last)));
  });
});

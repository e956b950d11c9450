import { describe, expect, it } from 'vitest';
import { ProcessStore } from '../../bench/process-store.ts';
import type { Item } from '../../lib/items.ts';
import { logContext } from '../../lib/session/log/context.ts';
import { readHead, readRecord, RecordMissingError } from '../../lib/session/log/head.ts';
import { parseRecordsEntry, recordKey } from '../../lib/session/keys.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { viewPolicy } from '../../lib/turn/view-policy.ts';
import { logCursor } from '../../lib/session/unit-cursor.ts';
import { SessionLog } from '../support/session-log.ts';

/** One process's store (caches of its own, log/record-cache.ts among them) that notes the keys it gets. */
class Process extends ProcessStore {
  readonly gets: string[] = [];
  override get(...args: Parameters<ObjectStore['get']>) {
    this.gets.push(args[0]);
    return super.get(...args);
  }
  /** The records (not completions, views, segments) got since the last call. */
  recordGets(): string[] {
    const keys = this.gets.splice(0).filter((key) => {
      const name = key.slice(key.lastIndexOf('/') + 1);
      return parseRecordsEntry(name)?.kind === 'record';
    });
    return keys;
  }
}

/** A key prefix of its own for each log (a bucket may be shared by tests). */
const ownPrefix = () => `record-cache-${crypto.randomUUID()}/`;

const items = (from: number, count: number): Item[] =>
  Array.from({ length: count }, (_, index) => ({ type: 'message', role: 'user', content: `m${from + index}` }));

/**
 * The record cache taking a record on a listing alone (log/record-cache.ts recallListed): a record
 * listed with the etag and size it was written or read with is not read again, and what another
 * process stored under its key since is read, as a get would read it. Each call of `makeStore`
 * gives a store; the processes here share it, each through a store of its own, under a key prefix
 * of their test's own.
 */
export function defineRecordCacheSuite(name: string, makeStore: () => ObjectStore | Promise<ObjectStore>) {
  describe(`the record cache on a listing (${name})`, () => {
    it('reads no record its process wrote, and reads what another process stored under the key', async () => {
      const stored = await makeStore();
      const one = new Process(stored);
      const keyPrefix = ownPrefix();
      const log = new SessionLog(one, { keyPrefix });
      await log.create({ id: 's' });
      await log.append('s', items(0, 3));
      await log.append('s', items(3, 3));
      const context = logContext(one, { viewPolicy, keyPrefix });
      const head = await readHead(context, 's');
      const key = recordKey(head.scope, 2);
      expect(head.newest?.key).toBe(key);
      one.recordGets();
      // The newest record, listed as written: taken from the cache, no get.
      const again = await readHead(context, 's');
      expect(again.newest?.record).toBe(head.newest?.record);
      expect(one.recordGets()).toEqual([]);

      // Another process deletes the record and writes one of the same size under the key: read.
      const other = new ProcessStore(stored);
      const body = (await other.get(key))!.body;
      const text = new TextDecoder().decode(body);
      const writer = JSON.parse(text).writer as string;
      const rival = text.replace(JSON.stringify(writer), JSON.stringify('w'.repeat(writer.length)));
      expect(rival.length).toBe(text.length);
      await other.delete(key);
      await other.put(key, rival, { onlyIfAbsent: true });
      const read = await readHead(context, 's');
      expect(read.newest?.record.writer).toBe('w'.repeat(writer.length));
      expect(one.recordGets()).toEqual([key]);
      // Read once, then kept with the etag read: the next read takes it from the cache.
      expect((await readHead(context, 's')).newest?.record).toBe(read.newest?.record);
      expect(one.recordGets()).toEqual([]);

      // Buried (a tombstone: empty), then written again with the first bytes: read, and the same record.
      await other.put(key, new Uint8Array(0));
      expect((await readHead(context, 's')).newest?.key).toBe(recordKey(head.scope, 1));
      await other.put(key, body);
      const back = await readHead(context, 's');
      expect(back.newest?.record.writer).toBe(writer);
      expect(back.newest?.record).toEqual(head.newest?.record);
      // Another process's log reads its own.
      const elsewhere = logContext(other, { viewPolicy, keyPrefix });
      expect((await readHead(elsewhere, 's')).newest?.record).toEqual(head.newest?.record);
    });

    it('takes a record listed before another process buried it as listed; listed after, passes it', async () => {
      const stored = await makeStore();
      const one = new Process(stored);
      const keyPrefix = ownPrefix();
      const log = new SessionLog(one, { keyPrefix });
      await log.create({ id: 's' });
      await log.append('s', items(0, 2));
      await log.append('s', items(2, 2));
      const context = logContext(one, { viewPolicy, keyPrefix });
      const { scope, newest } = await readHead(context, 's');
      const listed = await logCursor(one, scope).next();
      expect(listed).toMatchObject({ kind: 'record', record: 2 });
      if (listed?.kind !== 'record') throw new Error('the newest record is not listed');
      // Another process's packer buries the record (an empty object) after the listing.
      await new ProcessStore(stored).put(recordKey(scope, 2), new Uint8Array(0));
      one.recordGets();
      // As a get right after the listing would have read it: the record, no get.
      const read = await readRecord(context, listed);
      expect(read.record).toBe(newest?.record);
      expect(one.recordGets()).toEqual([]);
      // Listed again, the tombstone is passed over; got by its key, it is missing.
      const relisted = await logCursor(one, scope).next();
      expect(relisted).toMatchObject({ kind: 'record', record: 1 });
      const { listed: _, ...unlisted } = listed;
      await expect(readRecord(context, unlisted)).rejects.toBeInstanceOf(RecordMissingError);
    });

    it('an append and its pack get no record their process wrote', async () => {
      const one = new Process(await makeStore());
      const log = new SessionLog(one, {
        keyPrefix: ownPrefix(),
        packMinRecords: 4,
        viewEveryRecords: 4,
        keepRecords: 1,
      });
      await log.create({ id: 's' });
      for (let index = 0; index < 12; index++) await log.append('s', items(index * 5, 5));
      const packed = await log.pack('s');
      expect(packed).toMatchObject({ packed: true });
      expect((await log.listItems('s', { limit: 100 })).items).toHaveLength(60);
      expect(one.recordGets()).toEqual([]);
    });
  });
}

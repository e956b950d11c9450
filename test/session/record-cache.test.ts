import { describe, expect, it } from 'vitest';
import { createServices } from '../../functions/services.ts';
import { parseServiceConfig } from '../../lib/config.ts';
import { DEFAULTS } from '../../lib/defaults.ts';
import { echoModel } from '../../lib/models/echo.ts';
import { commit } from '../../lib/session/log/commit.ts';
import { logContext } from '../../lib/session/log/context.ts';
import { readHead } from '../../lib/session/log/head.ts';
import { RecordCache, recordCacheOf } from '../../lib/session/log/record-cache.ts';
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
    cache.remember('a', bytesOf('aaaa'), fakeRecord(1), undefined);
    expect(cache.recall('a', bytesOf('aaaa'))?.record).toBe(1);
    // Other bytes under the key (rewritten after a delete, buried): not this record, and forgotten.
    expect(cache.recall('a', bytesOf('aaab'))).toBeUndefined();
    expect(cache.recall('a', bytesOf('aaaa'))).toBeUndefined();
    expect(cache.recall('a', bytesOf(''))).toBeUndefined();
    cache.remember('b', bytesOf('bbbbbb'), fakeRecord(2), undefined);
    cache.remember('c', bytesOf('cccccc'), fakeRecord(3), undefined);
    // 12 bytes are more than 10: the oldest went.
    expect(cache.recall('b', bytesOf('bbbbbb'))).toBeUndefined();
    expect(cache.recall('c', bytesOf('cccccc'))?.record).toBe(3);
    cache.remember('d', bytesOf('d'.repeat(11)), fakeRecord(4), undefined);
    expect(cache.recall('d', bytesOf('d'.repeat(11)))).toBeUndefined();
  });

  it('gives a record back on a listing only for the etag and size kept with it', () => {
    const cache = new RecordCache(100);
    cache.remember('a', bytesOf('aaaa'), fakeRecord(1), '"e1"');
    expect(cache.recallListed('a', { etag: '"e1"', size: 4 })?.record).toBe(1);
    // Another etag or size under the key (written again, buried): not taken, and left for the get.
    expect(cache.recallListed('a', { etag: '"e2"', size: 4 })).toBeUndefined();
    expect(cache.recallListed('a', { etag: '"e1"', size: 0 })).toBeUndefined();
    expect(cache.recallListed('b', { etag: '"e1"', size: 4 })).toBeUndefined();
    expect(cache.recall('a', bytesOf('aaaa'))?.record).toBe(1);
    // No etag (an S3-compatible service that gives none) names nothing; a get's etag of the same bytes does.
    cache.remember('c', bytesOf('cccc'), fakeRecord(3), '');
    expect(cache.recallListed('c', { etag: '', size: 4 })).toBeUndefined();
    expect(cache.recall('c', bytesOf('cccc'), { etag: '"e3"' })?.record).toBe(3);
    expect(cache.recallListed('c', { etag: '"e3"', size: 4 })?.record).toBe(3);
  });

  it('compares bytes that are not aligned to words', () => {
    const cache = new RecordCache(100);
    const stored = bytesOf('x123456789');
    cache.remember('k', stored, fakeRecord(1), undefined);
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

  it("stores a record's fields in their order, its items in their place, what it carries last", async () => {
    const store = new MemoryStore();
    await new SessionLog(store).create({ id: 's1' });
    const log = logContext(store, { viewPolicy });
    const call = { type: 'function_call', call_id: 'c1', name: 'read', arguments: '{"path":"a"}' } as const;
    const output = { type: 'function_call_output', call_id: 'c1', output: 'é \u2028 "x"' } as const;
    for (const [number, items] of [
      [1, [call]],
      [2, [output, call]],
      [3, [output]],
    ] as const) {
      const written = await commit(log, 's1', [...items], { kind: 'append' });
      const { recent, ...rest } = 'record' in written ? written.record : ({} as LogRecord);
      expect(number === 1 ? recent : recent?.length).toBe(number === 1 ? undefined : number - 1);
      const stored = await store.get(recordKey((await readHead(log, 's1')).scope, number));
      // Byte for byte JSON.stringify of the record with `recent` moved last.
      expect(new TextDecoder().decode(stored!.body)).toBe(JSON.stringify(recent ? { ...rest, recent } : rest));
    }
  });
});

describe('the record cache of a store', () => {
  const item = (text: string) => ({ type: 'message', role: 'user', content: text }) as const;

  it('keeps at most its budget of the records written, the newest, and none at 0', async () => {
    const store = new MemoryStore();
    const budget = 16 * 1024;
    const sessions = new SessionLog(store, { recordCacheBytes: budget });
    await sessions.create({ id: 's1' });
    // Each record carries the ones before it: a few KiB of JSON each, soon more than the budget.
    for (let index = 0; index < 12; index++) await sessions.append('s1', [item(`${index} ${'x'.repeat(1000)}`)]);
    const cache = recordCacheOf(store, budget)!;
    expect(cache.bytes).toBeGreaterThan(budget / 2);
    expect(cache.bytes).toBeLessThanOrEqual(budget);
    const log = logContext(store, { viewPolicy, recordCacheBytes: budget });
    const head = await readHead(log, 's1');
    const bytesOfRecord = async (record: number) => (await store.get(recordKey(head.scope, record)))!.body;
    // The newest was kept (its read parsed nothing), the first went when the budget was reached.
    expect(cache.recall(recordKey(head.scope, 12), await bytesOfRecord(12))).toBe(head.newest!.record);
    expect(cache.recall(recordKey(head.scope, 1), await bytesOfRecord(1))).toBeUndefined();
    expect(recordCacheOf(store, 0)).toBeNull();
    const off = logContext(store, { viewPolicy, recordCacheBytes: 0 });
    expect((await readHead(off, 's1')).newest!.record).not.toBe((await readHead(off, 's1')).newest!.record);
  });

  it('is sized by RECORD_CACHE_BYTES in the services the app builds, 32 MiB by default (Node, Deno)', async () => {
    expect(DEFAULTS.recordCacheBytes).toBe(32 * 1024 * 1024);
    for (const [setting, budget] of [
      [undefined, DEFAULTS.recordCacheBytes],
      ['100000', 100_000],
    ] as const) {
      const store = new MemoryStore();
      const environment = {
        DEFAULT_MODEL: 'echo',
        ...(setting === undefined ? {} : { RECORD_CACHE_BYTES: setting }),
      };
      const services = createServices({
        store,
        config: parseServiceConfig(environment),
        env: environment,
        model: () => echoModel,
        background: () => undefined,
        log: () => undefined,
        info: () => {},
      });
      await services.sessions.create({ id: 's' });
      await services.sessions.append('s', [item('hi')]);
      // The cache the app filled is the one of that budget (another budget would be a new, empty one).
      expect(recordCacheOf(store, budget)!.bytes).toBeGreaterThan(0);
    }
  });

  it('shares frozen records: a change is a typecheck error and throws, and the next read is unchanged', async () => {
    const store = new MemoryStore();
    await new SessionLog(store).create({ id: 's1' });
    const log = logContext(store, { viewPolicy });
    await commit(log, 's1', [item('hi'), item('there')], { kind: 'append' });
    const head = await readHead(log, 's1');
    const key = recordKey(head.scope, 1);
    const body = (await store.get(key))!.body;
    const cached = log.recordCache!.recall(key, body)!;
    expect(cached).toBe(head.newest!.record);
    // @ts-expect-error a cached record's items are a readonly array
    expect(() => cached.items.push(cached.items[0]!)).toThrow(TypeError);
    expect(() => {
      // @ts-expect-error its fields are readonly
      cached.kind = 'turn';
    }).toThrow(TypeError);
    expect(() => {
      // @ts-expect-error and so is what it holds, all the way down
      cached.items[0]!.content = 'changed';
    }).toThrow(TypeError);
    expect(() => {
      // @ts-expect-error
      cached.counts.items = 0;
    }).toThrow(TypeError);
    // The head read hands the same frozen record on: what a reader would change in place throws.
    expect(() => head.newest!.record.items.pop()).toThrow(TypeError);
    expect(await readHead(log, 's1')).toMatchObject({
      newest: { record: { kind: 'append', counts: { items: 2 }, items: [{ content: 'hi' }, { content: 'there' }] } },
    });
    // A record another process wrote, parsed here once, is kept frozen too.
    const other = { ...JSON.parse(new TextDecoder().decode(body)), writer: 'someone-else' } as LogRecord;
    await store.delete([key]);
    await store.put(key, JSON.stringify(other));
    const read = (await readHead(log, 's1')).newest!.record;
    expect(read.writer).toBe('someone-else');
    expect(() => read.items.push(read.items[0]!)).toThrow(TypeError);
  });
});

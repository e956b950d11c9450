import { describe, expect, it, vi } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { type Pack, PackSchedule } from '../../lib/session/log/pack-schedule.ts';
import { MAX_RECORDS_AFTER_VIEW } from '../../lib/session/log/pack-schedule.ts';
import { logContext } from '../../lib/session/log/context.ts';
import { readConfig, scopeOf } from '../../lib/session/log/head.ts';
import { readView } from '../../lib/session/log/view-chunks.ts';
import { heldBytes } from '../../lib/session/log/item-bytes.ts';
import { viewCacheOf } from '../../lib/session/log/view-cache.ts';
import { viewChunkKey } from '../../lib/session/keys.ts';
import type { LogView } from '../../lib/session/view-records.ts';
import { listAll } from '../../lib/store/object-store.ts';
import { viewPolicy } from '../../lib/turn/view-policy.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { CountingStore } from '../support/counting-store.ts';
import { SessionLog } from '../support/session-log.ts';
import { parseView } from '../support/stored-view.ts';

/** A record's items: messages, calls (some repeated), outputs small and large (out of line, compacted in a view). */
function items(record: number): Item[] {
  return [
    {
      type: 'message',
      role: 'user',
      content: `record ${record} ${'é'.repeat(record % 7)} ${'m'.repeat(record <= 16 ? 40_000 : 30)}`,
    },
    ...[0, 1, 2].flatMap((call): Item[] => {
      const id = `c${record}-${call}`;
      const repeated = call === 2 && record % 3 === 0;
      return [
        {
          type: 'function_call',
          call_id: id,
          name: 'read_file',
          arguments: JSON.stringify({
            path: repeated ? 'same.ts' : `f${record}-${call}.ts`,
            query: 'q'.repeat(call * 900),
          }),
        },
        { type: 'function_call_output', call_id: id, output: `out ${record} ${'x'.repeat(call === 1 ? 20_000 : 30)}` },
      ];
    }),
  ];
}

describe('the views a pack writes', () => {
  it.each([
    ['whole', undefined],
    ['in chunks', 64 * 1024],
  ])('are stored %s as the view the cache keeps, which is what reading them gives', async (_name, viewChunkBytes) => {
    const store = new MemoryStore();
    const options = {
      viewCacheBytes: 64 * 2 ** 20,
      blobThreshold: 8 * 1024,
      ...(viewChunkBytes ? { viewChunkBytes } : {}),
    };
    const log = new SessionLog(store, options);
    await log.create({ id: 's' });
    // A reader that has seen none of them: every view and chunk read from the store.
    const reader = logContext(store, { viewPolicy, viewCacheBytes: 0 });
    const scope = scopeOf('', (await readConfig(reader, 's')).config);
    const written: string[] = [];
    const named: { record: number; chunk: number }[] = [];
    let lastView: { key: string; view: NonNullable<Awaited<ReturnType<typeof log.pack>>['written']> } | undefined;
    for (let record = 1; record <= 40; record++) {
      await log.append('s', items(record));
      if (record % 4 !== 0) continue;
      // Every other pack takes the view the one before wrote, as a run of packs does.
      const pack = { refresh: true, requirement: () => ({ toolCalls: 6, seqs: [], wholeCalls: 3 }) };
      const result = await log.pack('s', record % 8 === 0 && lastView ? { ...pack, lastView } : pack);
      if (result.view && result.written) {
        written.push(result.view);
        lastView = { key: result.view, view: result.written };
        const read = await readView(reader, scope, result.view, result.written.record);
        // Key for key and in order (toEqual ignores the order): a read gives the view the cache keeps.
        expect(read).toEqual(result.written);
        expect(JSON.stringify(read)).toBe(JSON.stringify(result.written));
        const stored = JSON.parse(new TextDecoder().decode((await store.get(result.view))!.body)) as LogView;
        if (stored.tail?.chunk) named.push({ record: result.written.record, chunk: stored.tail.chunk.record });
      }
    }
    expect(written.length).toBeGreaterThan(4);
    // The views hold compacted and whole items, messages and calls: what the bytes are made of.
    const tail = lastView!.view.tail!.items;
    expect(tail.some((item) => item.type !== 'message' && item.compacted)).toBe(true);
    expect(tail.some((item) => item.type === 'function_call_output' && !item.compacted)).toBe(true);
    // In chunks: one chunk is left, named by the newest view, the replaced ones deleted.
    const chunks = await listAll(store, 'sessions/s/tail/');
    expect(chunks).toHaveLength(viewChunkBytes ? 1 : 0);
    const head = parseView(lastView!.key, (await store.get(lastView!.key))!.body);
    if (viewChunkBytes) {
      expect(chunks[0]!.key).toBe(viewChunkKey(scope, head.tail!.chunk!.record, head.tail!.chunk!.id));
      // Views named the chunk of an earlier view, and new chunks were written.
      expect(named.some((view) => view.chunk < view.record)).toBe(true);
      expect(new Set(named.map((view) => view.chunk)).size).toBeGreaterThan(1);
      // The view holds less than the tail: the chunk holds the rest.
      expect(head.tail!.items.length).toBeLessThan(tail.length);
    } else expect(head).toEqual(lastView!.view);
  });
});

describe('a view this process wrote', () => {
  it('is counted in the view cache with the tail bytes kept to build the next view from', async () => {
    const store = new MemoryStore();
    const log = new SessionLog(store, { viewCacheBytes: 64 * 2 ** 20 });
    await log.create({ id: 's' });
    for (let record = 1; record <= 8; record++) await log.append('s', items(record));
    const result = await log.pack('s', { refresh: true });
    const held = heldBytes(result.written!.tail!.items);
    expect(held).toBeGreaterThan(0);
    const stored = (await store.get(result.view!))!.body.length;
    // One view kept for the session, no chunk at this size: its JSON and the bytes kept.
    expect(viewCacheOf(store, 64 * 2 ** 20)!.bytes).toBe(stored + held);
  });
});

const message = (bytes: number): Item => ({ type: 'message', role: 'user', content: 'm'.repeat(bytes) });

describe('a burst of appends', () => {
  it('writes a view once the records after it hold an eighth of its bytes, or number the bound', async () => {
    const log = new SessionLog(new MemoryStore());
    await log.create({ id: 's' });
    // A view of about 640 KB: every message is in it.
    for (let record = 1; record <= 64; record++) await log.append('s', [message(10_000)]);
    expect((await log.pack('s', { refresh: true })).view).toBeDefined();
    // Small appends: fewer than MAX_RECORDS_AFTER_VIEW of them do not call for a view that large ...
    for (let record = 1; record < MAX_RECORDS_AFTER_VIEW; record++) {
      await log.append('s', [message(100)]);
      if (record % 4 === 0) expect((await log.pack('s')).view).toBeUndefined();
    }
    // ... until they number MAX_RECORDS_AFTER_VIEW.
    await log.append('s', [message(100)]);
    expect((await log.pack('s')).view).toBeDefined();
    // Large ones: an eighth of the view's bytes (about 90 KB) after it.
    for (let record = 1; record <= 4; record++) await log.append('s', [message(10_000)]);
    expect((await log.pack('s')).view).toBeUndefined();
    await log.append('s', [message(60_000)]);
    expect((await log.pack('s')).view).toBeDefined();
  });

  it("hands the view a pack wrote to the session's next pack, which does not read it again", async () => {
    const store = new ViewReads(new MemoryStore());
    // No view cache: a view not handed over is read from the store.
    const log = new SessionLog(store, { viewCacheBytes: 0 });
    await log.create({ id: 's' });
    for (let record = 1; record <= 8; record++) await log.append('s', items(record));
    const schedule = new PackSchedule();
    const given: (string | undefined)[] = [];
    const written: (string | undefined)[] = [];
    const pack: Pack = async (lastView) => {
      given.push(lastView?.key);
      const result = await log.pack('s', { refresh: true, ...(lastView ? { lastView } : {}) });
      written.push(result.view);
      for (let record = 1; record <= 8; record++) await log.append('s', items(given.length * 100 + record));
      // Another pack asked for while the first one runs: it runs right after it.
      if (given.length === 1) void schedule.run('s', pack, () => undefined);
      return result;
    };
    await schedule.run('s', pack, () => undefined);
    await vi.waitFor(() => expect(given).toHaveLength(2), { timeout: 15_000 });
    // And one asked for later.
    await schedule.run('s', pack, () => undefined);
    expect(new Set(written).size).toBe(3);
    expect(given).toEqual([undefined, written[0], written[1]]);
    // The first pack read the view of nothing (there was none); the next two were handed theirs.
    expect(store.viewGets).toBe(0);
  });
});

/** Counts the gets of views. */
class ViewReads extends CountingStore {
  viewGets = 0;

  override get(key: string, options?: Parameters<ObjectStore['get']>[1]) {
    if (key.endsWith('.view')) this.viewGets += 1;
    return super.get(key, options);
  }
}

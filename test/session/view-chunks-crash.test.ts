import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import type { LogView } from '../../lib/session/view-records.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { type Body, listAll, type ObjectStore } from '../../lib/store/object-store.ts';
import { copyObjects } from '../support/copy-store.ts';
import { previewsAfterEachPackCrash, previewsWithAndWithoutViews } from '../support/log-views.ts';
import { CountingStore } from '../support/counting-store.ts';
import { SessionLog, type SessionLogOptions } from '../support/session-log.ts';

/**
 * Views in chunks (lib/session/log/view-chunks.ts): whatever a crash left of a pack, or a
 * chunk deleted under a reader, a process that never saw the session reads what the log
 * itself gives.
 */

// Chunks of a few items, and the view's tail from the strategies' need (below).
const options: Partial<SessionLogOptions> = { viewChunkBytes: 300 };
const requirement = () => ({ toolCalls: 3, seqs: [], wholeCalls: 2 });

/** A record: a message, and calls by path (a path seen before makes a repeat, which unpins the older one). */
function record(n: number, paths: string[]): Item[] {
  return [
    { type: 'message', role: 'user', content: `message ${n} ${'m'.repeat(40)}` },
    ...paths.flatMap((path, index): Item[] => [
      { type: 'function_call', call_id: `c${n}-${index}`, name: 'read', arguments: JSON.stringify({ path }) },
      { type: 'function_call_output', call_id: `c${n}-${index}`, output: `out ${n} ${index}` },
    ]),
  ];
}

async function appendRecords(log: SessionLog, from: number, to: number): Promise<void> {
  for (let n = from; n <= to; n++) await log.append('s', record(n, [`p${n}`, `p${n % 4}`]));
}

/** What a process that never saw the session previews, and the same read with no view or chunk stored. */
const previews = (store: ObjectStore) =>
  previewsWithAndWithoutViews(store, (on) => new SessionLog(on, options), requirement);

async function chunkKeys(store: ObjectStore): Promise<string[]> {
  return (await listAll(store, 'sessions/s/tail/')).map((info) => info.key);
}

describe('views in chunks', () => {
  it('read as the log itself after a pack crashed at any storage call, before or after it lands', async () => {
    const template = new MemoryStore();
    const log = new SessionLog(template, options);
    await log.create({ id: 's' });
    await appendRecords(log, 1, 12);
    await log.pack('s', { requirement, refresh: true });
    expect(await chunkKeys(template)).toHaveLength(1);
    // Repeats of older calls, and enough new items for the next view to write a new chunk.
    await appendRecords(log, 13, 40);
    // A clean pack writes a new chunk and deletes the one it replaces; with a tail too short
    // for one (the default need: every call), it deletes it too.
    const [first] = await chunkKeys(template);
    for (const pack of [{ requirement }, {}]) {
      const clean = new MemoryStore();
      await copyObjects(template, clean);
      await new SessionLog(clean, options).pack('s', pack);
      const chunks = await chunkKeys(clean);
      expect(chunks).toHaveLength(pack.requirement ? 1 : 0);
      expect(chunks).not.toContain(first);
    }
    await previewsAfterEachPackCrash(template, (store) => new SessionLog(store, options), requirement, { requirement });
  });

  it('read the log past a view whose chunk is gone when no newer view is listed', async () => {
    const store = new KeysGot(new MemoryStore());
    const log = new SessionLog(store, options);
    await log.create({ id: 's' });
    await appendRecords(log, 1, 20);
    await log.pack('s', { requirement, refresh: true });
    const [chunk] = await chunkKeys(store);
    expect(chunk).toBeDefined();
    const before = await previews(store);
    await store.delete(chunk!);
    store.keys.length = 0;
    const after = await previews(store);
    expect(after.read).toEqual(before.reference);
    expect(after.reference).toEqual(before.reference);
    // It looked for the chunk.
    expect(store.keys).toContain(chunk);
  });

  it('stay readable when a slower pack from the same base deletes the chunk a newer view names', async () => {
    const memory = new MemoryStore();
    const log = new SessionLog(memory, options);
    await log.create({ id: 's' });
    for (let n = 1; n <= 20; n++) await log.append('s', big(n));
    await log.pack('s', { requirement, refresh: true });
    const [first] = await chunkKeys(memory);
    await appendRecords(log, 21, 21);
    // Pack A (the default need: no chunk, so it replaces its base's) is held at its view's put ...
    const held = new HeldViewPut(memory);
    const packA = new SessionLog(held, options).pack('s', { refresh: true });
    await held.reached;
    // ... while B, from the same base, writes the view of a newer record naming that chunk.
    await appendRecords(log, 22, 22);
    const b = new SessionLog(memory, { ...options, viewCacheBytes: 1 << 24 });
    await b.pack('s', { requirement, refresh: true });
    held.release();
    await packA;
    expect(await chunkKeys(memory)).not.toContain(first);
    // B goes on from the view it holds; every process new to the session reads, packs and
    // takes turns as the log itself gives.
    for (let n = 23; n <= 25; n++) {
      await appendRecords(b, n, n);
      const { view } = await b.pack('s', { requirement, refresh: true });
      // It names a chunk that is there (it looked before naming the one it held again).
      const named = (JSON.parse(new TextDecoder().decode((await memory.get(view!))!.body)) as LogView).tail?.chunk;
      if (named) expect((await chunkKeys(memory)).some((key) => key.endsWith(`-${named.id}`))).toBe(true);
      const after = await previews(memory);
      expect(after.read).toEqual(after.reference);
      expect((await new SessionLog(memory, options).pack('s', { requirement })).view).toBeUndefined();
    }
    const begun = await new SessionLog(memory, options).beginTurn('s', {
      input: [{ type: 'message', role: 'user', content: 'go on' }],
    });
    expect(begun.kind).toBe('claimed');
  });

  it('stay packable when the view a reader falls back to names repeat-index shards a newer view replaced', async () => {
    // A repeat-index delta of 8 keys, so that the newer view's 40 new call keys replace shards.
    const indexed = { ...options, indexDeltaKeys: 8 };
    const memory = new MemoryStore();
    const log = new SessionLog(memory, indexed);
    await log.create({ id: 's' });
    for (let n = 1; n <= 20; n++) await log.append('s', big(n));
    await log.pack('s', { requirement, refresh: true });
    await appendRecords(log, 21, 21);
    // Pack A (the default need: no chunk) is held at its view's put; pack B, from the same
    // base, names that base's chunk again (still there) and replaces shards A's view names.
    const held = new HeldViewPut(memory);
    const packA = new SessionLog(held, indexed).pack('s', { refresh: true });
    await held.reached;
    await log.append(
      's',
      record(
        22,
        Array.from({ length: 40 }, (_, index) => `q${index}`),
      ),
    );
    await new SessionLog(memory, { ...indexed, viewCacheBytes: 1 << 24 }).pack('s', { requirement, refresh: true });
    held.release();
    await packA;
    // The newest view names a gone chunk, the one before it gone shards: a process new to the
    // session (its own copy of the store: nothing kept of the shards) reads the log past both,
    // and packs, and completes a turn whose model calls a tool.
    const fresh = new MemoryStore();
    await copyObjects(memory, fresh);
    const after = await previews(fresh);
    expect(after.read).toEqual(after.reference);
    const turn = async (output: Item) => {
      const begun = await new SessionLog(fresh, indexed).beginTurn('s', {
        input: [{ type: 'message', role: 'user', content: 'go on' }],
      });
      if (begun.kind !== 'claimed') throw new Error('expected a claim');
      await new SessionLog(fresh, indexed).completeTurn(begun.turn, {
        status: 'completed',
        output: [output],
        receipt: {},
      });
    };
    await turn({ type: 'message', role: 'assistant', content: 'ok' });
    await new SessionLog(fresh, indexed).append('s', record(23, ['q1', 'p7', 'zz']));
    await turn({ type: 'function_call', call_id: 'k1', name: 'read', arguments: JSON.stringify({ path: 'q3' }) });
    await new SessionLog(fresh, indexed).pack('s', { requirement, refresh: true });
    const packed = await previews(fresh);
    expect(packed.read).toEqual(packed.reference);
  });
});

/** Record n with a large message among the first 14 (so that a view of them writes a chunk). */
function big(n: number): Item[] {
  return record(n, [`p${n}`, `p${n % 4}`]).map((item, index) =>
    index === 0 && n <= 14 ? { ...item, content: `message ${n} ${'m'.repeat(3000)}` } : item,
  ) as Item[];
}

/** Notes the keys got. */
class KeysGot extends CountingStore {
  readonly keys: string[] = [];

  override get(key: string, options?: Parameters<ObjectStore['get']>[1]) {
    this.keys.push(key);
    return super.get(key, options);
  }
}

/** Holds the put of a view until released. */
class HeldViewPut extends CountingStore {
  release!: () => void;
  readonly #released = new Promise<void>((resolve) => (this.release = resolve));
  #reach!: () => void;
  readonly reached = new Promise<void>((resolve) => (this.#reach = resolve));

  override async put(key: string, body: Body, putOptions?: Parameters<ObjectStore['put']>[2]) {
    if (key.endsWith('.view')) {
      this.#reach();
      await this.#released;
    }
    return super.put(key, body, putOptions);
  }
}

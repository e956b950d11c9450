import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { listAll, type ObjectStore } from '../../lib/store/object-store.ts';
import { copyObjects } from '../support/copy-store.ts';
import { CountingStore } from '../support/counting-store.ts';
import { eachPackCrash } from '../support/repeat-index.ts';
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

/**
 * What a process that never saw the session previews (the prompt's items and what decides
 * them), and the same read with no view or chunk in the store.
 */
async function previews(store: ObjectStore): Promise<{ read: unknown; reference: unknown }> {
  const preview = async (on: ObjectStore) => {
    const { items, aggregates, context, overflow } = await new SessionLog(on, options).previewContext('s', requirement);
    return { items, aggregates, context, overflow };
  };
  const read = await preview(store);
  const bare = new MemoryStore();
  await copyObjects(store, bare);
  const derived = (await listAll(bare, '')).filter((info) => /\.view$|\/tail\//.test(info.key));
  await bare.delete(derived.map((info) => info.key));
  return { read, reference: await preview(bare) };
}

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
    let crashes = 0;
    await eachPackCrash(
      template,
      (store) => new SessionLog(store, options),
      async (store, crashed, where) => {
        crashes += 1;
        const after = await previews(store);
        expect(after.read, where).toEqual(after.reference);
        // The next pack goes on from whatever the crash left, and what it leaves reads the same.
        await crashed.pack('s', { requirement, refresh: true });
        const packed = await previews(store);
        expect(packed.read, where).toEqual(packed.reference);
      },
      { requirement },
    );
    expect(crashes).toBeGreaterThan(10);
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
});

/** Notes the keys got. */
class KeysGot extends CountingStore {
  readonly keys: string[] = [];

  override get(key: string, options?: Parameters<ObjectStore['get']>[1]) {
    this.keys.push(key);
    return super.get(key, options);
  }
}

import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { listAll, type ObjectStore } from '../../lib/store/object-store.ts';
import { copyObjects } from '../support/copy-store.ts';
import { eachPackCrash } from '../support/repeat-index.ts';
import { SessionLog, type SessionLogOptions } from '../support/session-log.ts';
import { turnOf } from './rewind-simulation-suite.ts';

/**
 * A fork's first view made from its ancestor's (lib/session/log/ancestor-view.ts), the objects
 * that view names copied under the fork's generation: whatever a crash at any storage call of
 * that pack left, a process that never saw the session reads what the log itself gives, and so
 * after the next pack.
 */

// Shards of the repeat index every few keys (the view adopted names sets), chunks of a few items.
const options: Partial<SessionLogOptions> = {
  indexDeltaKeys: 4,
  viewChunkBytes: 300,
  packMinRecords: 2,
  keepRecords: 1,
};
const requirement = () => ({ toolCalls: 3, seqs: [], wholeCalls: 2 });

function record(n: number): Item[] {
  return [
    { type: 'message', role: 'user', content: `message ${n}` },
    ...[`p${n}`, `p${n % 5}`].flatMap((path, index): Item[] => [
      { type: 'function_call', call_id: `c${n}-${index}`, name: 'read', arguments: JSON.stringify({ path }) },
      { type: 'function_call_output', call_id: `c${n}-${index}`, output: `out ${n} ${index}` },
    ]),
  ];
}

/** What a process that never saw the session previews, and the same read with no view or chunk stored. */
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

describe("a fork's first view from its ancestor's", () => {
  it('reads as the log itself after its pack crashed at any storage call, before or after it lands', async () => {
    const template = new MemoryStore();
    const log = new SessionLog(template, options);
    await log.create({ id: 's' });
    for (let n = 1; n <= 24; n++) await log.append('s', record(n));
    await log.pack('s', { requirement, refresh: true });
    for (let n = 25; n <= 30; n++) await log.append('s', record(n));
    await turnOf(log, 's', 'kept');
    await turnOf(log, 's', 'gone');
    await log.deleteTurn('s', (await log.get('s')).counts.turns);
    let crashes = 0;
    await eachPackCrash(
      template,
      (store) => new SessionLog(store, options),
      async (store, crashed, where) => {
        crashes += 1;
        const after = await previews(store);
        expect(after.read, where).toEqual(after.reference);
        await crashed.pack('s', { requirement, refresh: true });
        const packed = await previews(store);
        expect(packed.read, where).toEqual(packed.reference);
        // And a turn after it reads the history whole.
        await turnOf(crashed, 's', 'next');
        const next = await previews(store);
        expect(next.read, where).toEqual(next.reference);
      },
      { requirement, refresh: true },
    );
    expect(crashes).toBeGreaterThan(10);
  });
});

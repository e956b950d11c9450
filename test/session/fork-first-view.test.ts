import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { logContext } from '../../lib/session/log/context.ts';
import { readConfig, scopeOf } from '../../lib/session/log/head.ts';
import { readView } from '../../lib/session/log/view-chunks.ts';
import { sessionPrefix } from '../../lib/session/keys.ts';
import type { LogView } from '../../lib/session/view-records.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { packOptions, sessionStrategyPlan } from '../../lib/turn/plan.ts';
import { viewPolicy } from '../../lib/turn/view-policy.ts';
import { CountingStore } from '../support/counting-store.ts';
import { SessionLog } from '../support/session-log.ts';

/**
 * A fork of another session (lib/session/log/fork.ts) writes its first view, with the pack right
 * after it, from the parent's newest view at or below the fork point and the items after it
 * (lib/session/log/ancestor-view.ts), not from the history's start: the view a pack writes of
 * the fork from its log alone.
 */

const OPTIONS = { packMinRecords: 2, keepRecords: 1, segmentTargetBytes: 2048, blobThreshold: 4096 };
/** No view cache: a read gets the view stored (views are dropped and written again under their keys). */
const READ = { ...OPTIONS, viewCacheBytes: 0 };
const OUTPUT = `${'tool output line\n'.repeat(40)}`;
const PACK = packOptions(sessionStrategyPlan({}, { strategies: null, strategy_config: {} }));

/** The views of session `id` stored, read whole (their chunks' items too). */
async function storedViews(store: ObjectStore, id: string): Promise<LogView[]> {
  const reader = logContext(store, { viewPolicy, viewCacheBytes: 0 });
  const scope = scopeOf('', (await readConfig(reader, id)).config);
  const listed = (await store.list(sessionPrefix('', id), { limit: 1000 })).objects.filter((object) =>
    object.key.endsWith('.view'),
  );
  return Promise.all(
    listed.map(async ({ key }) => {
      const { record } = JSON.parse(new TextDecoder().decode((await store.get(key))!.body)) as LogView;
      const view = await readView(reader, scope, key, record);
      if (!view || view === 'gone') throw new Error(`${key} unread`);
      return view;
    }),
  );
}

describe("a fork's first view", () => {
  it("is made from the parent's view before the fork point, as a pack from the log alone makes it", async () => {
    const memory = new MemoryStore();
    const log = new SessionLog(memory, OPTIONS);
    await log.create({ id: 'p' });
    for (let n = 1; n <= 80; n++) {
      const pair: Item[] = [
        { type: 'function_call', call_id: `c${n}`, name: 'read', arguments: JSON.stringify({ n: n % 20 }) },
        { type: 'function_call_output', call_id: `c${n}`, output: `${OUTPUT}${n}` },
      ];
      await log.append('p', pair);
      if (n === 76) await log.pack('p', { ...PACK, refresh: true });
    }
    await log.pack('p', PACK);
    const at = (await log.get('p')).counts.items - 6;
    await log.fork('p', { at_seq: at, fields: { id: 'f' } });
    const history = (await memory.list('sessions/', { limit: 1000 })).objects.filter((object) =>
      object.key.endsWith('.seg'),
    );
    expect(history.length).toBeGreaterThan(32);
    let segmentGets = 0;
    const counting = new (class extends CountingStore {
      override get(...args: Parameters<CountingStore['get']>): ReturnType<CountingStore['get']> {
        if (args[0].endsWith('.seg')) segmentGets += 1;
        return super.get(...args);
      }
    })(memory);
    await new SessionLog(counting, OPTIONS).pack('f', { ...PACK, refresh: true });
    // The parent's view and the units after it (before: every segment of the parent's history).
    expect(segmentGets).toBeLessThanOrEqual(2);
    const [first, ...more] = await storedViews(memory, 'f');
    expect(more).toEqual([]);
    const before = await new SessionLog(memory, READ).previewContext('f', PACK.requirement!);
    // No view anywhere: the pack reads the whole history.
    const views = (await memory.list('sessions/', { limit: 1000 })).objects.filter(
      (object) => object.key.endsWith('.view') || object.key.includes('/tail/'),
    );
    await memory.delete(views.map((object) => object.key));
    await new SessionLog(memory, OPTIONS).pack('f', { ...PACK, refresh: true });
    const [packed] = await storedViews(memory, 'f');
    expect({ ...first!, created_at: null }).toEqual({ ...packed!, created_at: null });
    const after = await new SessionLog(memory, READ).previewContext('f', PACK.requirement!);
    expect(before.items).toEqual(after.items);
    expect(before.aggregates).toEqual(after.aggregates);
  });
});

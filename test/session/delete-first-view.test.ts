import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { logContext } from '../../lib/session/log/context.ts';
import { readConfig, scopeOf } from '../../lib/session/log/head.ts';
import { keySetKey, olderRepeatedKey, sessionPrefix } from '../../lib/session/keys.ts';
import type { PackOptions } from '../../lib/session/log/types.ts';
import type { LogView } from '../../lib/session/view-records.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { computeAggregates } from '../../lib/strategies/aggregates.ts';
import { packOptions, sessionStrategyPlan } from '../../lib/turn/plan.ts';
import { viewPolicy } from '../../lib/turn/view-policy.ts';
import {
  sessionOfReads,
  overflowingTurn,
  SEGMENTED,
  SegmentCountingStore,
  samePromptFromTheLogAlone,
  storedViews,
  UNCACHED,
} from '../support/log-views.ts';
import { allItems } from '../support/repeat-index.ts';
import { SessionLog } from '../support/session-log.ts';
import { turnOf } from './rewind-simulation-suite.ts';

/**
 * The first view of the generation a delete of the newest turn writes (lib/session/log/rewind.ts),
 * which the pack after the delete stores (lib/turn/fork.ts), is made from the newest view stored
 * in the generation it forks from, at or below its point, and the units after it
 * (lib/session/log/ancestor-view.ts), not from the history's start. The first turn after it reads
 * that view; and it is the view a pack writes of the new generation from its log alone.
 */

const OUTPUT = `${'tool output line\n'.repeat(40)}`;

const PLANS: [string, PackOptions | undefined][] = [
  ['the default tail', undefined],
  ['the tail its strategies need', packOptions(sessionStrategyPlan({}, { strategies: null, strategy_config: {} }))],
  [
    'a short tail',
    packOptions(
      sessionStrategyPlan(
        {},
        { strategies: ['shorten_tools'], strategy_config: { max_tool_calls: 8, full_tool_outputs: 3 } },
      ),
    ),
  ],
];

/** A long history in segments (80 appends, a view at the end), then a turn kept and one deleted. */
async function deletedSession(pack: PackOptions | undefined) {
  const memory = new MemoryStore();
  const store = new SegmentCountingStore(memory);
  const log = new SessionLog(store, SEGMENTED);
  await sessionOfReads(log, 's', 80, { file: (n) => n % 30, packEvery: 10, pack });
  await turnOf(log, 's', 'kept');
  await turnOf(log, 's', 'gone');
  const segments = (await memory.list('sessions/s/turn/', { limit: 1000 })).objects.filter((object) =>
    object.key.endsWith('.seg'),
  );
  expect(segments.length).toBeGreaterThan(32);
  store.reset();
  await log.deleteTurn('s', (await log.get('s')).counts.turns, pack ? { pack: () => pack } : {});
  const deleted = { segmentGets: store.segmentGets, segmentBytes: store.segmentBytes };
  const history = segments.reduce((sum, object) => sum + object.size, 0);
  return { memory, store, log, deleted, history };
}

const shape = (view: LogView) => ({ ...view, created_at: null });

/** The pack the service runs after a delete (lib/turn/fork.ts withFirstView). */
const firstView = (log: SessionLog, pack: PackOptions | undefined) => log.pack('s', { ...(pack ?? {}), refresh: true });

describe('the first view after a delete of the newest turn', () => {
  it.each(PLANS)('is made from the view before it, not the history (%s)', async (_, pack) => {
    const { memory, store, log, deleted, history } = await deletedSession(pack);
    expect(deleted.segmentGets).toBe(0);
    store.reset();
    await firstView(log, pack);
    // The view of the generation left and the records after it, not the history's segments (before:
    // every one of them).
    expect(store.segmentGets).toBeLessThanOrEqual(2);
    expect(store.segmentBytes).toBeLessThan(history / 8);
    expect(await storedViews(memory)).toHaveLength(1);
    // The next turn reads that view, not the history.
    store.reset();
    const begun = await new SessionLog(store, UNCACHED).beginTurn('s', {
      input: [{ type: 'message', role: 'user', content: 'go on' }],
    });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    expect(store.segmentGets).toBe(0);
    expect(begun.turn.base.view?.record).toBe(begun.turn.record - 1);
    const items = await allItems(new SessionLog(memory, SEGMENTED));
    expect(begun.turn.aggregates).toEqual(computeAggregates(items));
  });

  it.each(PLANS)('is the view a pack writes from the log alone (%s)', async (_, pack) => {
    const { memory, log } = await deletedSession(pack);
    await firstView(log, pack);
    const [stored, ...more] = await storedViews(memory);
    expect(more).toEqual([]);
    const requirement = (pack ?? packOptions(sessionStrategyPlan({}, { strategies: null, strategy_config: {} })))
      .requirement!;
    // No view anywhere: the pack reads the whole history.
    await samePromptFromTheLogAlone(memory, {
      before: await log.previewContext('s', requirement),
      read: () => new SessionLog(memory, UNCACHED).previewContext('s', requirement),
      repack: () => firstView(new SessionLog(memory, SEGMENTED), pack),
      prefix: sessionPrefix('', 's'),
    });
    const [packed] = await storedViews(memory);
    expect(packed!.key).toBe(stored!.key);
    expect(shape(stored!.view)).toEqual(shape(packed!.view));
  });
});

describe('the first view after a delete, from a view naming objects beside it', () => {
  it('names copies of them under its own generation, and gives the prompt a whole read gives', async () => {
    const memory = new MemoryStore();
    const store = new SegmentCountingStore(memory);
    // Shards of the repeat index past 16 keys, and a `repeated` long enough to split.
    const log = new SessionLog(store, { ...SEGMENTED, indexDeltaKeys: 16 });
    const pack = packOptions(sessionStrategyPlan({}, { strategies: null, strategy_config: {} }));
    await log.create({ id: 's' });
    // Each file read twice: once, and again by the next step.
    for (let batch = 0; batch < 40; batch++) {
      const items: Item[] = [];
      for (let n = batch * 15 + 1; n <= batch * 15 + 15; n++)
        for (const file of [n, n - 1])
          items.push(
            { type: 'function_call', call_id: `c${n}-${file}`, name: 'read', arguments: JSON.stringify({ file }) },
            { type: 'function_call_output', call_id: `c${n}-${file}`, output: `${OUTPUT}${file}` },
          );
      await log.append('s', items);
    }
    await log.pack('s', pack);
    // An overflow boundary near the end: the views split `repeated` there.
    const items = (await log.get('s')).counts.items;
    await overflowingTurn(log, 's', Math.floor(items * 0.9), Math.floor(items * 0.95));
    await log.pack('s', { ...pack, refresh: true });
    const [left] = await storedViews(memory);
    expect(left!.view.aggregates.repeated_older).toBeDefined();
    expect(Object.keys(left!.view.keys.versions)).not.toEqual([]);
    await turnOf(log, 's', 'kept');
    await turnOf(log, 's', 'gone');
    await log.deleteTurn('s', (await log.get('s')).counts.turns, { pack: () => pack });
    store.reset();
    await firstView(log, pack);
    expect(store.segmentGets).toBeLessThanOrEqual(2);
    const [first, ...more] = await storedViews(memory);
    expect(more).toEqual([]);
    const { generation } = (await readConfig(logContext(memory, { viewPolicy }), 's')).config;
    // What it names is under its own generation.
    const own = (await memory.list(`sessions/s/keys/${generation}/`, { limit: 1000 })).objects.map(
      (object) => object.key,
    );
    const scope = scopeOf('', (await readConfig(logContext(memory, { viewPolicy }), 's')).config);
    for (const record of Object.keys(first!.view.keys.versions))
      expect(own).toContain(keySetKey(scope, Number(record)));
    const older = first!.view.aggregates.repeated_older!;
    expect(own).toContain(olderRepeatedKey(scope, older.record, older.before_seq));
    // The next turn's prompt is the one a read of the log alone gives.
    const requirement = pack.requirement!;
    const read = () => new SessionLog(memory, UNCACHED).previewContext('s', requirement);
    await samePromptFromTheLogAlone(memory, {
      before: await read(),
      read,
      repack: () => firstView(new SessionLog(memory, { ...SEGMENTED, indexDeltaKeys: 16 }), pack),
      prefix: sessionPrefix('', 's'),
    });
    // And the history's (a claim reads the view and what it names).
    const claimed = await new SessionLog(memory, UNCACHED).beginTurn('s', { input: [] });
    if (claimed.kind !== 'claimed') throw new Error('expected a claim');
    expect(claimed.turn.base.view?.record).toBe(claimed.turn.record - 1);
  });
});

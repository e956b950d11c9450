import { describe, expect, it } from 'vitest';
import { ProcessStore } from '../../bench/process-store.ts';
import type { Item } from '../../lib/items.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { computeAggregates } from '../../lib/strategies/aggregates.ts';
import { packOptions, sessionStrategyPlan } from '../../lib/turn/plan.ts';
import { CountingStore } from '../support/counting-store.ts';
import { allItems } from '../support/repeat-index.ts';
import { SessionLog } from '../support/session-log.ts';
import { turnOf } from './rewind-simulation-suite.ts';

/**
 * A delete that flattens the history (lib/session/log/flatten.ts) stores the new generation's
 * first view, made from what it read (as an import does): the first turn after it reads that
 * view, not every segment of the history.
 */

const OPTIONS = { packMinRecords: 2, keepRecords: 1, segmentTargetBytes: 2048, blobThreshold: 4096 };
const OUTPUT = `${'tool output line\n'.repeat(40)}`;

/** Appends of a call and its output each, packed as they go: many segments. */
async function history(log: SessionLog, appends: number) {
  for (let n = 1; n <= appends; n++) {
    const pair: Item[] = [
      { type: 'function_call', call_id: `c${n}`, name: 'read', arguments: JSON.stringify({ n }) },
      { type: 'function_call_output', call_id: `c${n}`, output: `${OUTPUT}${n}` },
    ];
    await log.append('s', pair);
  }
  await log.pack('s');
}

/** Kept turns each followed by one deleted, until a delete flattens; the flattening delete's log. */
async function flattenOnce(
  log: SessionLog,
  store: SegmentCountingStore,
  options: Parameters<SessionLog['deleteTurn']>[2] = {},
) {
  for (let n = 1; n <= 12; n++) {
    await turnOf(log, 's', `kept ${n}`);
    await turnOf(log, 's', `gone ${n}`);
    const turns = (await log.get('s')).counts.turns;
    await log.deleteTurn('s', turns, options);
    const config = JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', 's')))!.body));
    if (config.named !== undefined) return config as { generation: string };
  }
  throw new Error('no delete flattened the history');
}

/** Counts the gets of segments apart. */
class SegmentCountingStore extends CountingStore {
  segmentGets = 0;
  override get(...args: Parameters<CountingStore['get']>): ReturnType<CountingStore['get']> {
    if (args[0].endsWith('.seg')) this.segmentGets += 1;
    return super.get(...args);
  }
  override reset(): void {
    super.reset();
    this.segmentGets = 0;
  }
}

async function coldTurn(store: SegmentCountingStore) {
  store.reset();
  const begun = await new SessionLog(new ProcessStore(store), OPTIONS).beginTurn('s', {
    input: [{ type: 'message', role: 'user', content: 'go on' }],
  });
  if (begun.kind !== 'claimed') throw new Error('expected a claim');
  return { counts: store.counts, segmentGets: store.segmentGets, turn: begun.turn };
}

describe('the first turn after a flattening', () => {
  it.each([
    ['the default tail', undefined],
    ['the tail its strategies need', packOptions(sessionStrategyPlan({}, { strategies: null, strategy_config: {} }))],
  ])('reads the view the delete stored, not the segments (%s)', async (_, pack) => {
    const store = new SegmentCountingStore(new MemoryStore());
    const log = new SessionLog(store, OPTIONS);
    await log.create({ id: 's' });
    await history(log, 80);
    const { generation } = await flattenOnce(log, store, pack ? { pack: () => pack } : {});
    const own = await store.inner.list(`sessions/s/turn/${generation}/`, { limit: 1000 });
    const segments = (await store.inner.list('sessions/s/turn/', { limit: 1000 })).objects.filter((object) =>
      object.key.endsWith('.seg'),
    );
    // More segments than the flattening makes views in memory between (16): it stored one of them.
    expect(segments.length).toBeGreaterThan(32);
    expect(own.objects.filter((object) => object.key.endsWith('.view'))).toHaveLength(1);
    const chunks = await store.inner.list(`sessions/s/tail/${generation}/`, { limit: 1000 });
    const viewBytes = [...own.objects.filter((object) => object.key.endsWith('.view')), ...chunks.objects].reduce(
      (sum, object) => sum + object.size,
      0,
    );
    const { counts, segmentGets, turn } = await coldTurn(store);
    // The config, the view (its tail's chunk) and the new first record: no segment. (Before, all 41
    // of them: 43 gets, 103 KB.)
    expect(segmentGets).toBe(0);
    expect(counts.get).toBeLessThanOrEqual(4);
    expect(counts.bytesRead).toBeLessThanOrEqual(viewBytes + 4096);
    expect(turn.base.view?.record).toBe(turn.record - 1);
    expect(turn.base.since).toEqual([]);
    // What it read is the history's: the view holds the aggregates of every item.
    const items = await allItems(new SessionLog(store.inner, OPTIONS));
    expect(turn.aggregates).toEqual(computeAggregates(items));
  });
});

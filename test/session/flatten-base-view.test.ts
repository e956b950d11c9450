import { describe, expect, it } from 'vitest';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { computeAggregates } from '../../lib/strategies/aggregates.ts';
import { packOptions, sessionStrategyPlan } from '../../lib/turn/plan.ts';
import { sessionOfReads, SEGMENTED, SegmentCountingStore } from '../support/log-views.ts';
import { allItems } from '../support/repeat-index.ts';
import { SessionLog } from '../support/session-log.ts';
import { turnOf } from './rewind-simulation-suite.ts';

/**
 * A flattening that reads the oldest generation as a fork (lib/session/log/flatten.ts) makes the
 * new generation's first view from the newest view stored there at or below its point, reading
 * only the units after it: what it reads of that generation grows with what came after its
 * view, not with its history.
 */

const configOf = async (store: MemoryStore) =>
  JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', 's')))!.body)) as {
    generation: string;
    named?: unknown;
    fork_of?: { generation: string }[];
  };

describe('a flattening reading its oldest generation as a fork', () => {
  it.each([
    ['the default tail', undefined],
    ['the tail its strategies need', packOptions(sessionStrategyPlan({}, { strategies: null, strategy_config: {} }))],
  ])('reads that generation from its newest view on, not whole (%s)', async (_, pack) => {
    const memory = new MemoryStore();
    const store = new SegmentCountingStore(memory);
    const log = new SessionLog(store, SEGMENTED);
    await sessionOfReads(log, 's', 80, { pack });
    const oldest = (await configOf(memory)).generation;
    const segments = (await memory.list(`sessions/s/turn/${oldest}/`, { limit: 1000 })).objects.filter((object) =>
      object.key.endsWith('.seg'),
    );
    expect(segments.length).toBeGreaterThan(32);
    const history = segments.reduce((sum, object) => sum + object.size, 0);
    for (let n = 1; ; n++) {
      await turnOf(log, 's', `kept ${n}`);
      await turnOf(log, 's', `gone ${n}`);
      store.reset();
      await log.deleteTurn('s', (await log.get('s')).counts.turns, pack ? { pack: () => pack } : {});
      const config = await configOf(memory);
      if (config.named === undefined) continue;
      // It read the oldest generation as a fork: its segments, but the newest, are not read. (Before:
      // all 41 of them, 100 KB.)
      expect(config.fork_of?.map((point) => point.generation)).toEqual([oldest]);
      expect(store.segmentGets).toBeLessThanOrEqual(2);
      expect(store.segmentBytes).toBeLessThan(history / 8);
      break;
    }
    // Its first view is the history's: a turn reads it, and what it holds is every item's.
    const begun = await new SessionLog(memory, SEGMENTED).beginTurn('s', {
      input: [{ type: 'message', role: 'user', content: 'go on' }],
    });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    expect(begun.turn.base.view?.record).toBe(begun.turn.record - 1);
    const items = await allItems(new SessionLog(memory, SEGMENTED));
    expect(begun.turn.aggregates).toEqual(computeAggregates(items));
  });
});

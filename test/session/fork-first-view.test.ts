import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { packOptions, sessionStrategyPlan } from '../../lib/turn/plan.ts';
import {
  sessionOfReads,
  SEGMENTED,
  SegmentCountingStore,
  samePromptFromTheLogAlone,
  storedViews,
  UNCACHED,
} from '../support/log-views.ts';
import { SessionLog } from '../support/session-log.ts';

/**
 * A fork of another session (lib/session/log/fork.ts) writes its first view, with the pack right
 * after it, from the parent's newest view at or below the fork point and the items after it
 * (lib/session/log/ancestor-view.ts), not from the history's start: the view a pack writes of
 * the fork from its log alone.
 */

const PACK = packOptions(sessionStrategyPlan({}, { strategies: null, strategy_config: {} }));

describe("a fork's first view", () => {
  it("is made from the parent's view before the fork point, as a pack from the log alone makes it", async () => {
    const memory = new MemoryStore();
    const log = new SessionLog(memory, SEGMENTED);
    await sessionOfReads(log, 'p', 80, {
      file: (n) => n % 20,
      after: async (n) => {
        if (n === 76) await log.pack('p', { ...PACK, refresh: true });
      },
      pack: PACK,
    });
    const at = (await log.get('p')).counts.items - 6;
    await log.fork('p', { at_seq: at, fields: { id: 'f' } });
    const history = (await memory.list('sessions/', { limit: 1000 })).objects.filter((object) =>
      object.key.endsWith('.seg'),
    );
    expect(history.length).toBeGreaterThan(32);
    const counting = new SegmentCountingStore(memory);
    await new SessionLog(counting, SEGMENTED).pack('f', { ...PACK, refresh: true });
    // The parent's view and the units after it (before: every segment of the parent's history).
    expect(counting.segmentGets).toBeLessThanOrEqual(2);
    const [first, ...more] = (await storedViews(memory, 'f')).map(({ view }) => view);
    expect(more).toEqual([]);
    const read = () => new SessionLog(memory, UNCACHED).previewContext('f', PACK.requirement!);
    // No view anywhere: the pack reads the whole history.
    await samePromptFromTheLogAlone(memory, {
      before: await read(),
      read,
      repack: () => new SessionLog(memory, SEGMENTED).pack('f', { ...PACK, refresh: true }),
    });
    const [packed] = (await storedViews(memory, 'f')).map(({ view }) => view);
    expect({ ...first!, created_at: null }).toEqual({ ...packed!, created_at: null });
  });
});

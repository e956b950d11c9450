import { describe, expect, it } from 'vitest';
import { RepeatedCalls, type HistoryAggregates } from '../../lib/history.ts';
import { logContext } from '../../lib/session/log/context.ts';
import { withOlderRepeated } from '../../lib/session/log/older-repeated.ts';
import { olderRepeatedKey, type LogScope } from '../../lib/session/keys.ts';
import { emptyAggregates } from '../../lib/strategies/aggregates.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { viewPolicy } from '../../lib/turn/view-policy.ts';

describe('the older entries of a split repeated', () => {
  it('are merged under the entries of the view: its newer repeats win, the older keys first', async () => {
    const store = new MemoryStore();
    const log = logContext(store, { viewPolicy, viewCacheBytes: 0 });
    const scope: LogScope = { keyPrefix: '', id: 's', generation: 'g' };
    const older = { aaaaaaaaaaaa: 2, bbbbbbbbbbbb: 4, cccccccccccc: 6 };
    await store.put(
      olderRepeatedKey(scope, 3, 10),
      JSON.stringify({ format: 'tailgate.repeated.v1', record: 3, before_seq: 10, repeated: older }),
    );
    // The view's own entries: a key of the older ones repeated again since, and new keys out of seq order.
    const aggregates: HistoryAggregates = {
      ...emptyAggregates(),
      repeated: RepeatedCalls.of({ dddddddddddd: 30, bbbbbbbbbbbb: 20, eeeeeeeeeeee: 12 }),
      repeated_older: { before_seq: 10, record: 3 },
    };
    const whole = (await withOlderRepeated(log, scope, aggregates))!;
    const want = { aaaaaaaaaaaa: 2, bbbbbbbbbbbb: 20, cccccccccccc: 6, dddddddddddd: 30, eeeeeeeeeeee: 12 };
    expect(whole.repeated_older).toBeUndefined();
    expect(whole.repeated.json()).toBe(JSON.stringify(want));
    expect(whole.repeated.seqs()).toEqual([2, 6, 12, 20, 30]);
    // Extended by a newer repeat as a turn extends it.
    expect(whole.repeated.with([['aaaaaaaaaaaa', 40]], true).seqs()).toEqual([6, 12, 20, 30, 40]);
  });
});

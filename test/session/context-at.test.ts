import { describe, expect, it } from 'vitest';
import { contextKey } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { DepthStore } from '../support/depth-store.ts';
import { SessionLog, summarized } from '../support/session-log.ts';

// SessionLog.contextAt reads a session's compactions back from the newest to the one asked for:
// on a session of many compactions, a few round trips, not one get after another per compaction.

const COMPACTIONS = 30;

/** Session `s`: COMPACTIONS compactions, each after one more message, the k-th starting at seq k + 1. */
async function compacted(store: DepthStore) {
  const sessions = new SessionLog(store, {});
  await sessions.create({ id: 's' });
  for (let index = 1; index <= COMPACTIONS; index++) {
    await sessions.append('s', [{ type: 'message', role: 'user', content: `m${index}` }]);
    const context = { summary: `s${index}`, summarized: { first_seq: 1, last_seq: index }, interrupted: [] };
    await sessions.compact('s', async () => summarized({ ...context, start_seq: index + 1, model: 'echo' }));
  }
  return sessions;
}

describe('SessionLog.contextAt', () => {
  it('finds the oldest of many compactions in a few round trips, each read once', async () => {
    const store = new DepthStore(new MemoryStore());
    const sessions = await compacted(store);
    const scope = await sessions.scope('s');
    store.mark();
    await expect(sessions.contextAt('s', 2)).resolves.toMatchObject({ start_seq: 2, summary: 's1' });
    const reads = store.calls.filter(
      (call) => call.op === 'get' && call.key.startsWith(contextKey(scope, 1).slice(0, -12)),
    );
    expect(reads).toHaveLength(COMPACTIONS);
    expect(store.depth()).toBeLessThanOrEqual(8);
  });

  it('answers each compaction, and null where none began', async () => {
    const sessions = await compacted(new DepthStore(new MemoryStore()));
    for (const start of [2, 9, COMPACTIONS + 1])
      await expect(sessions.contextAt('s', start)).resolves.toMatchObject({
        start_seq: start,
        summary: `s${start - 1}`,
      });
    await expect(sessions.contextAt('s', 1)).resolves.toBeNull();
    await expect(sessions.contextAt('s', COMPACTIONS + 2)).resolves.toBeNull();
  });
});

import { describe, expect, it } from 'vitest';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { listAll } from '../../lib/store/object-store.ts';
import { sessionOfReads, SEGMENTED } from '../support/log-views.ts';
import { SessionLog } from '../support/session-log.ts';
import { contents, turnOf } from './rewind-simulation-suite.ts';

/**
 * A flattening (lib/session/log/flatten.ts) copies only the generations above the oldest one it
 * reads: what the session stores grows with each delete by what came since, not by its history.
 */

const storedBytes = async (store: MemoryStore) =>
  (await listAll(store, 'sessions/s/')).reduce((sum, object) => sum + object.size, 0);

describe('a session flattened again and again', () => {
  it('stores a bounded copy each time, not its whole history', async () => {
    const store = new MemoryStore();
    const log = new SessionLog(store, SEGMENTED);
    await sessionOfReads(log, 's', 80);
    const history = await storedBytes(store);
    const kept = (await contents(log, 's')).length;
    let depth = 0;
    // What each delete adds: the new generation's first view (as large as the prompt) always, and a
    // flattening's copy.
    const growth: number[] = [];
    const flattening: number[] = [];
    for (let n = 1; n <= 40; n++) {
      await turnOf(log, 's', `kept ${n}`);
      await turnOf(log, 's', `gone ${n}`);
      const before = await storedBytes(store);
      await log.deleteTurn('s', (await log.get('s')).counts.turns);
      await log.pack('s');
      growth.push((await storedBytes(store)) - before);
      const config = JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', 's')))!.body));
      const now = config.fork_of?.length ?? 0;
      if (now < depth) flattening.push(growth.pop()!);
      depth = now;
    }
    expect(flattening.length).toBeGreaterThanOrEqual(4);
    // A flattening's copy is of the turns since the history was last copied whole, not of the
    // history (before: each copy was all of it, 100 KB and more, growing with the history).
    for (const bytes of flattening) expect(bytes - Math.max(...growth)).toBeLessThan(history / 5);
    expect((await contents(log, 's')).length).toBe(kept + 2 * 40);
  });
});

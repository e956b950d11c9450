import { describe, expect, it } from 'vitest';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SessionLog } from '../support/session-log.ts';
import { turnOf } from './rewind-simulation-suite.ts';

describe('SessionLog.deleteTurn, again and again', () => {
  it('keeps the ancestry as deep when the newest turn goes more times than a config may name forks', async () => {
    const store = new MemoryStore();
    const log = new SessionLog(store, { packMinRecords: 2, keepRecords: 1 });
    await log.create({ id: 's' });
    await turnOf(log, 's', 'one');
    for (let n = 1; n <= 12; n++) {
      await turnOf(log, 's', `try ${n}`);
      await log.deleteTurn('s', 2);
      await expect(log.get('s'), `after delete ${n}`).resolves.toMatchObject({ counts: { turns: 1 } });
      const config = JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', 's')))!.body));
      expect(config.fork_of, `after delete ${n}`).toHaveLength(1);
    }
    // The history reads as it was before the first delete.
    const items = await log.listItems('s', { limit: 10 });
    expect(items.items.map((item) => item.seq)).toEqual([2, 1]);
    await turnOf(log, 's', 'two');
    await expect(log.get('s')).resolves.toMatchObject({ counts: { turns: 2 } });
  });

  it('keeps it at most one level deep when the only turn goes again and again', async () => {
    const store = new MemoryStore();
    const log = new SessionLog(store, { packMinRecords: 2, keepRecords: 1 });
    await log.create({ id: 'fresh' });
    for (let n = 1; n <= 12; n++) {
      await turnOf(log, 'fresh', `try ${n}`);
      await log.deleteTurn('fresh', 1);
      await expect(log.get('fresh'), `after delete ${n}`).resolves.toMatchObject({ counts: { turns: 0, items: 0 } });
      const config = JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', 'fresh')))!.body));
      expect(config.fork_of?.length ?? 0, `after delete ${n}`).toBeLessThanOrEqual(1);
    }
    await turnOf(log, 'fresh', 'kept');
    const items = await log.listItems('fresh', { limit: 10 });
    expect(items.items.map((item) => item.seq)).toEqual([2, 1]);
  });

  it('refuses a delete past the ancestry a config may name before its fence: the next turn runs at once', async () => {
    const store = new MemoryStore();
    const log = new SessionLog(store, { packMinRecords: 100, keepRecords: 100 });
    await log.create({ id: 'deep' });
    // Each delete after a turn that stays forks one generation deeper.
    for (let n = 1; n <= 8; n++) {
      await turnOf(log, 'deep', `kept ${n}`);
      await turnOf(log, 'deep', `gone ${n}`);
      await log.deleteTurn('deep', n + 1);
    }
    await turnOf(log, 'deep', 'kept 9');
    await turnOf(log, 'deep', 'stays');
    await expect(log.deleteTurn('deep', 10)).rejects.toMatchObject({ code: 'delete_refused' });
    // No fence holds the session for a lease.
    await turnOf(log, 'deep', 'next');
    await expect(log.get('deep')).resolves.toMatchObject({ counts: { turns: 11 } });
  });
});

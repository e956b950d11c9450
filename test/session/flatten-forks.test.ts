import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SessionLog } from '../support/session-log.ts';
import { contents, turnOf } from './rewind-simulation-suite.ts';

describe('the forks of a session flattened twice', () => {
  it('lists one made while the session read a flattened generation holding none of its own items', async () => {
    const store = new MemoryStore();
    const log = new SessionLog(store, { packMinRecords: 2, keepRecords: 1 });
    await log.create({ id: 's' });
    let turns = 0;
    const cycle = async (n: number) => {
      await turnOf(log, 's', `kept ${n}`);
      await turnOf(log, 's', `gone ${n}`);
      turns += 2;
      await log.deleteTurn('s', turns);
      turns -= 1;
    };
    // The ninth delete flattens: the session then reads a generation of its flattened history only.
    for (let n = 1; n <= 9; n++) await cycle(n);
    await log.fork('s', { at_turn: 3, fields: { id: 'branch' } });
    // A dead turn taken out at once: the next generation reads that one up to its first record.
    await turnOf(log, 's', 'dead');
    await log.deleteTurn('s', turns + 1);
    for (let n = 10; n <= 20; n++) await cycle(n);
    const forks = await log.listForks('s', { limit: 100 });
    expect(forks.forks.map((fork) => fork.id)).toEqual(['branch']);
    await expect(contents(log, 'branch')).resolves.toEqual([
      'kept 1',
      're kept 1',
      'kept 2',
      're kept 2',
      'kept 3',
      're kept 3',
    ]);
  });
});

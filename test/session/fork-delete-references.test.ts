import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { listAll } from '../../lib/store/object-store.ts';
import { SessionLog } from '../support/session-log.ts';
import { turnOf } from './rewind-simulation-suite.ts';

/**
 * A fork's delete (lib/session/log/config-object.ts deleteSession) removes the references every
 * generation of its incarnation put under the sessions it forked: a delete of its newest turn puts
 * one under each of them for the generation it writes, and one younger than a lease is live.
 */
describe('a fork whose newest turn was deleted, deleted right after the session it forked', () => {
  it.each([
    ['once', 1],
    ['past the generations a config names (flattened)', 12],
  ])('leaves nothing of either (%s)', async (_, deletes) => {
    const store = new MemoryStore();
    const log = new SessionLog(store, { packMinRecords: 2, keepRecords: 1 });
    await log.create({ id: 's' });
    await turnOf(log, 's', 'a');
    await turnOf(log, 's', 'b');
    await log.fork('s', { at_turn: 2, fields: { id: 'f' } });
    for (let n = 1; n <= deletes; n++) {
      await turnOf(log, 'f', `kept ${n}`);
      await turnOf(log, 'f', `gone ${n}`);
      await log.deleteTurn('f', (await log.get('f')).counts.turns);
    }
    await log.delete('s');
    await log.delete('f');
    expect((await listAll(store, 'sessions/')).map((object) => object.key)).toEqual([]);
  });
});

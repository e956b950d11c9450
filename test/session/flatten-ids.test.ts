import { describe, expect, it } from 'vitest';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { scopeOf } from '../../lib/session/log/head.ts';
import { idGeneration } from '../../lib/session/log/rewind.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { SessionLog } from '../support/session-log.ts';
import { contents, turnOf } from './rewind-simulation-suite.ts';

const scopeNow = async (store: ObjectStore, id: string) =>
  scopeOf('', JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', id)))!.body)));

describe('ids of a history flattened again and again', () => {
  it('never name another turn than the one they were given for', async () => {
    const store = new MemoryStore();
    const log = new SessionLog(store, { packMinRecords: 2, keepRecords: 1, segmentTargetBytes: 600 });
    await log.create({ id: 's' });
    const minted: { seq: number; generation: string | undefined; text: string }[] = [];
    let turns = 0;
    const take = async (text: string) => {
      const seq = (await contents(log, 's')).length + 1;
      await turnOf(log, 's', text);
      turns += 1;
      minted.push({ seq, generation: idGeneration(await scopeNow(store, 's'), seq), text });
    };
    for (let n = 1; n <= 60; n++) {
      await take(`kept ${n}`);
      await take(`gone ${n}`);
      await log.deleteTurn('s', turns);
      turns -= 1;
      // Now and then a kept turn goes too, its seqs taken again by the next.
      if (n % 7 === 0) {
        await log.deleteTurn('s', turns);
        turns -= 1;
      }
    }
    const items = await contents(log, 's');
    const scope = await scopeNow(store, 's');
    expect(scope.named, 'past the generations a config names').toHaveLength(32);
    const wrong = minted.filter(
      ({ seq, generation, text }) => idGeneration(scope, seq) === generation && items[seq - 1] !== text,
    );
    expect(wrong).toEqual([]);
    const found = minted.filter(({ seq, generation }) => idGeneration(scope, seq) === generation);
    expect(found.length).toBeGreaterThan(0);
  });
});

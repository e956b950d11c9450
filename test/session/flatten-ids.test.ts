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
    // The most generations `named` listed after a delete.
    let widest = 0;
    // The newest generation `named` listed (a flattening names a new one first).
    let flattened: string | undefined;
    const deleted = async () => {
      await log.deleteTurn('s', turns);
      turns -= 1;
      const scope = await scopeNow(store, 's');
      widest = Math.max(widest, scope.named?.length ?? 0);
      // After a flattening, the ids of every item as a read names them then: one that cut `named`
      // leaves some naming another generation than they did (log/flatten-copy.ts), which must
      // name no other item later.
      if (scope.named?.[0]?.generation === flattened) return;
      flattened = scope.named?.[0]?.generation;
      for (const [index, text] of (await contents(log, 's')).entries())
        minted.push({ seq: index + 1, generation: idGeneration(scope, index + 1), text });
    };
    const take = async (text: string) => {
      const seq = (await contents(log, 's')).length + 1;
      await turnOf(log, 's', text);
      turns += 1;
      minted.push({ seq, generation: idGeneration(await scopeNow(store, 's'), seq), text });
    };
    for (let n = 1; n <= 60; n++) {
      await take(`kept ${n}`);
      await take(`gone ${n}`);
      await deleted();
      // Now and then a kept turn goes too, its seqs taken again by the next.
      if (n % 7 === 0) await deleted();
    }
    const items = await contents(log, 's');
    const scope = await scopeNow(store, 's');
    // Past the generations a config names: a flattening listed 32 (MAX_NAMED_GENERATIONS), the
    // newest first. A delete going back past all of the newest one's seqs then drops it (clipNames:
    // those seqs are the next turn's, in the generation it writes), which leaves 31 when the last
    // flattening was followed by such a delete, as here (rounds 35, 42, 49 and 56 each flatten, and
    // then take the kept turn out too).
    expect(widest, 'past the generations a config names').toBe(32);
    expect(scope.named!.length).toBeGreaterThanOrEqual(31);
    expect(scope.named!.length).toBeLessThanOrEqual(32);
    const wrong = minted.filter(
      ({ seq, generation, text }) => idGeneration(scope, seq) === generation && items[seq - 1] !== text,
    );
    expect(wrong).toEqual([]);
    const found = minted.filter(({ seq, generation }) => idGeneration(scope, seq) === generation);
    expect(found.length).toBeGreaterThan(0);
  });
});

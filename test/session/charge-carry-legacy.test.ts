import { describe, expect, it } from 'vitest';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { CHARGED, completedTurn, fencePut, totalsAfterTwoWrites } from '../support/charges.ts';
import { HeldStore } from '../support/held-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { type OpenTurn, SessionLog } from '../support/session-log.ts';

// A charge put under the generation a delete of the newest turn leaves, after that delete read its
// head, is carried to the generation the session moved to (lib/session/log/charges.ts carry) for
// a config without `incarnation` too (one written before configs named it): its `queued_in` names
// every generation a delete left, even when the new generation reads none of the one left (a
// delete of the first turn of a generation a delete wrote forks where that generation forked).

describe.each(await memoryAndFileStores('charge-carry-legacy'))(
  'a charge carried past a delete of a config without incarnation: %s',
  (_, storeOf) => {
    it('counts once when the new generation reads none of the one left', async () => {
      const store = new HeldStore(storeOf());
      const log = new SessionLog(store, {});
      await log.create({ id: 's1' });
      const key = sessionConfigKey('', 's1');
      const { incarnation: _incarnation, ...legacy } = JSON.parse(
        new TextDecoder().decode((await store.get(key))!.body),
      );
      await store.put(key, JSON.stringify(legacy), { contentType: 'application/json' });
      await completedTurn(log, 'a');
      await completedTurn(log, 'b');
      await log.deleteTurn('s1', 2);
      await completedTurn(log, 'b again');
      const left = { scope: await log.scope('s1') } as OpenTurn;

      const fence = store.hold(fencePut);
      const deleted = log.deleteTurn('s1', 2);
      await fence.reached;
      expect(await log.storeCharge(left, { usage: CHARGED })).toBe(true);
      fence.release();
      await deleted;

      expect(await totalsAfterTwoWrites(log, ['c', 'd'])).toMatchObject({
        turns: 3,
        input_tokens: 310,
        output_tokens: 16,
      });
    });
  },
);

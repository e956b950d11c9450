import { describe, expect, it } from 'vitest';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { CHARGED, chargeableSession, totalsAfterTwoWrites } from '../support/charges.ts';
import { type HeldCall, HeldStore } from '../support/held-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { SessionLog } from '../support/session-log.ts';

// A charge put after a delete of the newest turn read its head is counted by the generation the
// session moves to (lib/session/log/charges.ts): not lost to a second delete of the same turn.

describe.each(await memoryAndFileStores('charge-two-deletes'))(
  'two deletes of the newest turn and a charge: %s',
  (_, storeOf) => {
    it.each([true, false])('count the charge once, the first one moving the config: %s', async (firstMoves) => {
      const store = new HeldStore(storeOf());
      const log = new SessionLog(store, {});
      const turn = await chargeableSession(log);
      const configPut = ({ operation, keys }: HeldCall) =>
        operation === 'put' && keys[0] === sessionConfigKey('', 's1');

      const first = store.hold(configPut);
      const deleted = log.deleteTurn('s1', 1).then(
        () => 'deleted',
        (error: Error) => error.name,
      );
      await first.reached;
      expect(await log.storeCharge(turn, { usage: CHARGED })).toBe(true);
      // Another delete of the same turn fences after the first one's fence, its head listing the
      // charge; the config of either lands, with its own fence's totals.
      const second = store.hold(configPut);
      const again = log.deleteTurn('s1', 1).then(
        () => 'deleted',
        (error: Error) => error.name,
      );
      await second.reached;
      const [winner, loser] = firstMoves ? [first, second] : [second, first];
      winner.release();
      await (firstMoves ? deleted : again);
      loser.release();
      const outcomes = [await deleted, await again];

      expect(await totalsAfterTwoWrites(log)).toMatchObject({ turns: 1, input_tokens: 110, output_tokens: 6 });
      expect(outcomes).toEqual(firstMoves ? ['deleted', 'NotFoundError'] : ['NotFoundError', 'deleted']);
    });
  },
);

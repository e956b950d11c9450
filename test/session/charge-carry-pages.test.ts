import { describe, expect, it } from 'vitest';
import { CHARGED, chargeableSession, fencePut, isCharge, totalsAfterTwoWrites } from '../support/charges.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { HeldStore } from '../support/held-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { SessionLog } from '../support/session-log.ts';

// The delete of the newest turn carries every charge of the generation it left that no write
// counted (lib/session/log/charges.ts carriedOn), page after page: a store may answer a listing
// with fewer keys than asked while it is truncated (R2 does).

describe.each(await memoryAndFileStores('charge-carry-pages'))(
  'charges carried past a delete, listed page after page: %s',
  (_, storeOf) => {
    it('carries every one', async () => {
      const store = new HeldStore(
        new FaultyStore(storeOf(), { pageLimit: (prefix) => (isCharge(prefix) ? 1 : undefined) }),
      );
      const log = new SessionLog(store, {});
      const turn = await chargeableSession(log);

      const fence = store.hold(fencePut);
      const deleted = log.deleteTurn('s1', 1);
      await fence.reached;
      for (let charge = 0; charge < 3; charge++) expect(await log.storeCharge(turn, { usage: CHARGED })).toBe(true);
      fence.release();
      await deleted;

      expect(await totalsAfterTwoWrites(log)).toMatchObject({ turns: 1, input_tokens: 130, output_tokens: 8 });
    });
  },
);

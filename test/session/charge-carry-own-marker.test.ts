import { describe, expect, it } from 'vitest';
import { CHARGED, USAGE, user } from '../support/charges.ts';
import { LandsRefusedStore } from '../support/refusing-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { type OpenTurn, SessionLog } from '../support/session-log.ts';

// A charge put after a delete of the newest turn moved the session on is carried to the
// generation it moved to (lib/session/log/charges.ts carry), by whoever's create-only marker
// lands. A marker put answered as refused may be its own that landed (a store's retry refused by
// its own first attempt): its carrier carries the charge all the same, so it is counted once.

describe.each(await memoryAndFileStores('charge-carry-own-marker'))(
  'a charge carried on by its writer counts once: %s',
  (_, storeOf) => {
    it('its marker landed, answered as refused', async () => {
      const store = new LandsRefusedStore(storeOf(), (key) => key.endsWith('.carried'));
      const log = new SessionLog(store, {});
      await log.create({ id: 's1' });
      const begun = await log.beginTurn('s1', { input: [user('a')] });
      if (begun.kind !== 'claimed') throw new Error('expected a claim');
      await log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {}, usage: USAGE });
      const turn = { scope: await log.scope('s1') } as OpenTurn;
      // Read before the delete of the newest turn; its charge put after that delete moved the session on.
      await log.deleteTurn('s1', 1);
      store.armed = true;
      expect(await log.storeCharge(turn, { usage: CHARGED })).toBe(true);
      expect(store.armed).toBe(false);
      for (const content of ['b', 'c', 'd']) await log.append('s1', [user(content)]);
      expect((await log.get('s1')).usage).toMatchObject({ input_tokens: 110, output_tokens: 6 });
    });
  },
);

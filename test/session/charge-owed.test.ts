import { describe, expect, it } from 'vitest';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { CHARGED, chargeableSession, fencePut, isCharge, totalsAfterTwoWrites, user } from '../support/charges.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { HeldStore } from '../support/held-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { SessionLog } from '../support/session-log.ts';

// A delete of the newest turn that moved the config owes the charges of the generation it left
// that no write counted (put after its head read, their writers reading the config before it
// moved): the config it writes names that generation (`carry_from`), so whichever write reads it
// next carries them (lib/session/log/owed-charges.ts), when the delete stopped before it did.

describe.each(await memoryAndFileStores('charge-owed'))(
  'charges a delete of the newest turn owes: %s',
  (_, storeOf) => {
    it('are counted by the next writes when its process stops listing them', async () => {
      const faulty = new FaultyStore(storeOf());
      const store = new HeldStore(faulty);
      const log = new SessionLog(store, {});
      const turn = await chargeableSession(log);
      const fence = store.hold(fencePut);
      const deleted = log.deleteTurn('s1', 1);
      await fence.reached;
      expect(await log.storeCharge(turn, { usage: CHARGED })).toBe(true);
      // Its listings of charges fail, as a process that died once it moved the config.
      faulty.failWhen(({ operation, key }) => operation === 'list' && isCharge(key));
      fence.release();
      await deleted;
      faulty.heal();
      expect(await totalsAfterTwoWrites(log)).toMatchObject({ turns: 1, input_tokens: 110, output_tokens: 6 });
      expect(
        JSON.parse(new TextDecoder().decode((await faulty.get(sessionConfigKey('', 's1')))!.body)),
      ).not.toHaveProperty('carry_from');
    });
  },
);

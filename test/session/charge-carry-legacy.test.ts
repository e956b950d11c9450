import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { HeldStore } from '../support/held-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { type OpenTurn, SessionLog } from '../support/session-log.ts';

// A charge put under the generation a delete of the newest turn leaves, after that delete read its
// head, is carried to the generation the session moved to (lib/session/log/charges.ts carry) for
// a config without `incarnation` too (one written before configs named it): its `queued_in` names
// every generation a delete left, even when the new generation reads none of the one left (a
// delete of the first turn of a generation a delete wrote forks where that generation forked).

const user = (content: string): Item => ({ type: 'message', role: 'user', content });
const USAGE = {
  input_tokens: 100,
  cached_input_tokens: 0,
  cache_write_tokens: 0,
  output_tokens: 5,
  reasoning_tokens: 0,
  cost_usd: 0,
};
const CHARGED = { ...USAGE, input_tokens: 10, output_tokens: 1 };
const isCharge = (key: string) => key.includes('/-charge-');

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
      const turn = async (content: string) => {
        const begun = await log.beginTurn('s1', { input: [user(content)] });
        if (begun.kind !== 'claimed') throw new Error('expected a claim');
        await log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {}, usage: USAGE });
      };
      await turn('a');
      await turn('b');
      await log.deleteTurn('s1', 2);
      await turn('b again');
      const left = { scope: await log.scope('s1') } as OpenTurn;

      const fence = store.hold(
        ({ operation, keys }) => operation === 'put' && keys[0]!.includes('/turn/') && !isCharge(keys[0]!),
      );
      const deleted = log.deleteTurn('s1', 2);
      await fence.reached;
      expect(await log.storeCharge(left, { usage: CHARGED })).toBe(true);
      fence.release();
      await deleted;

      for (const content of ['c', 'd']) await log.append('s1', [user(content)]);
      expect((await log.get('s1')).usage).toMatchObject({ turns: 3, input_tokens: 310, output_tokens: 16 });
    });
  },
);

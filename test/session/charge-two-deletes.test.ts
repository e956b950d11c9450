import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { HeldStore } from '../support/held-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { type OpenTurn, SessionLog } from '../support/session-log.ts';

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

// A charge put after a delete of the newest turn read its head is counted by the generation the
// session moves to (lib/session/log/charges.ts): not lost to a second delete of the same turn.

describe.each(await memoryAndFileStores('charge-two-deletes'))(
  'two deletes of the newest turn and a charge: %s',
  (_, storeOf) => {
    it.each([true, false])('count the charge once, the first one moving the config: %s', async (firstMoves) => {
      const store = new HeldStore(storeOf());
      const log = new SessionLog(store, {});
      await log.create({ id: 's1' });
      const begun = await log.beginTurn('s1', { input: [user('a')] });
      if (begun.kind !== 'claimed') throw new Error('expected a claim');
      await log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {}, usage: USAGE });
      const turn = { scope: await log.scope('s1') } as OpenTurn;
      const configPut = ({ operation, keys }: { operation: string; keys: string[] }) =>
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

      for (const content of ['b', 'c']) await log.append('s1', [user(content)]);
      expect((await log.get('s1')).usage).toMatchObject({ turns: 1, input_tokens: 110, output_tokens: 6 });
      expect(outcomes).toEqual(firstMoves ? ['deleted', 'NotFoundError'] : ['NotFoundError', 'deleted']);
    });
  },
);

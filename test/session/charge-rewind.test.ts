import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { faultyLogs } from '../support/faulty-logs.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { type OpenTurn, SessionLog } from '../support/session-log.ts';

// A delete of the newest turn moves the session to a new generation, which lists none of the
// charges stored under the one it leaves (lib/session/log/charges.ts): its fence counts every
// charge its head listed, or the delete is refused with nothing written.

const user = (content: string): Item => ({ type: 'message', role: 'user', content });
const CHARGED = {
  input_tokens: 10,
  cached_input_tokens: 0,
  cache_write_tokens: 0,
  output_tokens: 1,
  reasoning_tokens: 0,
  cost_usd: 0,
};

/** A session whose turn 1 completed (100 in, 5 out), then `charges` charges of 10 in, 1 out each. */
async function charged(charges: number) {
  const store = new FaultyStore(new MemoryStore());
  const log = new SessionLog(store, {});
  await log.create({ id: 's1' });
  const begun = await log.beginTurn('s1', { input: [user('a')] });
  if (begun.kind !== 'claimed') throw new Error('expected a claim');
  const usage = { ...CHARGED, input_tokens: 100, output_tokens: 5 };
  await log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {}, usage });
  for (let charge = 0; charge < charges; charge++)
    expect(await log.storeCharge(begun.turn, { usage: CHARGED })).toBe(true);
  return { store, log };
}

describe("a delete of the newest turn keeps every charge in the session's totals", () => {
  it('more charges than one write counts', async () => {
    const { store, log } = await charged(20);
    await log.deleteTurn('s1', 1);
    // Counted, and listed by no write of the session again: deleted.
    const keys = (await store.list('')).objects.map((object) => object.key);
    expect(keys.filter((key) => key.includes('/-charge-'))).toEqual([]);
    await log.append('s1', [user('b')]);
    expect((await log.get('s1')).usage).toMatchObject({ input_tokens: 300, output_tokens: 25 });
  });

  it("a charge's get fails: the delete is refused, and the next one counts it", async () => {
    const { store, log } = await charged(2);
    store.failWhen(({ operation, key }) => operation === 'get' && key.includes('/-charge-'), { times: 1 });
    await expect(log.deleteTurn('s1', 1)).rejects.toThrow();
    await log.deleteTurn('s1', 1);
    await log.append('s1', [user('b')]);
    expect((await log.get('s1')).usage).toMatchObject({ input_tokens: 120, output_tokens: 7 });
  });
});

describe.each(await memoryAndFileStores('charge-rewind'))(
  'a delete of the newest turn with charges: %s',
  (_, storeOf) => {
    const LEASE_MS = 1000;
    /** A charge turn 1's claim counted, turn 1 completed (100 in, 5 out), then a charge no write counted yet. */
    async function world() {
      const logs = faultyLogs(storeOf(), LEASE_MS);
      await logs.log.create({ id: 's1' });
      await logs.log.append('s1', [user('a')]);
      // What a turn whose record never landed stores (only its scope is read).
      const charge = async () => {
        const turn = { scope: await logs.log.scope('s1') } as OpenTurn;
        expect(await logs.log.storeCharge(turn, { usage: CHARGED })).toBe(true);
      };
      await charge();
      const begun = await logs.log.beginTurn('s1', { input: [user('b')] });
      if (begun.kind !== 'claimed') throw new Error('expected a claim');
      const usage = { ...CHARGED, input_tokens: 100, output_tokens: 5 };
      await logs.log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {}, usage });
      await charge();
      return logs;
    }

    it('counts each charge once, whichever storage call of the delete fails', async () => {
      let calls = 0;
      const counting = await world();
      counting.store.failWhen(() => {
        calls++;
        return false;
      });
      expect((await counting.log.deleteTurn('s1', 1)).usage).toMatchObject({ input_tokens: 120, output_tokens: 7 });
      expect(calls).toBeGreaterThan(5);
      for (let k = 1; k <= calls; k++) {
        for (const after of [false, true]) {
          const logs = await world();
          logs.failAt(k, after);
          await logs.log.deleteTurn('s1', 1).catch(() => undefined);
          logs.store.heal();
          for (const content of ['c', 'd']) {
            logs.advance(3 * LEASE_MS);
            await logs.other.append('s1', [user(content)]);
          }
          expect((await logs.log.get('s1')).usage, `call ${k}, ${after ? 'after' : 'before'}`).toMatchObject({
            input_tokens: 120,
            output_tokens: 7,
          });
        }
      }
    });
  },
);

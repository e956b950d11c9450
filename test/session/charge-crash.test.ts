import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { faultyLogs } from '../support/faulty-logs.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import type { OpenTurn, SessionLog } from '../support/session-log.ts';

// What a model call spent whose turn's record never landed (a charge, `turn/<g>/-charge-<id>`,
// lib/session/log/charges.ts) is added to the session's totals exactly once: by the next write of
// its chain that lists it, whichever storage call of that write (or of the ones after it: the
// charge's delete) fails, before it or after it landed with its answer lost. On the memory and
// file stores.

const LEASE_MS = 1000;
const user = (content: string): Item => ({ type: 'message', role: 'user', content });
const CHARGED = {
  input_tokens: 100,
  cached_input_tokens: 0,
  cache_write_tokens: 0,
  output_tokens: 7,
  reasoning_tokens: 0,
  cost_usd: 0,
};
const stores = await memoryAndFileStores('charge-crash');

function setup(inner: ObjectStore) {
  const logs = faultyLogs(inner, LEASE_MS);
  const claim = async (on: SessionLog, input: Item[]): Promise<OpenTurn> => {
    const begun = await on.beginTurn('s1', { input });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    return begun.turn;
  };
  // Turn 1 claimed and failed; then a call of a turn whose record did not land stores its charge.
  const charged = async () => {
    await logs.log.create({ id: 's1' });
    const turn = await claim(logs.log, [user('a')]);
    await logs.log.completeTurn(turn, { status: 'failed', output: [], receipt: {} });
    expect(await logs.log.storeCharge(turn, { usage: CHARGED, estimated: true })).toBe(true);
    return () => claim(logs.log, [user('b')]);
  };
  return { ...logs, claim, charged, totals: async () => (await logs.log.get('s1')).usage };
}

/** How many storage calls `work` makes on a fresh world. */
async function callsOf(storeOf: () => ObjectStore, work: (world: ReturnType<typeof setup>) => Promise<unknown>) {
  const world = setup(storeOf());
  let calls = 0;
  world.store.failWhen(() => {
    calls++;
    return false;
  });
  await work(world);
  return calls;
}

describe.each(stores)("a charge counts once in its session's totals: %s", (_, storeOf) => {
  it('whichever storage call of the claim that counts it, or of the writes after it, fails', async () => {
    // The claim that counts it, then two appends: the first deletes it, the second no longer lists it.
    const writes = async (world: ReturnType<typeof setup>, next: () => Promise<unknown>) => {
      await next().catch(() => undefined);
      for (const content of ['c', 'd']) {
        world.advance(3 * LEASE_MS);
        await world.other.append('s1', [user(content)]).catch(() => undefined);
      }
    };
    const total = await callsOf(storeOf, async (world) => writes(world, await world.charged()));
    const before = await callsOf(storeOf, async (world) => world.charged());
    expect(total - before).toBeGreaterThan(3);
    for (let k = 1; k <= total - before; k++) {
      for (const after of [false, true]) {
        const world = setup(storeOf());
        const next = await world.charged();
        world.failAt(k, after);
        await writes(world, next);
        world.store.heal();
        // Whatever landed: any open turn's lease runs out, and two more appends follow.
        for (const content of ['e', 'f']) {
          world.advance(3 * LEASE_MS);
          await world.other.append('s1', [user(content)]);
        }
        expect(await world.totals(), `call ${k}, ${after ? 'after' : 'before'}`).toMatchObject({
          turns: 0,
          input_tokens: 100,
          output_tokens: 7,
        });
      }
    }
  });
});

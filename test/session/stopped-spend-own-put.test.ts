import { describe, expect, it } from 'vitest';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { USAGE, user } from '../support/charges.ts';
import { LandsRefusedStore } from '../support/refusing-store.ts';
import { faultyLogs } from '../support/faulty-logs.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import type { OpenTurn } from '../support/session-log.ts';

// A stopped turn's put at `spent/` that a store answers as refused, or not at all, may have
// landed all the same (an adapter's retry meeting its own first attempt is refused; a timeout
// after the write): the object there is then its own, which the chain counts, and it stores no
// charge as well. One that finds another's there (another run of the turn, closed by the same
// close, its spend the same) stores a charge: each call the provider billed counts once.

const LEASE_MS = 1000;
const STOPPED = { ...USAGE, output_tokens: 7 };
const stores = await memoryAndFileStores('stopped-spend-own-put');

async function stoppedIn(inner: ObjectStore) {
  const world = faultyLogs(inner, LEASE_MS);
  await world.log.create({ id: 's1' });
  const begun = await world.log.beginTurn('s1', { input: [user('a')] });
  if (begun.kind !== 'claimed') throw new Error('expected a claim');
  await world.other.cancelTurn('s1', 1);
  const totals = async () => {
    for (const content of ['x', 'y', 'z']) await world.other.append('s1', [user(content)]);
    return (await world.log.get('s1')).usage;
  };
  return { ...world, turn: begun.turn as OpenTurn, totals };
}

describe.each(stores)("a stopped turn's own put at spent/ counts once: %s", (_, storeOf) => {
  it('landed, and answered as refused (a retry meeting its own first attempt): no charge as well', async () => {
    const store = new LandsRefusedStore(storeOf(), (key) => key.includes('/spent/'));
    const world = await stoppedIn(store);
    store.armed = true;
    expect(await world.log.storeStoppedSpend(world.turn, { usage: STOPPED, estimated: true })).toBe(true);
    expect(store.armed).toBe(false);
    expect(await world.totals()).toMatchObject({ turns: 0, input_tokens: 100, output_tokens: 7 });
  });

  it('two runs of the turn storing the same spend: the second is a charge, its put answered or not', async () => {
    for (const lost of [false, true]) {
      const world = await stoppedIn(storeOf());
      expect(await world.log.storeStoppedSpend(world.turn, { usage: STOPPED })).toBe(true);
      // The other run's put refused, its answer lost (it failed before it landed: the key holds the first's).
      if (lost)
        world.store.failWhen(({ operation, key }) => operation === 'put' && key.includes('/spent/'), { times: 1 });
      expect(await world.other.storeStoppedSpend(world.turn, { usage: STOPPED })).toBe(true);
      expect(await world.totals(), lost ? 'lost' : 'refused').toMatchObject({ input_tokens: 200, output_tokens: 14 });
    }
  });
});

describe.each(stores)("a stopped turn's spend its own completion counted: %s", (_, storeOf) => {
  it('its completion landed unseen (a lost answer, its read failing): what it stores is no charge', async () => {
    const world = faultyLogs(storeOf(), LEASE_MS);
    await world.log.create({ id: 's1' });
    const begun = await world.log.beginTurn('s1', { input: [user('a')] });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    // Its completion lands, its answer lost, and its read of the key fails: it is taken as left open.
    world.store.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.done'), {
      after: true,
      times: 1,
    });
    world.store.failWhen(({ operation, key }) => operation === 'get' && key.endsWith('.done'), { times: 1 });
    const outcome = { status: 'completed' as const, output: [user('d')], receipt: {}, usage: STOPPED };
    await expect(world.log.completeTurn(begun.turn, outcome)).rejects.toThrow();
    world.store.heal();
    // What its failed completion would have counted, stored as a stopped turn's.
    expect(await world.log.storeStoppedSpend(begun.turn, { usage: STOPPED })).toBe(true);
    for (const content of ['x', 'y', 'z']) await world.other.append('s1', [user(content)]);
    expect((await world.log.get('s1')).usage).toMatchObject({ turns: 1, input_tokens: 100, output_tokens: 7 });
  });
});

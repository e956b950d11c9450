import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { MAX_UNBILLED } from '../../lib/session/log/unbilled.ts';
import { faultyLogs } from '../support/faulty-logs.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import type { OpenTurn, SessionLog } from '../support/session-log.ts';

// What a turn closed by someone else spent (`spent/<generation>/<turn>`, lib/session/log/unbilled.ts)
// is added to the session's totals exactly once: by the next write of its chain that finds it
// (a claim, a turn's completion, an append), whichever storage call of that write fails (before
// it, or after it landed with its answer lost), and whoever races it. On the memory and file stores.

const LEASE_MS = 1000;
const user = (content: string): Item => ({ type: 'message', role: 'user', content });
const usage = (input: number, output: number) => ({
  input_tokens: input,
  cached_input_tokens: 0,
  cache_write_tokens: 0,
  output_tokens: output,
  reasoning_tokens: 0,
  cost_usd: 0,
});
const STOPPED = usage(100, 7);
const COMPLETED = usage(10, 3);
const stores = await memoryAndFileStores('stopped-spend-crash');

function setup(inner: ObjectStore) {
  const logs = faultyLogs(inner, LEASE_MS);
  const { log, other } = logs;
  const claim = async (on: SessionLog, input: Item[]): Promise<OpenTurn> => {
    const begun = await on.beginTurn('s1', { input });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    return begun.turn;
  };
  const totals = async () => (await log.get('s1')).usage;
  // Turn 1 claimed, then cancelled by someone else: its closer's completion names it unbilled.
  const stopped = async () => {
    await log.create({ id: 's1' });
    const turn = await claim(log, [user('a')]);
    await other.cancelTurn('s1', 1);
    return turn;
  };
  return { ...logs, claim, totals, stopped };
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

describe.each(stores)("a stopped turn's spend counts once in its session's totals: %s", (_, storeOf) => {
  it('whichever storage call of the claim that counts it fails', async () => {
    const claimNext = async (world: ReturnType<typeof setup>) => {
      const turn = await world.stopped();
      expect(await world.log.storeStoppedSpend(turn, { usage: STOPPED, estimated: true })).toBe(true);
      return async () => world.claim(world.log, [user('b')]);
    };
    const total = await callsOf(storeOf, async (world) => (await claimNext(world))());
    const before = await callsOf(storeOf, async (world) => claimNext(world));
    expect(total - before).toBeGreaterThan(3);
    for (let k = 1; k <= total - before; k++) {
      for (const after of [false, true]) {
        const world = setup(storeOf());
        const next = await claimNext(world);
        world.failAt(k, after);
        await next().catch(() => undefined);
        world.store.heal();
        // Whatever landed: any open turn's lease runs out, and an append is the chain's next write.
        world.advance(3 * LEASE_MS);
        await world.other.append('s1', [user('c')]);
        expect(await world.totals(), `call ${k}, ${after ? 'after' : 'before'}`).toMatchObject({
          turns: 0,
          input_tokens: 100,
          output_tokens: 7,
        });
      }
    }
  });

  it('whichever storage call of the completion that counts it fails (the spend stored during the turn)', async () => {
    const completeNext = async (world: ReturnType<typeof setup>) => {
      const first = await world.stopped();
      const turn = await world.claim(world.log, [user('b')]);
      expect(await world.log.storeStoppedSpend(first, { usage: STOPPED })).toBe(true);
      return () =>
        world.log.completeTurn(turn, { status: 'completed', output: [user('d')], receipt: {}, usage: COMPLETED });
    };
    const total = await callsOf(storeOf, async (world) => (await completeNext(world))());
    const before = await callsOf(storeOf, async (world) => completeNext(world));
    for (let k = 1; k <= total - before; k++) {
      for (const after of [false, true]) {
        const world = setup(storeOf());
        const complete = await completeNext(world);
        world.failAt(k, after);
        await complete().catch(() => undefined);
        world.store.heal();
        world.advance(3 * LEASE_MS);
        await world.other.append('s1', [user('c')]);
        const totals = await world.totals();
        // Counted once, with the completed turn's usage when its completion landed.
        expect(totals.input_tokens, `call ${k}, ${after ? 'after' : 'before'}`).toBe(100 + 10 * totals.turns);
        expect(totals.output_tokens).toBe(7 + 3 * totals.turns);
      }
    }
  });

  it('its closing completion not read (a failed get) is taken to wait: the spend is stored and counted', async () => {
    const world = setup(storeOf());
    const turn = await world.stopped();
    world.store.failWhen(({ operation, key }) => operation === 'get' && key.endsWith('.done'), { times: 1 });
    expect(await world.log.storeStoppedSpend(turn, { usage: STOPPED })).toBe(true);
    expect(world.store.injected).toBe(1);
    world.store.heal();
    await world.other.append('s1', [user('x')]);
    expect(await world.totals()).toMatchObject({ input_tokens: 100, output_tokens: 7 });
  });

  it('two writers racing count it once', async () => {
    const world = setup(storeOf());
    const turn = await world.stopped();
    await world.log.storeStoppedSpend(turn, { usage: STOPPED });
    await Promise.all([world.log.append('s1', [user('x')]), world.other.append('s1', [user('y')])]);
    await world.other.append('s1', [user('z')]);
    expect(await world.totals()).toMatchObject({ input_tokens: 100, output_tokens: 7 });
  });

  it('a spend stored after the chain stopped waiting for it is a charge, counted once by the next write', async () => {
    const world = setup(storeOf());
    const turn = await world.stopped();
    await world.log.append('s1', [user('x')]);
    world.advance(3 * LEASE_MS);
    await world.log.append('s1', [user('y')]);
    // Its `spent/` key holds the chain's empty object: nothing counted there, so it is charged.
    expect(await world.log.storeStoppedSpend(turn, { usage: STOPPED })).toBe(true);
    for (const content of ['z', 'w']) {
      await world.log.append('s1', [user(content)]);
      expect(await world.totals()).toMatchObject({ input_tokens: 100, output_tokens: 7 });
    }
  });

  it('turns closed faster than they store are waited for no more than MAX_UNBILLED at once', async () => {
    const world = setup(storeOf());
    await world.log.create({ id: 's1' });
    // Claimed and cancelled in turn, within the wait, their owners storing nothing yet.
    const turns: OpenTurn[] = [];
    for (let n = 0; n < 2 * MAX_UNBILLED + 4; n++) {
      turns.push(await world.claim(world.log, [user(`t${n}`)]));
      await world.other.cancelTurn('s1', turns.length);
      world.advance(1);
    }
    let spentReads = 0;
    world.store.failWhen(({ operation, key }) => {
      if (operation === 'get' && key.includes('/spent/')) spentReads++;
      return false;
    });
    const next = await world.claim(world.log, [user('next')]);
    expect(spentReads).toBeLessThanOrEqual(MAX_UNBILLED + 1);
    expect(next.unbilled.length).toBe(MAX_UNBILLED);
    // The newest stopped turns are still waited for; the oldest were given up, once, and store
    // their spends as charges: every one counts, once.
    const stored = await Promise.all(turns.map((turn) => world.log.storeStoppedSpend(turn, { usage: STOPPED })));
    expect(stored.every(Boolean)).toBe(true);
    const charges = async () =>
      (await world.store.list('sessions/s1/', { limit: 1000 })).objects.filter((object) =>
        object.key.includes('/-charge-'),
      );
    expect(await charges()).toHaveLength(turns.length - next.unbilled.length);
    await world.log.completeTurn(next, { status: 'completed', output: [user('d')], receipt: {}, usage: COMPLETED });
    for (const content of ['z', 'y', 'x', 'w']) await world.other.append('s1', [user(content)]);
    expect(await charges()).toHaveLength(0);
    expect(await world.totals()).toMatchObject({ turns: 1, input_tokens: 10 + 100 * turns.length });
  });

  it('a claim its stored spend refuses (the budget): the session shows the totals the refusal counted', async () => {
    const world = setup(storeOf());
    await world.log.create({ id: 's1', budget: { max_total_tokens: 50 } });
    const turn = await world.claim(world.log, [user('a')]);
    await world.other.cancelTurn('s1', 1);
    await world.log.storeStoppedSpend(turn, { usage: STOPPED });
    // Refused with nothing written: the turn stays named, its spend stored.
    await expect(world.log.beginTurn('s1', { input: [user('b')] })).rejects.toThrow('spent 107');
    // What GET answers, and the queue sweep's budget check reads, counts it as the refusal did.
    expect(await world.totals()).toMatchObject({ turns: 0, total_tokens: 107 });
    // Counted once all the same by the next write.
    await world.other.append('s1', [user('c')]);
    expect(await world.totals()).toMatchObject({ turns: 0, total_tokens: 107 });
  });

  it('a delete of the newest turn answers the totals a read of the session shows, its stored spend too', async () => {
    const world = setup(storeOf());
    await world.log.create({ id: 's1' });
    const first = await world.claim(world.log, [user('a')]);
    await world.log.completeTurn(first, { status: 'completed', output: [user('x')], receipt: {}, usage: COMPLETED });
    const turn = await world.claim(world.log, [user('b')]);
    await world.other.cancelTurn('s1', 2);
    await world.log.storeStoppedSpend(turn, { usage: STOPPED });
    const answered = await world.log.deleteTurn('s1', 2, { tookNothing: async () => true });
    expect(answered.usage).toEqual(await world.totals());
    expect(answered.usage).toMatchObject({ turns: 1, input_tokens: 110, output_tokens: 10 });
    // The new generation's next write counts it, once.
    await world.other.append('s1', [user('c')]);
    expect(await world.totals()).toEqual(answered.usage);
  });
});

import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { type HeldCall, HeldStore } from '../support/held-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { type OpenTurn, SessionLog } from '../support/session-log.ts';

// A charge (lib/session/log/charges.ts) put under the generation a delete of the newest turn is
// leaving, after that delete read its head (so its fence does not count it), is carried to the
// generation the session moved to, which counts it once: by the delete, which lists the charges
// of the generation it left once it moved the config, or by the charge's writer, which reads the
// config after its put; both at once carry it once.

const user = (content: string): Item => ({ type: 'message', role: 'user', content });
const CHARGED = {
  input_tokens: 10,
  cached_input_tokens: 0,
  cache_write_tokens: 0,
  output_tokens: 1,
  reasoning_tokens: 0,
  cost_usd: 0,
};

const isCharge = (key: string) => key.includes('/-charge-');
const configGet = ({ operation, keys }: HeldCall) => operation === 'get' && keys[0] === sessionConfigKey('', 's1');
const chargePut = ({ operation, keys }: HeldCall) => operation === 'put' && isCharge(keys[0]!);
/** The delete's fence: its first put of a record (the turn's own is stored before). */
const fencePut = ({ operation, keys }: HeldCall) =>
  operation === 'put' && keys[0]!.includes('/turn/') && !isCharge(keys[0]!);

describe.each(await memoryAndFileStores('charge-delete-race'))(
  'a charge landing while the newest turn is deleted counts once: %s',
  (_, storeOf) => {
    /** Session `s1` whose turn 1 completed (100 in, 5 out), and a charge of its generation to store. */
    async function world(inner: ObjectStore) {
      const store = new HeldStore(inner);
      const log = new SessionLog(store, {});
      await log.create({ id: 's1' });
      const begun = await log.beginTurn('s1', { input: [user('a')] });
      if (begun.kind !== 'claimed') throw new Error('expected a claim');
      const usage = { ...CHARGED, input_tokens: 100, output_tokens: 5 };
      await log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {}, usage });
      const turn = { scope: await log.scope('s1') } as OpenTurn;
      const charge = () => log.storeCharge(turn, { usage: CHARGED });
      const totals = async () => {
        for (const content of ['b', 'c']) await log.append('s1', [user(content)]);
        const keys = (await inner.list('')).objects.map((object) => object.key);
        return { usage: (await log.get('s1')).usage, charges: keys.filter(isCharge) };
      };
      return { store, log, charge, totals };
    }
    const counted = { usage: { turns: 1, input_tokens: 110, output_tokens: 6 }, charges: [] };

    it('counts it at most once, whichever storage call of the delete or its writer fails', async () => {
      const LEASE_MS = 1000;
      /** The delete carrying it (put before the fence) or its writer (put after the delete), `k`th call failing. */
      async function run(writerCarries: boolean, k: number, after: boolean) {
        let now = Date.parse('2026-01-01T00:00:00Z');
        const faulty = new FaultyStore(storeOf());
        const store = new HeldStore(faulty);
        const log = new SessionLog(store, { clock: () => new Date(now), leaseMs: LEASE_MS });
        await log.create({ id: 's1' });
        const begun = await log.beginTurn('s1', { input: [user('a')] });
        if (begun.kind !== 'claimed') throw new Error('expected a claim');
        const usage = { ...CHARGED, input_tokens: 100, output_tokens: 5 };
        await log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {}, usage });
        const turn = { scope: await log.scope('s1') } as OpenTurn;
        let calls = 0;
        const arm = () => faulty.failWhen(() => ++calls === k, { after, times: 1 });
        if (writerCarries) {
          const put = store.hold(chargePut);
          const stored = log.storeCharge(turn, { usage: CHARGED }).catch(() => false);
          await put.reached;
          arm();
          await log.deleteTurn('s1', 1).catch(() => undefined);
          put.release();
          await stored;
        } else {
          const fence = store.hold(fencePut);
          const deleted = log.deleteTurn('s1', 1).catch(() => undefined);
          await fence.reached;
          expect(await log.storeCharge(turn, { usage: CHARGED })).toBe(true);
          arm();
          fence.release();
          await deleted;
        }
        faulty.heal();
        for (const content of ['b', 'c']) {
          now += 3 * LEASE_MS;
          await log.append('s1', [user(content)]);
        }
        return { calls, usage: (await log.get('s1')).usage };
      }
      for (const writerCarries of [false, true]) {
        const { calls, usage } = await run(writerCarries, 0, false);
        expect(usage).toMatchObject({ input_tokens: 110, output_tokens: 6 });
        for (let k = 1; k <= calls; k++)
          for (const after of [false, true]) {
            const { usage } = await run(writerCarries, k, after);
            expect([100, 110], `${writerCarries ? 'writer' : 'delete'}, call ${k} ${after}`).toContain(
              usage.input_tokens,
            );
          }
      }
    });

    it('put after the head read, before the fence: the delete carries it', async () => {
      const w = await world(storeOf());
      const fence = w.store.hold(fencePut);
      const deleted = w.log.deleteTurn('s1', 1);
      await fence.reached;
      expect(await w.charge()).toBe(true);
      fence.release();
      await deleted;
      expect(await w.totals()).toMatchObject(counted);
    });

    it('put after the delete moved the config: its writer carries it', async () => {
      const w = await world(storeOf());
      const put = w.store.hold(chargePut);
      const stored = w.charge();
      await put.reached;
      await w.log.deleteTurn('s1', 1);
      put.release();
      expect(await stored).toBe(true);
      expect(await w.totals()).toMatchObject(counted);
    });

    it("put before the fence, its writer's config read after the delete: both carry it, once", async () => {
      const w = await world(storeOf());
      const fence = w.store.hold(fencePut);
      const deleted = w.log.deleteTurn('s1', 1);
      await fence.reached;
      const read = w.store.hold(configGet);
      const stored = w.charge();
      await read.reached;
      fence.release();
      await deleted;
      read.release();
      expect(await stored).toBe(true);
      expect(await w.totals()).toMatchObject(counted);
    });

    it('its writer carrying it when the delete lists it: the delete leaves it to the writer', async () => {
      const w = await world(storeOf());
      const fence = w.store.hold(fencePut);
      const deleted = w.log.deleteTurn('s1', 1);
      await fence.reached;
      const listed = w.store.hold(({ operation, keys }) => operation === 'list' && isCharge(keys[0]!));
      const read = w.store.hold(configGet);
      const stored = w.charge();
      await read.reached;
      fence.release();
      await listed.reached;
      // The writer's marker landed; its get of the charge waits while the delete lists both.
      const got = w.store.hold(({ operation, keys }) => operation === 'get' && isCharge(keys[0]!));
      read.release();
      await got.reached;
      listed.release();
      await deleted;
      got.release();
      expect(await stored).toBe(true);
      expect(await w.totals()).toMatchObject(counted);
    });
  },
);

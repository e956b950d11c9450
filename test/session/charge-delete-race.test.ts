import { describe, expect, it } from 'vitest';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import type { SessionLogOptions } from '../../lib/session/session-log.ts';
import {
  CHARGED,
  chargeableSession,
  chargeList,
  chargePut,
  configGet,
  fencePut,
  isCharge,
  totalsAfterTwoWrites,
  user,
} from '../support/charges.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { HeldStore } from '../support/held-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { SessionLog } from '../support/session-log.ts';

// A charge (lib/session/log/charges.ts) put under the generation a delete of the newest turn is
// leaving, after that delete read its head (so its fence does not count it), is carried to the
// generation the session moved to, which counts it once: by the delete, which lists the charges
// of the generation it left once it moved the config, or by the charge's writer, which reads the
// config after its put; both at once carry it once.

describe.each(await memoryAndFileStores('charge-delete-race'))(
  'a charge landing while the newest turn is deleted counts once: %s',
  (_, storeOf) => {
    /** Session `s1` whose turn 1 completed (100 in, 5 out), and a charge of its generation to store. */
    async function world(inner: ObjectStore, options: Partial<SessionLogOptions> = {}) {
      const store = new HeldStore(inner);
      const log = new SessionLog(store, options);
      const turn = await chargeableSession(log);
      const charge = () => log.storeCharge(turn, { usage: CHARGED });
      const totals = async () => {
        const usage = await totalsAfterTwoWrites(log);
        const keys = (await inner.list('')).objects.map((object) => object.key);
        return { usage, charges: keys.filter(isCharge) };
      };
      /** Holds the delete of turn 1 at its fence: `deleted` once released, with `caught` its failure caught. */
      const fenced = async (caught = false) => {
        const fence = store.hold(fencePut);
        const deleting = log.deleteTurn('s1', 1);
        const deleted = caught ? deleting.catch(() => undefined) : deleting;
        await fence.reached;
        return { fence, deleted };
      };
      return { store, log, charge, totals, fenced };
    }
    const counted = { usage: { turns: 1, input_tokens: 110, output_tokens: 6 }, charges: [] };

    it('counts it at most once, whichever storage call of the delete or its writer fails', async () => {
      const LEASE_MS = 1000;
      /** The delete carrying it (put before the fence) or its writer (put after the delete), `k`th call failing. */
      async function run(writerCarries: boolean, k: number, after: boolean) {
        let now = Date.parse('2026-01-01T00:00:00Z');
        const faulty = new FaultyStore(storeOf());
        const { store, log, charge, fenced } = await world(faulty, {
          clock: () => new Date(now),
          leaseMs: LEASE_MS,
        });
        let calls = 0;
        const arm = () => faulty.failWhen(() => ++calls === k, { after, times: 1 });
        if (writerCarries) {
          const put = store.hold(chargePut);
          const stored = charge().catch(() => false);
          await put.reached;
          arm();
          await log.deleteTurn('s1', 1).catch(() => undefined);
          put.release();
          await stored;
        } else {
          const { fence, deleted } = await fenced(true);
          expect(await charge()).toBe(true);
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
      const { fence, deleted } = await w.fenced();
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
      const { fence, deleted } = await w.fenced();
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
      const { fence, deleted } = await w.fenced();
      const listed = w.store.hold(chargeList);
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

    it("put after the head read, the delete's listing failing once: it lists again, carrying it", async () => {
      const faulty = new FaultyStore(storeOf());
      const w = await world(faulty);
      const { fence, deleted } = await w.fenced();
      expect(await w.charge()).toBe(true);
      faulty.failWhen(({ operation, key }) => operation === 'list' && isCharge(key), { times: 1 });
      fence.release();
      await deleted;
      expect(await w.totals()).toMatchObject(counted);
    });
  },
);

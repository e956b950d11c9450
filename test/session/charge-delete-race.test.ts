import { describe, expect, it } from 'vitest';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import {
  appendsLeasesApart,
  COUNTED,
  chargeList,
  chargePut,
  configGet,
  heldSession,
  isCharge,
  leaseClock,
  totalsAfterTwoWrites,
} from '../support/charges.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import type { SessionLog } from '../support/session-log.ts';

// A charge (lib/session/log/charges.ts) put under the generation a delete of the newest turn is
// leaving, after that delete read its head (so its fence does not count it), is carried to the
// generation the session moved to, which counts it once: by the delete, which lists the charges
// of the generation it left once it moved the config, or by the charge's writer, which reads the
// config after its put; both at once carry it once.

describe.each(await memoryAndFileStores('charge-delete-race'))(
  'a charge landing while the newest turn is deleted counts once: %s',
  (_, storeOf) => {
    /** Session `s1`'s totals once two writes counted the charges that waited, and the charges left. */
    async function totals(log: SessionLog, inner: ObjectStore) {
      const usage = await totalsAfterTwoWrites(log);
      const keys = (await inner.list('')).objects.map((object) => object.key);
      return { usage, charges: keys.filter(isCharge) };
    }
    const counted = { usage: COUNTED, charges: [] };

    it('counts it at most once, whichever storage call of the delete or its writer fails', async () => {
      const LEASE_MS = 1000;
      /** The delete carrying it (put before the fence) or its writer (put after the delete), `k`th call failing. */
      async function run(writerCarries: boolean, k: number, after: boolean) {
        const clock = leaseClock(LEASE_MS);
        const { faulty, store, log, charge, fenced } = await heldSession(storeOf(), { log: clock.options });
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
        await appendsLeasesApart(log, ['b', 'c'], clock);
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
      const inner = storeOf();
      const w = await heldSession(inner);
      const { fence, deleted } = await w.fenced();
      expect(await w.charge()).toBe(true);
      fence.release();
      await deleted;
      expect(await totals(w.log, inner)).toMatchObject(counted);
    });

    it('put after the delete moved the config: its writer carries it', async () => {
      const inner = storeOf();
      const w = await heldSession(inner);
      const put = w.store.hold(chargePut);
      const stored = w.charge();
      await put.reached;
      await w.log.deleteTurn('s1', 1);
      put.release();
      expect(await stored).toBe(true);
      expect(await totals(w.log, inner)).toMatchObject(counted);
    });

    it("put before the fence, its writer's config read after the delete: both carry it, once", async () => {
      const inner = storeOf();
      const w = await heldSession(inner);
      const { fence, deleted } = await w.fenced();
      const read = w.store.hold(configGet);
      const stored = w.charge();
      await read.reached;
      fence.release();
      await deleted;
      read.release();
      expect(await stored).toBe(true);
      expect(await totals(w.log, inner)).toMatchObject(counted);
    });

    it('its writer carrying it when the delete lists it: the delete leaves it to the writer', async () => {
      const inner = storeOf();
      const w = await heldSession(inner);
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
      expect(await totals(w.log, inner)).toMatchObject(counted);
    });

    it("put after the head read, the delete's listing failing once: it lists again, carrying it", async () => {
      const inner = storeOf();
      const w = await heldSession(inner);
      const { fence, deleted } = await w.fenced();
      expect(await w.charge()).toBe(true);
      w.faulty.failWhen(({ operation, key }) => operation === 'list' && isCharge(key), { times: 1 });
      fence.release();
      await deleted;
      expect(await totals(w.log, inner)).toMatchObject(counted);
    });
  },
);

import { describe, expect, it } from 'vitest';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import {
  appendsLeasesApart,
  CHARGED,
  COUNTED,
  chargeableSession,
  chargeList,
  configGet,
  dieAt,
  fencedDelete,
  fencePut,
  forEachDeath,
  leaseClock,
  owedByDelete,
  totalsAfterTwoWrites,
} from '../support/charges.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { HeldStore } from '../support/held-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { SessionLog } from '../support/session-log.ts';

// A delete of the newest turn that moved the config owes the charges of the generation it left
// that no write counted (put after its head read, their writers reading the config before it
// moved): the config it writes names that generation (`carry_from`), so whichever write reads it
// next carries them (lib/session/log/owed-charges.ts), when the delete stopped before it did.

const LEASE_MS = 1000;

describe.each(await memoryAndFileStores('charge-owed'))(
  'charges a delete of the newest turn owes: %s',
  (_, storeOf) => {
    it('are counted by the next writes when its process stops listing them', async () => {
      const { faulty, log } = await owedByDelete(storeOf());
      expect(await totalsAfterTwoWrites(log)).toMatchObject(COUNTED);
      expect(
        JSON.parse(new TextDecoder().decode((await faulty.get(sessionConfigKey('', 's1')))!.body)),
      ).not.toHaveProperty('carry_from');
    });

    it('count once whichever storage call of the delete its process dies at', async () => {
      /** The delete dying at its `k`th call from the charge's put on (that call landed or not); its calls. */
      async function run(k: number, after: boolean) {
        const clock = leaseClock(LEASE_MS);
        const { faulty, charge, fence, deleted } = await fencedDelete(storeOf(), { log: clock.options, caught: true });
        expect(await charge()).toBe(true);
        const calls = dieAt(faulty, k, after);
        fence.release();
        await deleted;
        // What the dead process left in the background fails too; a new process writes on.
        faulty.heal();
        const next = new SessionLog(faulty, clock.options);
        await appendsLeasesApart(next, ['b', 'c', 'd'], clock);
        return { calls: calls.length, usage: (await next.get('s1')).usage };
      }
      const { calls } = await run(0, false);
      expect(calls).toBeGreaterThan(5);
      await forEachDeath(calls, async (k, after, label) => {
        expect((await run(k, after)).usage, label).toMatchObject(COUNTED);
      });
    });

    it("count once whichever storage call of its writer's carry its process dies at", async () => {
      /** Its writer, reading the config once the delete moved it, dying at its `k`th call from then on. */
      async function run(k: number, after: boolean) {
        const clock = leaseClock(LEASE_MS);
        const store = new HeldStore(storeOf());
        const log = new SessionLog(store, clock.options);
        const writerStore = new FaultyStore(store);
        const writer = new SessionLog(writerStore, clock.options);
        const turn = await chargeableSession(log);
        const fence = store.hold(fencePut);
        const deleted = log.deleteTurn('s1', 1);
        await fence.reached;
        const read = store.hold(configGet);
        const stored = writer.storeCharge(turn, { usage: CHARGED }).catch(() => false);
        await read.reached;
        // The delete's listing waits until the writer's carry ran (its marker first) or died.
        const listed = store.hold(chargeList);
        fence.release();
        await listed.reached;
        const calls = dieAt(writerStore, k, after);
        read.release();
        await stored;
        listed.release();
        await deleted;
        await appendsLeasesApart(log, ['b', 'c', 'd'], clock);
        return { calls: calls.length, usage: (await log.get('s1')).usage };
      }
      const { calls } = await run(0, false);
      expect(calls).toBeGreaterThan(4);
      await forEachDeath(calls, async (k, after, label) => {
        expect((await run(k, after)).usage, label).toMatchObject(COUNTED);
      });
    });

    it('count once whichever call the writer of one put after the delete dies at, once it is owed', async () => {
      /** The delete done, a charge of the generation it left stored by a writer dying at its `k`th call. */
      async function run(k: number, after: boolean) {
        const clock = leaseClock(LEASE_MS);
        const inner = storeOf();
        const log = new SessionLog(inner, clock.options);
        const writerStore = new FaultyStore(inner);
        const writer = new SessionLog(writerStore, clock.options);
        const turn = await chargeableSession(log);
        await log.deleteTurn('s1', 1);
        const calls = dieAt(writerStore, k, after);
        await writer.storeCharge(turn, { usage: CHARGED }).catch(() => false);
        await appendsLeasesApart(log, ['b', 'c', 'd'], clock);
        return { calls, usage: (await log.get('s1')).usage };
      }
      const { calls } = await run(0, false);
      // Its config put names the generation in `carry_from`: from then on the charge is owed.
      const owed = calls.indexOf(`put ${sessionConfigKey('', 's1')}`) + 1;
      expect(owed).toBeGreaterThan(1);
      for (let k = 1; k <= calls.length; k++)
        for (const after of [false, true]) {
          const { usage } = await run(k, after);
          const label = `call ${k} of ${calls.length} (${calls[k - 1]}), ${after ? 'landed' : 'not landed'}`;
          if (k > owed || (k === owed && after)) expect(usage.input_tokens, label).toBe(110);
          else expect([100, 110], label).toContain(usage.input_tokens);
          expect(usage.output_tokens, label).toBe(usage.input_tokens === 110 ? 6 : 5);
        }
    });
  },
);

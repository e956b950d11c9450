import { describe, expect, it } from 'vitest';
import { CHARGED, chargeableSession, fencePut, isCharge, user } from '../support/charges.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { HeldStore } from '../support/held-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { SessionLog } from '../support/session-log.ts';

// A charge a delete of the newest turn left owed (`carry_from`) is carried by the next write
// (lib/session/log/owed-charges.ts), after that write read the session: the session's row counts
// it once that write is done, as a read of the session does.

describe.each(await memoryAndFileStores('charge-owed-row'))('a charge carried by the next write: %s', (_, storeOf) => {
  it("is in the session's row after an append carried it", async () => {
    const faulty = new FaultyStore(storeOf());
    const store = new HeldStore(faulty);
    const log = new SessionLog(store, {});
    const turn = await chargeableSession(log);
    const fence = store.hold(fencePut);
    const deleted = log.deleteTurn('s1', 1);
    await fence.reached;
    expect(await log.storeCharge(turn, { usage: CHARGED })).toBe(true);
    // Its listings of charges fail, as a process that died once it moved the config.
    faulty.failWhen(({ operation, key }) => operation === 'list' && isCharge(key));
    fence.release();
    await deleted;
    faulty.heal();
    // An append and its row, from the state it wrote (lib/turn/append.ts).
    const { indexed } = await log.append('s1', [user('b')]);
    await log.refreshIndex('s1', indexed);
    const { usage } = await log.get('s1');
    expect(usage).toMatchObject({ input_tokens: 110, output_tokens: 6 });
    const [row] = (await log.listSessions({ limit: 10 })).sessions;
    expect(row?.usage).toEqual(usage);
  });

  it("is in the session's row after an append carried it and failed to delete its marker", async () => {
    const faulty = new FaultyStore(storeOf());
    const store = new HeldStore(faulty);
    const log = new SessionLog(store, {});
    const turn = await chargeableSession(log);
    const fence = store.hold(fencePut);
    const deleted = log.deleteTurn('s1', 1);
    await fence.reached;
    expect(await log.storeCharge(turn, { usage: CHARGED })).toBe(true);
    faulty.failWhen(({ operation, key }) => operation === 'list' && isCharge(key));
    fence.release();
    await deleted;
    faulty.heal();
    const before = faulty.injected;
    // The append's carry puts the charge under the session's generation, then fails to delete
    // its marker (its last step): the charge is there all the same, and the append counts it.
    faulty.failWhen(({ operation, key }) => operation === 'delete' && key.endsWith('.carried'), { times: 1 });
    const { indexed } = await log.append('s1', [user('b')]);
    await log.refreshIndex('s1', indexed);
    expect(faulty.injected - before).toBe(1);
    const { usage } = await log.get('s1');
    expect(usage).toMatchObject({ input_tokens: 110, output_tokens: 6 });
    const [row] = (await log.listSessions({ limit: 10 })).sessions;
    expect(row?.usage).toEqual(usage);
  });
});

describe.each(await memoryAndFileStores('charge-carried-row'))(
  'a charge carried by a delete of the newest turn: %s',
  (_, storeOf) => {
    it("is in the session's row when the delete failed to delete its marker after carrying it", async () => {
      const faulty = new FaultyStore(storeOf());
      const store = new HeldStore(faulty);
      const log = new SessionLog(store, {});
      const turn = await chargeableSession(log);
      const fence = store.hold(fencePut);
      const deleted = log.deleteTurn('s1', 1);
      await fence.reached;
      expect(await log.storeCharge(turn, { usage: CHARGED })).toBe(true);
      // The carry's last step fails: the charge is under the generation the config names all the same.
      faulty.failWhen(({ operation, key }) => operation === 'delete' && key.endsWith('.carried'), { times: 1 });
      fence.release();
      await deleted;
      expect(faulty.injected).toBe(1);
      const { usage } = await log.get('s1');
      // The deleted turn's spend stays counted, and the charge with it.
      expect(usage).toMatchObject({ input_tokens: 110, output_tokens: 6 });
      const [row] = (await log.listSessions({ limit: 10 })).sessions;
      expect(row?.usage).toEqual(usage);
    });
  },
);

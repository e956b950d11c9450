import { describe, expect, it } from 'vitest';
import { fencedDelete, owedByDelete, user, usageAndRow } from '../support/charges.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import type { SessionLog } from '../support/session-log.ts';

// A charge a delete of the newest turn left owed (`carry_from`) is carried by the next write
// (lib/session/log/owed-charges.ts), after that write read the session: the session's row counts
// it once that write is done, as a read of the session does.

/** An append and its row, from the state it wrote (lib/turn/append.ts). */
async function appendAndIndex(log: SessionLog) {
  const { indexed } = await log.append('s1', [user('b')]);
  await log.refreshIndex('s1', indexed);
}

/** The session's totals count the deleted turn's spend and the charge, and its row says the same. */
async function expectCountedInRow(log: SessionLog) {
  const { usage, row } = await usageAndRow(log);
  expect(usage).toMatchObject({ input_tokens: 110, output_tokens: 6 });
  expect(row).toEqual(usage);
}

describe.each(await memoryAndFileStores('charge-owed-row'))('a charge carried by the next write: %s', (_, storeOf) => {
  it("is in the session's row after an append carried it", async () => {
    const { log } = await owedByDelete(storeOf());
    await appendAndIndex(log);
    await expectCountedInRow(log);
  });

  it("is in the session's row after an append carried it and failed to delete its marker", async () => {
    const { faulty, log } = await owedByDelete(storeOf());
    const before = faulty.injected;
    // The append's carry puts the charge under the session's generation, then fails to delete
    // its marker (its last step): the charge is there all the same, and the append counts it.
    faulty.failWhen(({ operation, key }) => operation === 'delete' && key.endsWith('.carried'), { times: 1 });
    await appendAndIndex(log);
    expect(faulty.injected - before).toBe(1);
    await expectCountedInRow(log);
  });
});

describe.each(await memoryAndFileStores('charge-carried-row'))(
  'a charge carried by a delete of the newest turn: %s',
  (_, storeOf) => {
    it("is in the session's row when the delete failed to delete its marker after carrying it", async () => {
      const { faulty, log, charge, fence, deleted } = await fencedDelete(storeOf());
      expect(await charge()).toBe(true);
      // The carry's last step fails: the charge is under the generation the config names all the same.
      faulty.failWhen(({ operation, key }) => operation === 'delete' && key.endsWith('.carried'), { times: 1 });
      fence.release();
      await deleted;
      expect(faulty.injected).toBe(1);
      // The deleted turn's spend stays counted, and the charge with it.
      await expectCountedInRow(log);
    });
  },
);

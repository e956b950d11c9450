import { describe, expect, it } from 'vitest';
import { Inbox } from '../../lib/inbox/inbox.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { importLines, type TransferServices } from '../../lib/transfer.ts';
import { exportText, inOneChunk } from '../support/export-lines.ts';
import { CHARGED, completedTurn, isCharge, user } from '../support/charges.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { SessionLog } from '../support/session-log.ts';

// An export's `ledger` counts the charges (lib/session/log/charges.ts) no write counted yet, as a
// read of the session shows them, so an import goes on from the same totals.

function world() {
  const store = new FaultyStore(new MemoryStore());
  const sessions = new SessionLog(store, {});
  const inbox = new Inbox(store, { sessionExists: sessionExistsIn(store, '') });
  const services: TransferServices = { sessions, inbox, env: {} };
  return { store, sessions, services };
}

const LIMITS = { maxItemBytes: 2048, maxNoticeBytes: 1024, maxLineBytes: 8192 };

/** Session `s1`: turn 1 completed (100 in, 5 out), then `charges` charges of 10 in, 1 out no write counted. */
async function charged(charges: number) {
  const w = world();
  await w.sessions.create({ id: 's1' });
  const turn = await completedTurn(w.sessions, 'a');
  for (let charge = 0; charge < charges; charge++)
    expect(await w.sessions.storeCharge(turn, { usage: CHARGED })).toBe(true);
  return w;
}

describe('an export of a session with charges no write counted yet', () => {
  it.each([1, 20])('carries %i of them in its ledger, which an import goes on from', async (charges) => {
    const w = await charged(charges);
    const shown = (await w.sessions.get('s1')).usage;
    const text = await exportText(w.services, 's1');
    const totals = { turns: 1, input_tokens: 100 + 10 * charges, output_tokens: 5 + charges };
    expect(JSON.parse(text.split('\n')[0]!).ledger).toMatchObject(totals);
    if (charges <= 16) expect(shown).toMatchObject(totals);

    const copy = world();
    await importLines(copy.services, inOneChunk(text.replace('"id":"s1"', '"id":"s2"')), LIMITS);
    expect((await copy.sessions.get('s2')).usage).toMatchObject(totals);
    expect(await exportText(copy.services, 's2')).toBe(text.replace('"id":"s1"', '"id":"s2"'));
    // The source's next write counts them once, as the export did.
    await w.sessions.append('s1', [user('b')]);
    await w.sessions.append('s1', [user('c')]);
    expect((await w.sessions.get('s1')).usage).toMatchObject(totals);
  });

  it("is refused when a charge's get fails, before any line (its ledger would leave the charge out)", async () => {
    const w = await charged(2);
    w.store.failWhen(({ operation, key }) => operation === 'get' && isCharge(key), { times: 1 });
    await expect(exportText(w.services, 's1')).rejects.toThrow();
    expect(JSON.parse((await exportText(w.services, 's1')).split('\n')[0]!).ledger).toMatchObject({
      input_tokens: 120,
      output_tokens: 7,
    });
  });
});

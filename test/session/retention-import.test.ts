import { describe, expect, it } from 'vitest';
import { Inbox } from '../../lib/inbox/inbox.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { indexPrefix, parseIndexKey } from '../../lib/session/log/session-index.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { importLines, type TransferServices } from '../../lib/transfer.ts';
import { exportText, headerLine, inOneChunk, messageLine } from '../support/export-lines.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { HeldStore } from '../support/held-store.ts';
import { SessionLog } from '../support/session-log.ts';

/**
 * The retention sweep meeting an expired index entry whose session is gone (a delete stopped
 * after its config went, before its marker) while an import of the id is before its config:
 * it cleans up what the delete left and none of what the import wrote.
 */

const DAY = 86_400_000;
const START = Date.parse('2026-03-01T00:00:00.000Z');
const LIMITS = { maxItemBytes: 2048, maxNoticeBytes: 1024, maxLineBytes: 8192 };
const ID = 'again';

function world(store: ObjectStore, days: number) {
  const clock = () => new Date(START + days * DAY);
  const sessions = new SessionLog(store, { clock, sessionTtlDays: 1 });
  const inbox = new Inbox(store, { sessionExists: sessionExistsIn(store, ''), clock });
  const services: TransferServices = { sessions, inbox, env: {} };
  return { sessions, services };
}

async function keys(store: ObjectStore, prefix: string): Promise<string[]> {
  return (await store.list(prefix, { limit: 1000 })).objects.map((object) => object.key);
}

/**
 * Session ID created at START, then deleted at day 0.5 by a delete that stopped after deleting
 * its config (its marker's put failed, so it swept nothing), and its index entry put again past
 * the delete (a background writer's). Returns the keys the delete left under the session.
 */
async function interruptedDelete(memory: MemoryStore): Promise<{ left: string[]; entry: string }> {
  const w = world(memory, 0);
  await w.sessions.create({ id: ID });
  await w.sessions.append(ID, [{ type: 'message', role: 'user', content: 'old' }]);
  await w.sessions.refreshIndex(ID);
  const [entry] = (await keys(memory, indexPrefix(''))).filter((key) => parseIndexKey('', key) !== null);
  const faulty = new FaultyStore(memory).failWhen(
    ({ operation, key }) => operation === 'put' && key.startsWith(indexPrefix('')) && key.includes('/-'),
  );
  await expect(world(faulty, 0.5).sessions.delete(ID)).rejects.toMatchObject({ code: 'storage_error' });
  await memory.put(entry!, new Uint8Array());
  const left = await keys(memory, `sessions/${ID}/`);
  expect(left.some((key) => key.includes('/turn/'))).toBe(true);
  expect(left.some((key) => key.endsWith('/session.json'))).toBe(false);
  return { left, entry: entry! };
}

describe('the retention sweep of an expired entry whose session is gone', () => {
  it('deletes what an interrupted delete left, and nothing of an import of the id in flight', async () => {
    const memory = new MemoryStore();
    const { left, entry } = await interruptedDelete(memory);
    // An import of the id at day 2, held at its pending object: its log is written, its config not yet.
    const held = new HeldStore(memory);
    const hold = held.hold(({ operation, keys }) => operation === 'put' && keys[0]!.endsWith('/pending'));
    const exported = `${[headerLine(ID), messageLine(1), messageLine(2)].join('\n')}\n`;
    const importing = importLines(world(held, 2).services, inOneChunk(exported), LIMITS);
    await hold.reached;
    const written = (await keys(memory, `sessions/${ID}/`)).filter((key) => !left.includes(key));
    expect(written.length).toBeGreaterThan(0);

    const sweep = await world(memory, 2).sessions.sweepExpired();
    expect(sweep).toMatchObject({ deleted: [], failed: [], orphans: 1 });
    expect(await keys(memory, entry)).toEqual([]);
    // What the delete left is gone; what the import wrote is all there.
    expect((await keys(memory, `sessions/${ID}/`)).sort()).toEqual(written.sort());
    hold.release();

    await importing;
    expect(await exportText(world(memory, 2).services, ID)).toBe(exported);
  });
});

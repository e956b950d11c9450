import { describe, expect, it } from 'vitest';
import { turnUsage } from '../../lib/ledger/usage.ts';
import { IMPORTED_IN_META } from '../../lib/session/export-format.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore, StoredObject } from '../../lib/store/object-store.ts';
import { importLines } from '../../lib/transfer.ts';
import { exportText, headerLine, inOneChunk, messageLine, NOTICE } from '../support/export-lines.ts';
import { HeldStore } from '../support/held-store.ts';
import { transferWorld } from '../support/transfer-world.ts';

/**
 * An import meeting, at a name of its notices, the delivery record another import wrote (whose
 * session is gone) writes over it only while the config is of its own incarnation, as the config's
 * fields say: its generation, or the incarnation a delete of its newest turn moved it on with. A
 * config that merely carries the import's generation elsewhere (a session created under the id
 * since, naming it in its metadata) is another session's: the record is left to it.
 */

const LIMITS = { maxItemBytes: 2048, maxNoticeBytes: 1024, maxLineBytes: 8192 };
const ID = 'over';
const RECORD = `sessions/${ID}/inbox_removed/note`;

const world = (store: ObjectStore) => transferWorld(store);

const EXPORTED = `${[headerLine(ID), messageLine(1), messageLine(2), NOTICE].join('\n')}\n`;

/** The delivery record another import of the same export wrote (its own generation in `imported-in`). */
async function anotherImportsRecord(): Promise<StoredObject> {
  const other = new MemoryStore();
  await importLines(world(other).services, inOneChunk(EXPORTED), LIMITS);
  return (await other.get(RECORD))!;
}

/** The import of EXPORTED, held at its delivery record's create-only put (its config exists), and its generation. */
async function importHeldAtItsRecord(memory: MemoryStore) {
  const held = new HeldStore(memory);
  const hold = held.hold(
    ({ operation, keys, options }) => operation === 'put' && keys[0] === RECORD && options?.onlyIfAbsent === true,
  );
  const running = importLines(world(held).services, inOneChunk(EXPORTED), LIMITS);
  running.catch(() => undefined);
  await hold.reached;
  const config = await memory.get(`sessions/${ID}/session.json`);
  const { generation } = JSON.parse(new TextDecoder().decode(config!.body)) as { generation: string };
  return { running, hold, generation };
}

async function putLeft(memory: MemoryStore, record: StoredObject): Promise<void> {
  await memory.put(RECORD, record.body, { contentType: 'text/plain; charset=utf-8', metadata: record.metadata });
}

describe('an import meeting the delivery record another import left', () => {
  it('leaves it under a session created since, its config carrying the generation in its metadata', async () => {
    const memory = new MemoryStore();
    const left = await anotherImportsRecord();
    const { running, hold, generation } = await importHeldAtItsRecord(memory);
    // A client deletes the import's session and creates the id again, naming that generation.
    const client = world(memory);
    await client.sessions.delete(ID);
    await client.sessions.create({ id: ID, metadata: { generation } });
    await putLeft(memory, left);
    hold.release();

    await expect(running).rejects.toMatchObject({ code: 'not_found' });
    const kept = await memory.get(RECORD);
    expect(kept?.metadata[IMPORTED_IN_META]).toBe(left.metadata[IMPORTED_IN_META]);
    expect(kept?.metadata[IMPORTED_IN_META]).not.toBe(generation);
  });

  it('writes over it under its session moved by a delete of its newest turn, and is whole', async () => {
    const memory = new MemoryStore();
    const left = await anotherImportsRecord();
    const { running, hold, generation } = await importHeldAtItsRecord(memory);
    // One client takes a turn on the session, another deletes it: another generation of its incarnation.
    const client = world(memory);
    const begun = await client.sessions.beginTurn(ID, { input: [{ type: 'message', role: 'user', content: 'go' }] });
    if (begun.kind !== 'claimed') throw new Error(`turn not claimed: ${begun.kind}`);
    const usage = turnUsage({ input_tokens: 10, output_tokens: 5 }, { input: 1, cached_input: 0.5, output: 4 });
    await client.sessions.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {}, usage });
    await client.sessions.deleteTurn(ID, 1);
    const moved = JSON.parse(new TextDecoder().decode((await memory.get(`sessions/${ID}/session.json`))!.body));
    expect(moved).toMatchObject({ incarnation: generation });
    expect(moved.generation).not.toBe(generation);
    await putLeft(memory, left);
    hold.release();

    await expect(running).resolves.toMatchObject({ id: ID, counts: { items: 2 } });
    expect((await memory.get(RECORD))?.metadata[IMPORTED_IN_META]).toBe(generation);
    expect((await exportText(world(memory).services, ID)).split('\n').slice(1)).toEqual(EXPORTED.split('\n').slice(1));
  });
});

describe('an import whose config’s create is refused', () => {
  it('is 409 when the config there carries its generation only in its metadata: another session’s', async () => {
    const memory = new MemoryStore();
    const held = new HeldStore(memory);
    const atConfig = held.hold(
      ({ operation, keys, options }) =>
        operation === 'put' && keys[0] === `sessions/${ID}/session.json` && options?.onlyIfAbsent === true,
    );
    const running = importLines(world(held).services, inOneChunk(EXPORTED), LIMITS);
    running.catch(() => undefined);
    await atConfig.reached;
    const marks = await memory.list(`sessions/${ID}/import/`, { limit: 10 });
    const generation = marks.objects.map((object) => object.key.split('/')[3]).find((level) => level)!;
    expect(generation).toMatch(/^g\d{13}[0-9a-f]{8}$/);
    // A client creates the id meanwhile, naming that generation in its metadata.
    const client = world(memory);
    await client.sessions.create({ id: ID, metadata: { generation } });
    atConfig.release();

    await expect(running).rejects.toMatchObject({ code: 'session_exists' });
    await expect(client.sessions.get(ID)).resolves.toMatchObject({ metadata: { generation } });
    expect(await client.inbox.listDelivered(ID)).toEqual([]);
    expect((await memory.list(`sessions/${ID}/import/`, { limit: 10 })).objects).toEqual([]);
  });
});

import { describe, expect, it } from 'vitest';
import { turnUsage } from '../../lib/ledger/usage.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { importLines } from '../../lib/transfer.ts';
import { exportText, headerLine, messageLine } from '../support/export-lines.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { HeldStore } from '../support/held-store.ts';
import { transferWorld } from '../support/transfer-world.ts';

/**
 * An import stopped after its config (the process gone at its first delivered-notice record),
 * then written to, or raced, before the same export is sent again: the retry finishes only a
 * session nothing has written to since, and writes no delivery record over one it did not write
 * nor into a session deleted meanwhile.
 */

const LIMITS = { maxItemBytes: 2048, maxNoticeBytes: 1024, maxLineBytes: 8192 };
const ID = 'raced';

const world = (store: ObjectStore) => transferWorld(store);

async function* bytes(text: string): AsyncGenerator<Uint8Array> {
  yield new TextEncoder().encode(text);
}

function noticeLine(storedAs: string, content: string): string {
  return JSON.stringify({
    type: 'notice',
    stored_as: storedAs,
    name: storedAs,
    posted_at: '2026-01-01T00:00:01.000Z',
    delivered_at: '2026-01-01T00:00:02.000Z',
    turn: 1,
    content,
  });
}

const LINES = [headerLine(ID), messageLine(1), messageLine(2), noticeLine('note', 'imported note')];
const EXPORTED = `${LINES.join('\n')}\n`;

async function keysUnder(store: ObjectStore, part: string): Promise<string[]> {
  const page = await store.list(`sessions/${ID}/`, { limit: 1000 });
  return page.objects.map((object) => object.key).filter((key) => key.includes(part));
}

/** The import stopped at its first delivered-notice record: the session exists, its pending object too. */
async function stoppedImport(memory: MemoryStore): Promise<void> {
  let stopped = false;
  const faulty = new FaultyStore(memory).failWhen(({ operation, key }) => {
    stopped ||= operation === 'put' && key.includes('/inbox_removed/');
    return stopped;
  });
  await expect(importLines(world(faulty).services, bytes(EXPORTED), LIMITS)).rejects.toMatchObject({
    code: 'storage_error',
  });
  expect(await keysUnder(memory, '/pending')).toHaveLength(1);
}

/** The export imported over `store`, held at its first delivered-notice record's put. */
async function importHeldAtItsRecord(store: ObjectStore) {
  const held = new HeldStore(store);
  const hold = held.hold(({ operation, keys }) => operation === 'put' && keys[0]!.includes('/inbox_removed/'));
  const running = importLines(world(held).services, bytes(EXPORTED), LIMITS);
  running.catch(() => undefined);
  await hold.reached;
  return { running, hold };
}

describe('an import stopped after its config, the same export sent again', () => {
  it('is 409 session_exists once a PATCH wrote the session, the PATCH kept and the pending object gone', async () => {
    const memory = new MemoryStore();
    await stoppedImport(memory);
    const w = world(memory);
    await w.sessions.update(ID, { metadata: { patched: 'yes' } });
    const before = await exportText(w.services, ID);

    await expect(importLines(w.services, bytes(EXPORTED), LIMITS)).rejects.toMatchObject({
      code: 'session_exists',
      details: { id: ID },
    });
    expect(await exportText(w.services, ID)).toBe(before);
    expect(before).toContain('"patched":"yes"');
    expect(await keysUnder(memory, '/inbox_removed/')).toEqual([]);
    expect(await keysUnder(memory, '/import/')).toEqual([]);
  });

  it('writes no delivery record over one delivered meanwhile under its name, and is 409 session_exists', async () => {
    const memory = new MemoryStore();
    await stoppedImport(memory);
    const { running: retry, hold } = await importHeldAtItsRecord(memory);
    // Another actor posts a notice of the same name and a turn's consume delivers it, before the put lands.
    const other = world(memory);
    await other.inbox.post(ID, { name: 'note', content: 'delivered live' });
    expect((await other.inbox.consume(ID, { turn: 1 })).delivered.map((notice) => notice.name)).toEqual(['note']);
    hold.release();

    await expect(retry).rejects.toMatchObject({ code: 'session_exists', details: { id: ID } });
    expect(await keysUnder(memory, '/inbox_removed/')).toEqual([`sessions/${ID}/inbox_removed/note`]);
    const kept = await memory.get(`sessions/${ID}/inbox_removed/note`);
    expect(new TextDecoder().decode(kept!.body)).toBe('delivered live');
    expect(await keysUnder(memory, '/import/')).toEqual([]);
  });

  it('writes no delivery record into a session deleted meanwhile: the id is free, and imports again', async () => {
    const memory = new MemoryStore();
    await stoppedImport(memory);
    const { running: retry, hold } = await importHeldAtItsRecord(memory);
    const other = world(memory);
    await other.sessions.delete(ID);
    expect(await keysUnder(memory, '/')).toEqual([]);
    hold.release();

    await expect(retry).rejects.toMatchObject({ code: 'not_found', details: { id: ID } });
    expect(await keysUnder(memory, '/')).toEqual([]);
    await importLines(other.services, bytes(EXPORTED), LIMITS);
    expect(await exportText(other.services, ID)).toBe(EXPORTED);
  });

  it('finishes from a pending object written before config_sha256, checked by its record alone', async () => {
    const memory = new MemoryStore();
    await stoppedImport(memory);
    const [key] = await keysUnder(memory, '/pending');
    const { config_sha256, ...before } = JSON.parse(new TextDecoder().decode((await memory.get(key!))!.body));
    expect(config_sha256).toMatch(/^[0-9a-f]{64}$/);
    await memory.put(key!, JSON.stringify(before));
    const w = world(memory);

    await importLines(w.services, bytes(EXPORTED), LIMITS);
    expect(await exportText(w.services, ID)).toBe(EXPORTED);
    expect(await keysUnder(memory, '/import/')).toEqual([]);
  });

  it('deletes no session created under the id meanwhile when taking its delivery records out fails', async () => {
    const memory = new MemoryStore();
    // The first import itself, held at its delivery record; its taking that record out again fails.
    const faulty = new FaultyStore(memory).failWhen(
      ({ operation, key }) => operation === 'delete' && key.includes('/inbox_removed/'),
    );
    const { running: first, hold } = await importHeldAtItsRecord(faulty);
    // Another client deletes that session and creates one of its own under the id.
    const other = world(memory);
    await other.sessions.delete(ID);
    await other.sessions.create({ id: ID, metadata: { owner: 'other' } });
    hold.release();

    await expect(first).rejects.toMatchObject({ code: 'storage_error' });
    expect((await other.sessions.get(ID)).metadata).toEqual({ owner: 'other' });
  });

  it('is 409 session_exists after a delete of the newest turn, and the pending object left behind goes', async () => {
    const memory = new MemoryStore();
    const w = await rewoundAfterStop(memory);
    const before = await exportText(w.services, ID);

    await expect(importLines(w.services, bytes(EXPORTED), LIMITS)).rejects.toMatchObject({
      code: 'session_exists',
      details: { id: ID },
    });
    expect(await keysUnder(memory, '/import/')).toEqual([]);
    expect(await exportText(w.services, ID)).toBe(before);
  });

  it('leaves nothing of the pending object a delete of the newest turn left once the session is deleted', async () => {
    const memory = new MemoryStore();
    const w = await rewoundAfterStop(memory);
    await w.sessions.delete(ID);
    expect(await keysUnder(memory, '/')).toEqual([]);
  });
});

/** The import stopped after its config, then a turn, then a delete of that turn: another generation. */
async function rewoundAfterStop(memory: MemoryStore) {
  await stoppedImport(memory);
  const w = world(memory);
  const begun = await w.sessions.beginTurn(ID, { input: [{ type: 'message', role: 'user', content: 'go' }] });
  if (begun.kind !== 'claimed') throw new Error(`turn not claimed: ${begun.kind}`);
  const usage = turnUsage({ input_tokens: 10, output_tokens: 5 }, { input: 1, cached_input: 0.5, output: 4 });
  await w.sessions.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {}, usage });
  const [left] = await keysUnder(memory, '/pending');
  await w.sessions.deleteTurn(ID, 1);
  // The session moved to another generation: the pending object is under the one before it.
  expect(await keysUnder(memory, '/pending')).toEqual([left]);
  return w;
}

describe('an import that fails after its config, its session deleted meanwhile', () => {
  it('deletes nothing of another import of the id still before its config', async () => {
    const memory = new MemoryStore();
    // The first import, held at its delivery record, whose put then fails.
    const faulty = new FaultyStore(memory).failWhen(
      ({ operation, key }) => operation === 'put' && key.includes('/inbox_removed/'),
    );
    const { running: first, hold } = await importHeldAtItsRecord(faulty);
    // Another client deletes that session and imports another export under the id, held at its config.
    const other = world(memory);
    await other.sessions.delete(ID);
    const second = new HeldStore(memory);
    const atConfig = second.hold(
      ({ operation, keys, options }) =>
        operation === 'put' && keys[0]!.endsWith('/session.json') && options?.onlyIfAbsent === true,
    );
    const exported = `${[headerLine(ID), messageLine(1), messageLine(2), messageLine(3)].join('\n')}\n`;
    const importing = importLines(world(second).services, bytes(exported), LIMITS);
    await atConfig.reached;
    hold.release();
    await expect(first).rejects.toMatchObject({ code: 'storage_error' });
    atConfig.release();

    await importing;
    expect(await exportText(other.services, ID)).toBe(exported);
  });
});

describe('an import whose session was deleted and imported again from the same export meanwhile', () => {
  it('deletes none of the delivery records that import wrote under the same names', async () => {
    const memory = new MemoryStore();
    // The first import, held at its read of the config after its delivery record landed.
    const held = new HeldStore(memory);
    let recorded = false;
    const hold = held.hold(({ operation, keys }) => {
      if (operation === 'put' && keys[0]!.includes('/inbox_removed/')) recorded = true;
      return recorded && operation === 'get' && keys[0]!.endsWith('/session.json');
    });
    const first = importLines(world(held).services, bytes(EXPORTED), LIMITS);
    first.catch(() => undefined);
    await hold.reached;
    // Another client deletes that session and imports the same export again, whole.
    const other = world(memory);
    await other.sessions.delete(ID);
    await importLines(other.services, bytes(EXPORTED), LIMITS);
    hold.release();

    await expect(first).rejects.toMatchObject({ code: 'not_found', details: { id: ID } });
    expect(await exportText(other.services, ID)).toBe(EXPORTED);
  });
});

describe('an import that fails after its records, its session deleted meanwhile', () => {
  it('leaves none of its delivery records for the next session of the id', async () => {
    const memory = new MemoryStore();
    // The import's read of its config after its records fails once: its cleanup then finds the id gone.
    let recorded = false;
    const faulty = new FaultyStore(memory).failWhen(
      ({ operation, key }) => {
        recorded ||= operation === 'put' && key.includes('/inbox_removed/');
        return recorded && operation === 'get' && key.endsWith('/session.json');
      },
      { times: 1 },
    );
    const { running, hold } = await importHeldAtItsRecord(faulty);
    // Another client deletes the session; its sweep lists before the record lands.
    const other = world(memory);
    await other.sessions.delete(ID);
    hold.release();
    await expect(running).rejects.toMatchObject({ code: 'storage_error' });

    expect(await keysUnder(memory, '/inbox_removed/')).toEqual([]);
    await other.sessions.create({ id: ID });
    expect(await other.inbox.listDelivered(ID)).toEqual([]);
  });
});

describe('an import whose record lands after its session was deleted, the same export imported again meanwhile', () => {
  it('is written over by that import, which is whole; the first, 404, deletes none of its records', async () => {
    const memory = new MemoryStore();
    const held = new HeldStore(memory);
    let landed = false;
    const atRecord = held.hold(({ operation, keys }) => operation === 'put' && keys[0]!.includes('/inbox_removed/'));
    const atRead = held.hold(
      ({ operation, keys }) => landed && operation === 'get' && keys[0]!.endsWith('/session.json'),
    );
    const first = importLines(world(held).services, bytes(EXPORTED), LIMITS);
    first.catch(() => undefined);
    await atRecord.reached;
    // Another client deletes the session: its sweep lists before the first import's record lands.
    const other = world(memory);
    await other.sessions.delete(ID);
    // The same export imported again, held at its own record's put: past its config, and past its
    // deletion of the delivery records a stopped delete would have left, before the first's record lands.
    const second = new HeldStore(memory);
    const atSecondRecord = second.hold(
      ({ operation, keys }) => operation === 'put' && keys[0]!.includes('/inbox_removed/'),
    );
    const importing = importLines(world(second).services, bytes(EXPORTED), LIMITS);
    await atSecondRecord.reached;
    landed = true;
    atRecord.release();
    await atRead.reached;
    // The second finds that record under the name of its notice: another import's, while its own
    // config stands, so one whose session is gone. It writes over it.
    atSecondRecord.release();
    await importing;
    atRead.release();
    await expect(first).rejects.toMatchObject({ code: 'not_found' });

    expect(await exportText(other.services, ID)).toBe(EXPORTED);
    expect(await keysUnder(memory, '/import/')).toEqual([]);
  });
});

describe('an import meeting a record another import left, that import deleting it before the write over it', () => {
  it('writes its own record there, is answered 201 and its session is whole', async () => {
    const memory = new MemoryStore();
    // Another import of the id whose session is gone: its record, put before, lands after this
    // import's config (the delivery records left before it are deleted before its config).
    await importLines(world(memory).services, bytes(EXPORTED), LIMITS);
    const [left] = await keysUnder(memory, '/inbox_removed/');
    expect(left).toBeDefined();
    const record = (await memory.get(left!))!;
    await world(memory).sessions.delete(ID);

    const held = new HeldStore(memory);
    const atRecord = held.hold(
      ({ operation, keys, options }) => operation === 'put' && keys[0] === left && options?.onlyIfAbsent === true,
    );
    const atWriteOver = held.hold(
      ({ operation, keys, options }) => operation === 'put' && keys[0] === left && options?.ifMatch !== undefined,
    );
    const running = importLines(world(held).services, bytes(EXPORTED), LIMITS);
    running.catch(() => undefined);
    await atRecord.reached;
    await memory.put(left!, record.body, { contentType: 'text/plain; charset=utf-8', metadata: record.metadata });
    atRecord.release();
    await atWriteOver.reached;
    // That import, still to find its session gone, deletes its own record meanwhile.
    await memory.delete(left!);
    atWriteOver.release();

    await expect(running.then(() => 'imported')).resolves.toBe('imported');
    expect(await exportText(world(memory).services, ID)).toBe(EXPORTED);
    expect(await keysUnder(memory, '/import/')).toEqual([]);
  });
});

import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { importLines } from '../../lib/transfer.ts';
import { exportText, headerLine, inOneChunk, messageLine } from '../support/export-lines.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { HeldStore } from '../support/held-store.ts';
import { transferWorld } from '../support/transfer-world.ts';

/**
 * A delete of a session stopped after deleting its config, before its sweep: the delivery records
 * of its notices, and the notices it set aside (`inbox_unreadable/`), stay under the id. An import
 * of the id is not refused for them, nor shows them as its own: with no session of the id, it
 * deletes them before its config, as the delete would have. A session of the id created meanwhile,
 * or an import of it past its config, keeps the id: 409.
 */

const LIMITS = { maxItemBytes: 2048, maxNoticeBytes: 1024, maxLineBytes: 8192 };
const ID = 'left';
const REMOVED = `sessions/${ID}/inbox_removed/`;

const world = (store: ObjectStore) => transferWorld(store);

async function keysUnder(store: ObjectStore, prefix: string): Promise<string[]> {
  const page = await store.list(prefix, { limit: 1000 });
  return page.objects.map((object) => object.key);
}

/** A session with two notices delivered by its turn, exported, then deleted by a delete stopped at its sweep. */
async function deletedLeavingRecords(memory: MemoryStore): Promise<string> {
  const w = world(memory);
  await w.sessions.create({ id: ID });
  await w.sessions.append(ID, [{ type: 'message', role: 'user', content: 'before' }]);
  await w.inbox.post(ID, { name: 'note', content: 'delivered once' });
  await w.inbox.post(ID, { name: 'other', content: 'delivered too' });
  expect((await w.inbox.consume(ID, { turn: 1 })).delivered.map((notice) => notice.name)).toEqual(['note', 'other']);
  const exported = await exportText(w.services, ID);
  expect(exported).toContain('"stored_as":"note"');
  const stopped = new FaultyStore(memory).failWhen(
    ({ operation, key }) => operation === 'list' && key === `sessions/${ID}/`,
  );
  await expect(world(stopped).sessions.delete(ID)).rejects.toMatchObject({ code: 'storage_error' });
  expect(await memory.get(`sessions/${ID}/session.json`)).toBeNull();
  expect(await keysUnder(memory, REMOVED)).toEqual([`${REMOVED}note`, `${REMOVED}other`]);
  return exported;
}

describe('an import of an id whose delete stopped before its sweep', () => {
  it('imports the same export, 201, whole, over the delivery records that delete left', async () => {
    const memory = new MemoryStore();
    const exported = await deletedLeavingRecords(memory);

    const w = world(memory);
    await expect(importLines(w.services, inOneChunk(exported), LIMITS)).resolves.toMatchObject({ id: ID });
    expect(await exportText(w.services, ID)).toBe(exported);
    expect(await keysUnder(memory, `sessions/${ID}/import/`)).toEqual([]);
  });

  it('imports another export without showing those delivery records as its own', async () => {
    const memory = new MemoryStore();
    await deletedLeavingRecords(memory);

    const w = world(memory);
    const other = `${[headerLine(ID), messageLine(1), messageLine(2)].join('\n')}\n`;
    await expect(importLines(w.services, inOneChunk(other), LIMITS)).resolves.toMatchObject({ id: ID });
    expect(await w.inbox.listDelivered(ID)).toEqual([]);
    expect(await keysUnder(memory, REMOVED)).toEqual([]);
    expect(await exportText(w.services, ID)).toBe(other);
  });

  it('is 409 while another import of the id is past its config, which finishes whole', async () => {
    const memory = new MemoryStore();
    const exported = await deletedLeavingRecords(memory);
    // The first import, held at its first delivery record's put: its session exists.
    const held = new HeldStore(memory);
    const atRecord = held.hold(({ operation, keys }) => operation === 'put' && keys[0]!.startsWith(REMOVED));
    const first = importLines(world(held).services, inOneChunk(exported), LIMITS);
    first.catch(() => undefined);
    await atRecord.reached;

    const other = `${[headerLine(ID), messageLine(1)].join('\n')}\n`;
    await expect(importLines(world(memory).services, inOneChunk(other), LIMITS)).rejects.toMatchObject({
      code: 'session_exists',
    });
    atRecord.release();
    await expect(first).resolves.toMatchObject({ id: ID });
    expect(await exportText(world(memory).services, ID)).toBe(exported);
  });

  it('deletes nothing once a session of the id is created meanwhile, and is 409', async () => {
    const memory = new MemoryStore();
    const exported = await deletedLeavingRecords(memory);
    // The import held at its listing of the delivery records (before its config).
    const held = new HeldStore(memory);
    const atListing = held.hold(({ operation, keys }) => operation === 'list' && keys[0] === REMOVED);
    const importing = importLines(world(held).services, inOneChunk(exported), LIMITS);
    importing.catch(() => undefined);
    await atListing.reached;
    // A client creates the id meanwhile and a turn of it delivers a notice.
    const live = world(memory);
    await live.sessions.create({ id: ID });
    await live.inbox.post(ID, { name: 'live', content: 'delivered live' });
    expect((await live.inbox.consume(ID, { turn: 1 })).delivered.map((notice) => notice.name)).toEqual(['live']);
    atListing.release();

    await expect(importing).rejects.toMatchObject({ code: 'session_exists' });
    expect(await keysUnder(memory, REMOVED)).toContain(`${REMOVED}live`);
    expect((await live.inbox.listDelivered(ID)).map((notice) => notice.name)).toContain('live');
    expect(await keysUnder(memory, `sessions/${ID}/import/`)).toEqual([]);
  });
});

describe('an import of an id whose delete stopped before its sweep, leaving a notice set aside', () => {
  const UNREADABLE = `sessions/${ID}/inbox_unreadable/`;

  /** A session whose turn set aside a notice that is not UTF-8, deleted by a delete stopped at its sweep. */
  async function deletedLeavingSetAside(memory: MemoryStore): Promise<void> {
    const w = world(memory);
    await w.sessions.create({ id: ID });
    await memory.put(`sessions/${ID}/inbox/bad`, new Uint8Array([0x61, 0xff, 0xfe, 0x62]));
    expect((await w.inbox.consume(ID, { turn: 1 })).delivered).toEqual([]);
    expect((await w.inbox.unreadablePage(ID)).unreadable.map((notice) => notice.name)).toEqual(['bad']);
    const stopped = new FaultyStore(memory).failWhen(
      ({ operation, key }) => operation === 'list' && key === `sessions/${ID}/`,
    );
    await expect(world(stopped).sessions.delete(ID)).rejects.toMatchObject({ code: 'storage_error' });
    expect(await memory.get(`sessions/${ID}/session.json`)).toBeNull();
    expect(await keysUnder(memory, UNREADABLE)).toEqual([`${UNREADABLE}bad`]);
  }

  it('imports without showing that notice as set aside in its session', async () => {
    const memory = new MemoryStore();
    await deletedLeavingSetAside(memory);

    const w = world(memory);
    const other = `${[headerLine(ID), messageLine(1), messageLine(2)].join('\n')}\n`;
    await expect(importLines(w.services, inOneChunk(other), LIMITS)).resolves.toMatchObject({ id: ID });
    expect((await w.inbox.unreadablePage(ID)).unreadable).toEqual([]);
    expect(await keysUnder(memory, UNREADABLE)).toEqual([]);
    expect(await exportText(w.services, ID)).toBe(other);
  });

  it('deletes no notice set aside once a session of the id is created meanwhile, and is 409', async () => {
    const memory = new MemoryStore();
    await deletedLeavingSetAside(memory);
    const held = new HeldStore(memory);
    const atListing = held.hold(({ operation, keys }) => operation === 'list' && keys[0] === UNREADABLE);
    const other = `${[headerLine(ID), messageLine(1)].join('\n')}\n`;
    const importing = importLines(world(held).services, inOneChunk(other), LIMITS);
    importing.catch(() => undefined);
    await atListing.reached;
    // A client creates the id meanwhile and a turn of it sets a notice aside.
    const live = world(memory);
    await live.sessions.create({ id: ID });
    await memory.put(`sessions/${ID}/inbox/live`, new Uint8Array([0xff]));
    await live.inbox.consume(ID, { turn: 1 });
    atListing.release();

    await expect(importing).rejects.toMatchObject({ code: 'session_exists' });
    expect(await keysUnder(memory, UNREADABLE)).toContain(`${UNREADABLE}live`);
    expect(await keysUnder(memory, `sessions/${ID}/import/`)).toEqual([]);
  });
});

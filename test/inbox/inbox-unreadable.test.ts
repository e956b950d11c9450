import { describe, expect, it } from 'vitest';
import { Inbox, type InboxLogEvent } from '../../lib/inbox/index.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { sessionConfigKey, sessionPrefix } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { CountingStore } from '../support/counting-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';

/** Bytes that are not UTF-8: what a corrupt or foreign object written into `inbox/` may hold. */
const NOT_UTF8 = new Uint8Array([0x61, 0xff, 0xfe, 0x62]);

async function setup(options: { maxNoticeBytes?: number; maxPendingNotices?: number } = {}) {
  const memory = new MemoryStore();
  const store = new CountingStore(memory);
  const events: InboxLogEvent[] = [];
  const keyPrefix = 'p/';
  const inbox = new Inbox(store, {
    keyPrefix,
    sessionExists: sessionExistsIn(store, keyPrefix),
    log: (event) => events.push(event),
    ...(options.maxNoticeBytes ? { maxNoticeBytes: options.maxNoticeBytes } : {}),
    ...(options.maxPendingNotices ? { maxPendingNotices: options.maxPendingNotices } : {}),
  });
  await memory.put(sessionConfigKey(keyPrefix, 's1'), '{}');
  const prefix = sessionPrefix(keyPrefix, 's1');
  const pad = (index: number) => String(index).padStart(3, '0');
  return { memory, store, inbox, events, prefix, pad };
}

describe('unreadable notices', () => {
  it('more than a turn takes, put before a good one, hold it back no turn after the first', async () => {
    const { memory, inbox, prefix, pad } = await setup();
    for (let index = 0; index < inbox.noticesPerTurn + 8; index++) {
      await memory.put(`${prefix}inbox/${pad(index)}-corrupt`, NOT_UTF8);
    }
    await memory.put(`${prefix}inbox/zzz-good`, 'good news');
    const delivered: string[] = [];
    for (let turn = 1; turn <= 3 && delivered.length === 0; turn++) {
      const fetched = inbox.fetch('s1');
      const result = await inbox.consume('s1', { turn, fetched, sessionExists: true });
      delivered.push(...result.delivered.map((notice) => notice.content));
    }
    expect(delivered).toEqual(['good news']);
    expect(await inbox.listPending('s1')).toEqual([]);
    const setAside = await inbox.unreadablePage('s1', { limit: 100 });
    expect(setAside.unreadable).toHaveLength(inbox.noticesPerTurn + 8);
    expect(setAside.unreadable[0]).toMatchObject({ name: '000-corrupt', reason: 'not_utf8', turn: 1 });
    expect(setAside.unreadable.at(-1)).toMatchObject({ name: `${pad(inbox.noticesPerTurn + 7)}-corrupt`, turn: 2 });
    for (const { stored_as } of setAside.unreadable) {
      expect((await memory.get(`${prefix}inbox_unreadable/${stored_as}`))?.body).toEqual(NOT_UTF8);
    }
  });

  it('set aside under a name set aside before: the next free slot, the earlier one kept', async () => {
    const { memory, inbox, prefix } = await setup();
    await memory.put(`${prefix}inbox/note.md`, NOT_UTF8);
    await inbox.consume('s1', { turn: 1 });
    await memory.put(`${prefix}inbox/note.md`, new Uint8Array([0xff]));
    await inbox.consume('s1', { turn: 2 });
    expect((await inbox.unreadablePage('s1')).unreadable.map((notice) => [notice.name, notice.stored_as])).toEqual([
      ['note.md', 'note.1.md'],
      ['note.md', 'note.md'],
    ]);
    expect((await memory.get(`${prefix}inbox_unreadable/note.1.md`))?.body).toEqual(new Uint8Array([0xff]));
  });

  it('one read ahead of the turn and replaced by a readable one meanwhile is not set aside', async () => {
    const { memory, inbox, prefix } = await setup();
    await memory.put(`${prefix}inbox/a`, NOT_UTF8);
    const fetched = inbox.fetch('s1');
    await fetched;
    await memory.put(`${prefix}inbox/a`, 'fixed');
    expect((await inbox.consume('s1', { turn: 1, fetched, sessionExists: true })).delivered).toEqual([]);
    expect((await inbox.unreadablePage('s1')).unreadable).toEqual([]);
    const next = await inbox.consume('s1', { turn: 2 });
    expect(next.delivered.map((notice) => notice.content)).toEqual(['fixed']);
  });

  it('one grown past four times the limit after the listing is left pending, read or read ahead', async () => {
    for (const readAhead of [false, true]) {
      const { memory, inbox, prefix, events } = await setup({ maxNoticeBytes: 8 });
      await memory.put(`${prefix}inbox/a`, 'fine');
      const listing = memory.list.bind(memory);
      // The notice is replaced by a body larger than four times the limit once the turn listed it.
      memory.list = async (...args) => {
        const listed = await listing(...args);
        memory.list = listing;
        await memory.put(`${prefix}inbox/a`, 'x'.repeat(33));
        return listed;
      };
      const fetched = readAhead ? inbox.fetch('s1') : undefined;
      const result = await inbox.consume('s1', { turn: 1, sessionExists: true, ...(fetched ? { fetched } : {}) });
      expect({ readAhead, delivered: result.delivered }).toEqual({ readAhead, delivered: [] });
      expect({ readAhead, unreadable: (await inbox.unreadablePage('s1')).unreadable }).toEqual({
        readAhead,
        unreadable: [],
      });
      expect((await inbox.listPending('s1')).map((notice) => [notice.name, notice.size])).toEqual([['a', 33]]);
      expect(events.filter((event) => event.level === 'warn')).toMatchObject([
        { key: `${prefix}inbox/a`, message: expect.stringMatching(/left in place/) },
      ]);
    }
  });

  it('one over four times the limit left by an earlier session of the id goes unread, read ahead or not', async () => {
    for (const readAhead of [false, true]) {
      const { memory, store, inbox, prefix } = await setup({ maxNoticeBytes: 8 });
      await memory.put(`${prefix}inbox/a`, 'x'.repeat(33));
      await memory.put(`${prefix}inbox/b`, 'old');
      // The session was created after both were uploaded (by more than the clock tolerance).
      const since = new Date(Date.now() + 60_000).toISOString();
      store.reset();
      const fetched = readAhead ? inbox.fetch('s1') : undefined;
      const result = await inbox.consume('s1', {
        turn: 1,
        sessionExists: true,
        since,
        ...(fetched ? { fetched } : {}),
      });
      expect({ readAhead, delivered: result.delivered }).toEqual({ readAhead, delivered: [] });
      expect({ readAhead, pending: await memory.list(`${prefix}inbox/`) }).toMatchObject({
        readAhead,
        pending: { objects: [] },
      });
      // The listing's upload times tell it: neither is read (the small one only when read ahead).
      expect({ readAhead, gets: store.counts.get }).toEqual({ readAhead, gets: readAhead ? 1 : 0 });
    }
  });

  it('one over four times the limit stays pending, holding no place in a turn nor in MAX_PENDING_NOTICES', async () => {
    const { memory, store, inbox, prefix } = await setup({ maxNoticeBytes: 8, maxPendingNotices: 2 });
    for (const name of ['a', 'b', 'c']) await memory.put(`${prefix}inbox/${name}`, 'x'.repeat(33));
    const since = new Date(Date.now() - 60_000).toISOString();
    store.reset();
    expect(await inbox.consume('s1', { turn: 1, sessionExists: true, since })).toEqual({ delivered: [] });
    expect(store.counts).toMatchObject({ list: 1, get: 0, head: 0, put: 0, delete: 0 });
    await inbox.post('s1', { name: 'd', content: 'dee' });
    await inbox.post('s1', { name: 'e', content: 'ee' });
    await expect(inbox.post('s1', { name: 'f', content: 'ef' })).rejects.toMatchObject({ code: 'inbox_full' });
    const result = await inbox.consume('s1', { turn: 2, sessionExists: true, since, room: 1 });
    expect(result.delivered.map((notice) => notice.content)).toEqual(['dee']);
    expect((await inbox.listPending('s1')).map((notice) => notice.name)).toEqual(['a', 'b', 'c', 'e']);
  });

  it('one over four times the limit of the session is logged by each consume that passes over it', async () => {
    for (const readAhead of [false, true]) {
      const { memory, inbox, prefix, events } = await setup({ maxNoticeBytes: 8 });
      await memory.put(`${prefix}inbox/a`, 'x'.repeat(33));
      const since = new Date(Date.now() - 60_000).toISOString();
      for (const turn of [1, 2]) {
        const fetched = readAhead ? inbox.fetch('s1') : undefined;
        const options = { turn, sessionExists: true, since, ...(fetched ? { fetched } : {}) };
        expect(await inbox.consume('s1', options)).toEqual({ delivered: [] });
      }
      const left = {
        level: 'warn',
        key: `${prefix}inbox/a`,
        message: 'unreadable notice left in place: larger than 32 bytes',
      };
      expect({ readAhead, events }).toEqual({ readAhead, events: [left, left] });
      // One left by an earlier session of the id is removed unread instead (info), not left in place.
      events.length = 0;
      expect(
        await inbox.consume('s1', { turn: 3, sessionExists: true, since: new Date(Date.now() + 60_000).toISOString() }),
      ).toEqual({ delivered: [] });
      expect({ readAhead, events: events.map((event) => event.level) }).toEqual({ readAhead, events: ['info'] });
    }
  });

  it('one posted while the limit was larger is set aside as too large once it is lowered', async () => {
    const { store, inbox, events } = await setup({ maxNoticeBytes: 16 });
    await inbox.post('s1', { name: 'long', content: '0123456789' });
    const lowered = new Inbox(store, {
      keyPrefix: 'p/',
      sessionExists: sessionExistsIn(store, 'p/'),
      log: (event) => events.push(event),
      maxNoticeBytes: 8,
    });
    expect((await lowered.consume('s1', { turn: 1 })).delivered).toEqual([]);
    expect((await lowered.unreadablePage('s1')).unreadable).toMatchObject([
      { name: 'long', size: 10, reason: 'too_large', turn: 1 },
    ]);
  });

  it('set aside by a turn of a session deleted meanwhile, it goes with the session', async () => {
    const { memory, inbox, prefix } = await setup();
    await memory.put(`${prefix}inbox/a`, NOT_UTF8);
    // The turn read its session; the delete then removed session.json, and its sweep has passed.
    await memory.delete(sessionConfigKey('p/', 's1'));
    expect((await inbox.consume('s1', { turn: 1, sessionExists: true })).delivered).toEqual([]);
    expect((await memory.list(prefix)).objects.map((object) => object.key)).toEqual([]);
  });

  it('set aside by a turn of a session created again meanwhile, it stays with the id', async () => {
    const { memory, inbox, prefix } = await setup();
    await memory.put(`${prefix}inbox/a`, NOT_UTF8);
    await memory.put(sessionConfigKey('p/', 's1'), JSON.stringify({ created_at: new Date().toISOString() }));
    await inbox.consume('s1', { turn: 1, sessionExists: true, since: '2020-01-01T00:00:00.000Z' });
    expect((await inbox.unreadablePage('s1')).unreadable.map((notice) => notice.stored_as)).toEqual(['a']);
  });

  it('consumers racing on one unreadable notice set it aside once', async () => {
    const { memory, inbox, prefix } = await setup();
    await memory.put(`${prefix}inbox/a`, NOT_UTF8);
    await Promise.all([1, 2, 3, 4].map((turn) => inbox.consume('s1', { turn })));
    expect((await inbox.unreadablePage('s1')).unreadable.map((notice) => notice.stored_as)).toEqual(['a']);
    expect(await inbox.listPending('s1')).toEqual([]);
  });

  it('an original whose delete failed is removed by a later turn, not set aside twice', async () => {
    const memory = new MemoryStore();
    const faulty = new FaultyStore(memory);
    const events: InboxLogEvent[] = [];
    const inbox = new Inbox(faulty, {
      keyPrefix: 'p/',
      sessionExists: sessionExistsIn(faulty, 'p/'),
      log: (event) => events.push(event),
    });
    await memory.put(sessionConfigKey('p/', 's1'), '{}');
    const prefix = sessionPrefix('p/', 's1');
    await memory.put(`${prefix}inbox/a`, NOT_UTF8);
    faulty.failWhen((call) => call.operation === 'delete', { times: 1 });
    await inbox.consume('s1', { turn: 1 });
    expect(events.at(-1)?.message).toMatch(/^notice set aside as inbox_unreadable\/a .*its original was not deleted/);
    expect((await inbox.listPending('s1')).map((notice) => notice.name)).toEqual(['a']);
    await inbox.consume('s1', { turn: 2 });
    expect(await inbox.listPending('s1')).toEqual([]);
    expect((await inbox.unreadablePage('s1')).unreadable.map((notice) => notice.stored_as)).toEqual(['a']);
  });

  it('a consume of an empty inbox lists once and writes nothing', async () => {
    const { store, inbox } = await setup();
    store.reset();
    expect(await inbox.consume('s1', { turn: 1, sessionExists: true })).toEqual({ delivered: [] });
    expect(store.counts).toMatchObject({ list: 1, get: 0, head: 0, put: 0, delete: 0 });
  });
});

describe('notices whose name an import would refuse', () => {
  /** The UTF-8 bytes of the user metadata a put carries, as S3 counts them (keys and values). */
  const metadataBytes = (metadata: Record<string, string> = {}) =>
    Object.entries(metadata).reduce((sum, [key, value]) => sum + new TextEncoder().encode(key + value).length, 0);

  it('one over 200 bytes (UTF-8) is set aside, not delivered, with no name in its metadata', async () => {
    const { memory, inbox, prefix, events } = await setup();
    // S3 refuses a put whose user metadata passes 2 KB.
    const s3 = new FaultyStore(memory).failWhen(
      ({ operation, options }) => operation === 'put' && metadataBytes(options?.metadata) > 2048,
    );
    const limited = new Inbox(s3, { keyPrefix: 'p/', sessionExists: sessionExistsIn(s3, 'p/') });
    const long = 'é'.repeat(400);
    const edge = 'é'.repeat(100);
    for (const name of [long, 'n'.repeat(201), edge, 'plain'])
      await memory.put(`${prefix}inbox/${name}`, `for ${name}`);
    // The prompt preview shows what the consume delivers.
    expect((await limited.peek('s1')).map((notice) => notice.name).sort()).toEqual([edge, 'plain'].sort());
    const fetched = limited.fetch('s1');
    const { delivered } = await limited.consume('s1', { turn: 1, fetched, sessionExists: true });
    expect(delivered.map((notice) => notice.name).sort()).toEqual([edge, 'plain'].sort());
    expect(await inbox.listPending('s1')).toEqual([]);
    const setAside = (await inbox.unreadablePage('s1')).unreadable;
    expect(setAside.map((notice) => [notice.name, notice.reason, notice.turn]).sort()).toEqual(
      [
        [long, 'name_too_long', 1],
        ['n'.repeat(201), 'name_too_long', 1],
      ].sort(),
    );
    for (const notice of setAside) {
      const object = await memory.get(`${prefix}inbox_unreadable/${notice.stored_as}`);
      expect(new TextDecoder().decode(object!.body)).toBe(`for ${notice.name}`);
      expect(object!.metadata['notice-name']).toBeUndefined();
    }
    expect(events).toEqual([]);
  });

  it('a consume of one costs what a delivery does (a get, a put, a delete) and a set-aside config check', async () => {
    const { memory, store, inbox, prefix } = await setup();
    await memory.put(`${prefix}inbox/${'n'.repeat(201)}`, 'long');
    store.reset();
    await inbox.consume('s1', { turn: 1, sessionExists: true });
    const setAside = store.counts;
    await memory.put(`${prefix}inbox/${'n'.repeat(200)}`, 'fits');
    store.reset();
    expect((await inbox.consume('s1', { turn: 2, sessionExists: true })).delivered).toHaveLength(1);
    expect(store.counts).toMatchObject({ list: 1, get: 1, put: 1, delete: 1 });
    // A set-aside also checks the config once (a session deleted meanwhile loses it).
    expect(setAside).toEqual({ ...store.counts, head: store.counts.head + 1 });
  });
});

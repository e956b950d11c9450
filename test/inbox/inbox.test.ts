import fc from 'fast-check';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { describe, expect, it } from 'vitest';
import { removeStaleOriginal } from '../../lib/inbox/move.ts';
import { Inbox, type InboxLogEvent } from '../../lib/inbox/index.ts';
import { decodeUtf8 } from '../../lib/store/object-store.ts';
import { compareBytes, createNameGenerator, parseSlot, slotName, splitExtension } from '../../lib/inbox/notice-name.ts';
import { sessionConfigKey, sessionPrefix } from '../../lib/session/keys.ts';
import { CountingStore, type StoreOperation } from '../support/counting-store.ts';
import { FaultyStore, type FaultOptions } from '../support/faulty-store.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { inboxSemanticsSuite } from './inbox-suite.ts';
import { JitteryStore } from './jittery-store.ts';

inboxSemanticsSuite('the memory store', () => {
  const store = new MemoryStore();
  return { store, writeDirect: async (key, body) => void (await store.put(key, body)) };
});

inboxSemanticsSuite('a memory store with random latency', () => {
  const inner = new MemoryStore();
  return { store: new JitteryStore(inner, 3), writeDirect: async (key, body) => void (await inner.put(key, body)) };
});

async function setup(options: { now?: () => Date; maxNoticeBytes?: number } = {}) {
  const memory = new MemoryStore();
  const faulty = new FaultyStore(memory);
  const store = new CountingStore(faulty);
  const events: InboxLogEvent[] = [];
  const keyPrefix = 'p/';
  const inbox = new Inbox(store, {
    keyPrefix,
    sessionExists: sessionExistsIn(store, keyPrefix),
    log: (event) => events.push(event),
    ...(options.now ? { clock: options.now } : {}),
    ...(options.maxNoticeBytes ? { maxNoticeBytes: options.maxNoticeBytes } : {}),
  });
  await memory.put(sessionConfigKey(keyPrefix, 's1'), '{}');
  const prefix = sessionPrefix(keyPrefix, 's1');
  const failOn = (operation: StoreOperation, key: string, faultOptions: FaultOptions = {}) => {
    faulty.failWhen((call) => call.operation === operation && call.key === key, faultOptions);
  };
  const heal = () => faulty.heal();
  return { memory, store, inbox, events, prefix, failOn, heal };
}

describe('inbox on a failing store', () => {
  it.each([
    ['get', 'inbox/b'],
    ['put', 'inbox_removed/b'],
  ] as const)(
    'a notice whose %s fails is skipped in place, logged, and delivered next time',
    async (operation, suffix) => {
      const { inbox, events, prefix, failOn, heal } = await setup();
      for (const name of ['a', 'b', 'c']) await inbox.post('s1', { name, content: name.toUpperCase() });
      failOn(operation, prefix + suffix);
      const result = await inbox.consume('s1', { turn: 1 });
      expect(result.delivered.map((notice) => notice.content)).toEqual(['A', 'C']);
      expect(events).toMatchObject([{ level: 'warn', key: `${prefix}inbox/b` }]);
      expect(events[0]!.error).toBeInstanceOf(Error);
      expect((await inbox.listPending('s1')).map((notice) => notice.name)).toEqual(['b']);

      heal();
      const next = await inbox.consume('s1', { turn: 2 });
      expect(next.delivered).toMatchObject([{ name: 'b', stored_as: 'b', content: 'B' }]);
    },
  );

  it('delivers a notice whose original could not be deleted once; the next turn removes the leftover', async () => {
    let now = new Date('2026-01-01T00:00:00Z');
    const { inbox, events, prefix, failOn, heal } = await setup({ now: () => now });
    await inbox.post('s1', { name: 'a', content: 'A' });
    failOn('delete', `${prefix}inbox/a`);
    const first = await inbox.consume('s1', { turn: 1 });
    expect(first.delivered).toMatchObject([{ name: 'a', content: 'A' }]);
    expect(events).toMatchObject([{ level: 'warn', key: `${prefix}inbox/a` }]);
    heal();

    // Another consume of the same turn leaves the leftover to that turn's consumer.
    now = new Date('2026-01-01T00:00:05Z');
    expect(await inbox.consume('s1', { turn: 1 })).toEqual({ delivered: [] });
    expect((await inbox.listPending('s1')).map((notice) => notice.name)).toEqual(['a']);
    await expect(inbox.post('s1', { name: 'a', content: 'again' })).rejects.toMatchObject({ code: 'name_taken' });

    // The next turn: recognised as claimed (not delivered again), and removed.
    now = new Date('2026-01-01T00:00:10Z');
    expect(await inbox.consume('s1', { turn: 2 })).toEqual({ delivered: [] });
    expect(await inbox.listPending('s1')).toEqual([]);
    expect((await inbox.listDelivered('s1')).map((record) => record.stored_as)).toEqual(['a']);

    // The name is free again: a new notice under it is posted and delivered.
    await inbox.post('s1', { name: 'a', content: 'again' });
    const third = await inbox.consume('s1', { turn: 3 });
    expect(third.delivered).toMatchObject([{ name: 'a', stored_as: 'a.1', content: 'again' }]);
  });

  it('removes a leftover claimed by the same turn once the claim is a minute old', async () => {
    let now = new Date('2026-01-01T00:00:00Z');
    const { inbox, prefix, failOn, heal } = await setup({ now: () => now });
    await inbox.post('s1', { name: 'a', content: 'A' });
    failOn('delete', `${prefix}inbox/a`);
    expect((await inbox.consume('s1', { turn: 1 })).delivered).toHaveLength(1);
    heal();
    now = new Date('2026-01-01T00:02:00Z');
    expect(await inbox.consume('s1', { turn: 1 })).toEqual({ delivered: [] });
    expect(await inbox.listPending('s1')).toEqual([]);
  });

  it('leaves a notice posted again under a claimed name alone, though the claim is old', async () => {
    let now = new Date('2026-01-01T00:00:00Z');
    const { memory, inbox, prefix } = await setup({ now: () => now });
    await inbox.post('s1', { name: 'a', content: 'A' });
    expect((await inbox.consume('s1', { turn: 1 })).delivered).toHaveLength(1);
    // A leftover original read by a later consume, replaced before it could delete it.
    const claim = (await memory.head(`${prefix}inbox_removed/a`))!;
    await memory.put(`${prefix}inbox/a`, 'posted again');
    now = new Date('2026-01-01T00:05:00Z');
    await removeStaleOriginal(
      {
        store: memory,
        clock: () => now,
        log: () => {},
      },
      `${prefix}inbox/a`,
      claim,
      2,
    );
    expect(decodeUtf8((await memory.get(`${prefix}inbox/a`))!.body)).toBe('posted again');
  });

  it('delivers a notice whose claim landed but whose answer was lost, once', async () => {
    let now = new Date('2026-01-01T00:00:00Z');
    const { inbox, events, prefix, failOn, heal } = await setup({ now: () => now });
    await inbox.post('s1', { name: 'a', content: 'A' });
    await inbox.post('s1', { name: 'b', content: 'B' });
    failOn('put', `${prefix}inbox_removed/a`, { after: true });
    // The claim carries this consume's claim id, so the claim found there is recognised as ours.
    const result = await inbox.consume('s1', { turn: 1 });
    expect(result.delivered.map((notice) => notice.name)).toEqual(['a', 'b']);
    expect(events).toEqual([]);
    heal();
    expect(await inbox.consume('s1', { turn: 2 })).toEqual({ delivered: [] });
    now = new Date('2026-01-01T00:05:00Z');
    expect(await inbox.consume('s1', { turn: 3 })).toEqual({ delivered: [] });
    expect(await inbox.listPending('s1')).toEqual([]);
    expect((await inbox.listDelivered('s1')).map((record) => [record.name, record.turn])).toEqual([
      ['a', 1],
      ['b', 1],
    ]);
  });

  it('does not throw when listing fails', async () => {
    const { inbox, events, prefix, failOn } = await setup();
    await inbox.post('s1', { name: 'a', content: 'A' });
    failOn('list', `${prefix}inbox/`);
    expect(await inbox.consume('s1', { turn: 1 })).toEqual({ delivered: [] });
    expect(events).toMatchObject([{ level: 'warn' }]);
  });

  it('an abort that cannot be moved stays, does not abort, and holds back the notices after it', async () => {
    const { inbox, prefix, failOn, heal } = await setup();
    for (const name of ['a', 'abort', 'b']) await inbox.post('s1', { name, content: name });
    failOn('put', `${prefix}inbox_removed/abort`);
    const result = await inbox.consume('s1', { turn: 1 });
    expect(result).toMatchObject({ delivered: [{ name: 'a' }] });
    expect(result.abort).toBeUndefined();
    expect((await inbox.listPending('s1')).map((notice) => notice.name)).toEqual(['abort', 'b']);
    heal();
    expect((await inbox.consume('s1', { turn: 2 })).abort).toEqual({
      name: 'abort',
      stored_as: 'abort',
      reason: 'abort',
      posted_at: expect.any(String),
    });
  });

  it('an abort consumed by an earlier turn whose delete failed is passed over by the next turn', async () => {
    const { inbox, prefix, failOn, heal, events } = await setup();
    for (const name of ['a', 'abort', 'b']) await inbox.post('s1', { name, content: name });
    failOn('delete', `${prefix}inbox/abort`);
    const first = await inbox.consume('s1', { turn: 1 });
    expect(first).toMatchObject({ delivered: [{ name: 'a' }], abort: { name: 'abort', reason: 'abort' } });
    expect(events).toMatchObject([{ level: 'warn', key: `${prefix}inbox/abort` }]);
    heal();
    const second = await inbox.consume('s1', { turn: 2 });
    expect(second.abort).toBeUndefined();
    expect(second.delivered.map((notice) => notice.name)).toEqual(['b']);
  });

  it('an abort whose content is not UTF-8 still aborts', async () => {
    const { inbox, memory, prefix } = await setup();
    await memory.put(`${prefix}inbox/abort`, new Uint8Array([0xff, 0x20]));
    const result = await inbox.consume('s1', { turn: 1 });
    expect(result.abort?.name).toBe('abort');
    expect(await inbox.listPending('s1')).toEqual([]);
  });

  it('sets a notice larger than the limit aside, and passes over one larger than four times it in place', async () => {
    const { inbox, memory, prefix, events } = await setup({ maxNoticeBytes: 8 });
    await memory.put(`${prefix}inbox/big`, '123456789');
    await memory.put(`${prefix}inbox/huge`, 'x'.repeat(33));
    await memory.put(`${prefix}inbox/small`, '12345678');
    expect(await inbox.peek('s1')).toEqual([{ name: 'small', content: '12345678' }]);
    const result = await inbox.consume('s1', { turn: 1 });
    expect(result.delivered.map((notice) => notice.name)).toEqual(['small']);
    // Never read (it could be any size): it stays pending, listed with its size, and holds no turn's place.
    expect((await inbox.listPending('s1')).map((notice) => [notice.name, notice.size])).toEqual([['huge', 33]]);
    expect((await inbox.unreadablePage('s1')).unreadable).toMatchObject([
      { name: 'big', stored_as: 'big', size: 9, reason: 'too_large', turn: 1 },
    ]);
    expect(decodeUtf8((await memory.get(`${prefix}inbox_unreadable/big`))!.body)).toBe('123456789');
    // Both logged: the one set aside, and the one passed over, as any notice left in place is.
    expect(events).toMatchObject([
      {
        level: 'warn',
        key: `${prefix}inbox/huge`,
        message: 'unreadable notice left in place: larger than 32 bytes',
      },
      {
        level: 'warn',
        key: `${prefix}inbox/big`,
        message: 'notice set aside as inbox_unreadable/big: larger than the notice limit',
      },
    ]);
    await memory.put(`${prefix}inbox/later`, 'fine');
    expect((await inbox.consume('s1', { turn: 2 })).delivered.map((notice) => notice.name)).toEqual(['later']);
  });
});

describe('a name freed and posted again during a consume', () => {
  /** A memory store that runs `beforePut` once, before the first put of `hookKey`. */
  class HookedStore extends MemoryStore {
    hookKey = '';
    beforePut: (() => Promise<void>) | undefined;

    override async put(...args: Parameters<MemoryStore['put']>) {
      const hook = args[0] === this.hookKey ? this.beforePut : undefined;
      if (hook) {
        this.beforePut = undefined;
        await hook();
      }
      return super.put(...args);
    }
  }

  it('keeps a notice posted again under a claimed name once its consumer has deleted that original', async () => {
    const store = new HookedStore();
    const inbox = new Inbox(store, { keyPrefix: 'p/', log: () => {}, sessionExists: sessionExistsIn(store, 'p/') });
    await store.put(sessionConfigKey('p/', 's1'), '{}');
    // More notices than a consume moves at a time: n0 is moved before n6 is claimed.
    const names = Array.from({ length: 7 }, (_, index) => `n${index}`);
    for (const name of names) await inbox.post('s1', { name, content: `first ${name}` });
    const prefix = sessionPrefix('p/', 's1');
    store.hookKey = `${prefix}inbox_removed/n6`;
    let reposted = false;
    store.beforePut = async () => {
      // n0 is claimed (delivered by this consume); its client withdraws it if still pending
      // and posts a new n0, which is acknowledged and must reach a later turn.
      if (await store.head(`${prefix}inbox/n0`)) await inbox.withdraw('s1', 'n0');
      await inbox.post('s1', { name: 'n0', content: 'second n0' });
      reposted = true;
    };
    const first = await inbox.consume('s1', { turn: 1 });
    expect(reposted).toBe(true);
    expect(first.delivered.map((notice) => notice.content)).toEqual(names.map((name) => `first ${name}`));
    const second = await inbox.consume('s1', { turn: 2 });
    expect(second.delivered.map((notice) => notice.content)).toEqual(['second n0']);
  });
});

describe('inbox storage operations', () => {
  const operations = (store: CountingStore) => {
    const { get, head, put, list, delete: deletes } = store.counts;
    return { get, head, put, list, delete: deletes };
  };

  it('costs one list plus three operations per fresh notice', async () => {
    const { inbox, store } = await setup();
    for (let index = 0; index < 7; index++) await inbox.post('s1', { name: `n${index}`, content: 'x' });
    store.reset();
    await inbox.consume('s1', { turn: 1, sessionExists: true });
    expect(operations(store)).toEqual({ list: 1, get: 7, put: 7, delete: 7, head: 0 });
  });

  it('bounds a turn over a full inbox: one page listed, the abort found past it by a head, 32 taken', async () => {
    const { inbox, store, memory, prefix } = await setup();
    // Written straight into the bucket, past any limit a post checks.
    for (let index = 0; index < 1500; index++)
      await memory.put(`${prefix}inbox/${String(index).padStart(4, '0')}`, 'x');
    await memory.put(`${prefix}inbox/abort`, 'stop');
    store.reset();
    const result = await inbox.consume('s1', { turn: 1, sessionExists: true });
    expect(result.abort).toMatchObject({ name: 'abort', reason: 'stop' });
    expect(result.delivered.map((notice) => notice.name)).toEqual(
      Array.from({ length: 32 }, (_, index) => String(index).padStart(4, '0')),
    );
    expect(operations(store)).toEqual({ list: 1, head: 1, get: 33, put: 33, delete: 33 });
    store.reset();
    const next = await inbox.consume('s1', { turn: 2, sessionExists: true });
    expect(next.delivered.map((notice) => notice.name)[0]).toBe('0032');
    expect(operations(store)).toEqual({ list: 1, head: 1, get: 32, put: 32, delete: 32 });
  });

  it('lists a page of 50 by default with one list call, and refuses the 1001st pending notice', async () => {
    const { inbox, store } = await setup();
    for (let index = 0; index < 1000; index++) await inbox.post('s1', { content: `${index}` });
    await expect(inbox.post('s1', { content: 'one too many' })).rejects.toMatchObject({
      code: 'inbox_full',
      details: { limit: 1000 },
    });
    store.reset();
    const page = await inbox.pendingPage('s1');
    expect(page.pending).toHaveLength(50);
    expect(page.has_more).toBe(true);
    expect(operations(store)).toMatchObject({ list: 1, get: 0 });
  });

  it('checks the session once, and only when the inbox holds something', async () => {
    const { inbox, store } = await setup();
    store.reset();
    await inbox.consume('s1', { turn: 1 });
    expect(operations(store)).toEqual({ list: 1, get: 0, put: 0, delete: 0, head: 0 });
    await inbox.post('s1', { name: 'n', content: 'x' });
    store.reset();
    await inbox.consume('s1', { turn: 2 });
    expect(operations(store)).toEqual({ list: 1, head: 1, get: 1, put: 1, delete: 1 });
  });

  it('costs a bounded number of operations for a name delivered many times before', async () => {
    const { inbox, store } = await setup();
    for (let round = 0; round < 12; round++) {
      await inbox.post('s1', { name: 'status.md', content: `${round}` });
      await inbox.consume('s1', { turn: round, sessionExists: true });
    }
    await inbox.post('s1', { name: 'status.md', content: 'last' });
    store.reset();
    const result = await inbox.consume('s1', { turn: 99, sessionExists: true });
    expect(result.delivered).toMatchObject([{ stored_as: 'status.12.md', content: 'last' }]);
    // list inbox, get, put (taken), head, list slots, put, delete. The listing carried metadata.
    expect(operations(store)).toEqual({ list: 2, get: 1, put: 2, head: 1, delete: 1 });
  });
});

describe('posting', () => {
  it.each(['', '.hidden', 'a/b', 'a b', 'x'.repeat(201), 'caf\u00e9', '..'])('refuses the name %j', async (name) => {
    const { inbox } = await setup();
    await expect(inbox.post('s1', { name, content: 'x' })).rejects.toMatchObject({ code: 'invalid_request' });
  });

  it.each(['abort', 'x'.repeat(200), 'A-b_c.9', '0', 'a.', '-'])('accepts the name %j', async (name) => {
    const { inbox } = await setup();
    const posted = await inbox.post('s1', { name, content: 'x' });
    expect(posted.name).toBe(name);
    expect((await inbox.listPending('s1')).map((notice) => notice.name)).toEqual([name]);
  });

  it('limits content by UTF-8 bytes', async () => {
    const { inbox } = await setup({ maxNoticeBytes: 10 });
    await inbox.post('s1', { name: 'ok', content: '\u00e9'.repeat(5) });
    await expect(inbox.post('s1', { name: 'big', content: `${'\u00e9'.repeat(5)}x` })).rejects.toMatchObject({
      code: 'payload_too_large',
    });
  });

  it('records the service clock as posted_at', async () => {
    const { inbox } = await setup({ now: () => new Date('2030-05-06T07:08:09.010Z') });
    expect(await inbox.post('s1', { name: 'n', content: 'x' })).toEqual({
      name: 'n',
      posted_at: '2030-05-06T07:08:09.010Z',
    });
    expect(await inbox.listPending('s1')).toEqual([{ name: 'n', size: 1, posted_at: '2030-05-06T07:08:09.010Z' }]);
    const { delivered } = await inbox.consume('s1', { turn: 1 });
    expect(delivered[0]!.posted_at).toBe('2030-05-06T07:08:09.010Z');
    expect(await inbox.listDelivered('s1')).toEqual([
      {
        name: 'n',
        stored_as: 'n',
        posted_at: '2030-05-06T07:08:09.010Z',
        delivered_at: '2030-05-06T07:08:09.010Z',
        turn: 1,
      },
    ]);
  });

  it('refuses a malformed session id', async () => {
    const { inbox } = await setup();
    await expect(inbox.post('../x', { content: 'x' })).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(inbox.consume('a/b', { turn: 1 })).rejects.toMatchObject({ code: 'invalid_request' });
  });
});

describe('consume order (properties)', () => {
  const piece = fc.constantFrom('a', 'b', 'A', '1', '10', '2', '_', '-', '.', 'abort', '\u00e9');
  const name = fc.array(piece, { minLength: 1, maxLength: 3 }).map((parts) => parts.join(''));

  it('delivers exactly the notices before `abort`, in byte order, and leaves the rest', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uniqueArray(name, { minLength: 1, maxLength: 8 }), async (names) => {
        const { inbox, memory, prefix } = await setup();
        for (const each of names) await memory.put(`${prefix}inbox/${each}`, `content ${each}`);
        const notices = names.filter((each) => !each.startsWith('.')).sort(compareBytes);
        const abortAt = notices.indexOf('abort');
        const before = abortAt < 0 ? notices : notices.slice(0, abortAt);
        const after = abortAt < 0 ? [] : notices.slice(abortAt + 1);

        expect((await inbox.peek('s1')).map((notice) => notice.name)).toEqual(before);
        const result = await inbox.consume('s1', { turn: 1 });
        expect(result.delivered.map((notice) => notice.name)).toEqual(before);
        expect(result.delivered.every((notice) => notice.content === `content ${notice.name}`)).toBe(true);
        expect(result.abort?.reason).toBe(abortAt < 0 ? undefined : 'content abort');
        expect((await inbox.listPending('s1')).map((notice) => notice.name)).toEqual(after);
        const dotted = names.filter((each) => each.startsWith('.'));
        for (const each of dotted) expect(await memory.head(`${prefix}inbox/${each}`)).not.toBeNull();
      }),
      { numRuns: 100 },
    );
  });
});

describe('concurrent consumers (property)', () => {
  it('deliver every notice exactly once under any interleaving, with unique stored names', async () => {
    const name = fc.constantFrom('a.md', 'a.1.md', 'b', 'b.1', 'c.d.md', 'z');
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(name, { minLength: 1, maxLength: 5 }),
        fc.uniqueArray(name, { minLength: 1, maxLength: 4 }),
        fc.integer({ min: 3, max: 8 }),
        async (names, deliveredBefore, consumers) => {
          const memory = new MemoryStore();
          const inbox = new Inbox(new JitteryStore(memory, 3), {
            keyPrefix: 'p/',
            log: () => {},
            sessionExists: sessionExistsIn(memory, 'p/'),
          });
          await memory.put(sessionConfigKey('p/', 's1'), '{}');
          for (const each of deliveredBefore) await inbox.post('s1', { name: each, content: `old ${each}` });
          await inbox.consume('s1', { turn: 1 });
          for (const each of names) await inbox.post('s1', { name: each, content: `new ${each}` });
          const results = await Promise.all(
            Array.from({ length: consumers }, (_, index) => inbox.consume('s1', { turn: 2 + index })),
          );
          const contents = results.flatMap((result) => result.delivered.map((notice) => notice.content));
          expect(contents.sort()).toEqual(names.map((each) => `new ${each}`).sort());
          const records = await inbox.listDelivered('s1');
          expect(records).toHaveLength(names.length + deliveredBefore.length);
          expect(await inbox.listPending('s1')).toEqual([]);
        },
      ),
      { numRuns: 30 },
    );
  });
});

describe('delivery records', () => {
  it('lists an object put into inbox_removed/ by something else with its upload time and no turn', async () => {
    const { inbox, memory, prefix } = await setup();
    await memory.put(`${prefix}inbox_removed/manual.txt`, 'x');
    await memory.put(`${prefix}inbox_removed/nested/ignored`, 'x');
    const uploaded = (await memory.head(`${prefix}inbox_removed/manual.txt`))!.uploaded.toISOString();
    expect(await inbox.listDelivered('s1')).toEqual([
      { name: 'manual.txt', stored_as: 'manual.txt', posted_at: uploaded, delivered_at: uploaded, turn: null },
    ]);
  });

  it('withdraws a notice written straight into the bucket under a name the API would refuse', async () => {
    const { inbox, memory, prefix } = await setup();
    await memory.put(`${prefix}inbox/my notice.md`, 'x');
    await inbox.withdraw('s1', 'my notice.md');
    expect(await inbox.listPending('s1')).toEqual([]);
    await expect(inbox.withdraw('s1', '.hidden')).rejects.toMatchObject({ code: 'not_found' });
  });
});

describe('notice names', () => {
  it.each([
    ['a_msg.md', 1, 'a_msg.1.md'],
    ['a_msg.md', 12, 'a_msg.12.md'],
    ['name', 1, 'name.1'],
    ['a.b.md', 2, 'a.b.2.md'],
    ['abort', 0, 'abort'],
  ])('slot of %j number %i is %j', (name, slot, expected) => {
    expect(slotName(name, slot)).toBe(expected);
    expect(parseSlot(name, expected)).toBe(slot);
  });

  it('parses back exactly the slots it makes', () => {
    const name = fc.stringMatching(/^[A-Za-z0-9_-][A-Za-z0-9._-]{0,12}$/);
    fc.assert(
      fc.property(name, fc.nat(5000), (each, slot) => {
        expect(parseSlot(each, slotName(each, slot))).toBe(slot);
        const [stem, extension] = splitExtension(each);
        expect(stem + extension).toBe(each);
        expect(extension.slice(1)).not.toContain('.');
      }),
      { numRuns: 200 },
    );
  });

  it('generates strictly increasing names for any clock, even one that stands still or steps back', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 4_000_000_000_000 }), { minLength: 1, maxLength: 50 }),
        (times) => {
          const generate = createNameGenerator();
          const names = times.map((time) => generate(new Date(time)));
          for (let index = 1; index < names.length; index++)
            expect(compareBytes(names[index - 1]!, names[index]!)).toBeLessThan(0);
          for (const each of names) expect(each).toMatch(/^[0-9]{15}-[0-9]{4}-[0-9a-f]{8}$/);
        },
      ),
      { numRuns: 200 },
    );
  });
});

function _countBy(values: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1;
  return counts;
}

describe('tookNothing', () => {
  it('tells whether turns closed by someone else consumed notices, by their delivery records', async () => {
    const inbox = new Inbox(new MemoryStore(), { log: () => {}, sessionExists: async () => true });
    const since = new Date(Date.now() - 1000).toISOString();
    await inbox.post('s1', { name: 'a', content: 'A' });
    expect((await inbox.consume('s1', { turn: 5 })).delivered).toHaveLength(1);
    expect(await inbox.tookNothing('s1', [{ turn: 5, since }])).toBe(false);
    expect(
      await inbox.tookNothing('s1', [
        { turn: 6, since },
        { turn: 5, since },
      ]),
    ).toBe(false);
    expect(await inbox.tookNothing('s1', [{ turn: 6, since }])).toBe(true);
    // A record written before the turn's claim is not its.
    expect(await inbox.tookNothing('s1', [{ turn: 5, since: new Date(Date.now() + 60_000).toISOString() }])).toBe(true);
    expect(await inbox.tookNothing('s1', [])).toBe(true);
  });
});

describe('taking over the notices of closed turns', () => {
  it('a notice whose taker died between its decision key and its rewrite goes to the next turn, once', async () => {
    const { inbox, store, prefix, failOn, heal } = await setup();
    await inbox.post('s1', { name: 'note.md', content: 'once' });
    const since = new Date(Date.now() - 1000).toISOString();
    const taken = await inbox.consume('s1', { turn: 8 });
    expect(taken.delivered.map((notice) => notice.name)).toEqual(['note.md']);
    // Turn 9 takes turn 8's notice over: its decision key lands, its rewrite fails, then it dies
    // (what it took no model sees).
    failOn('put', `${prefix}inbox_removed/note.md`);
    await inbox.recover('s1', [{ turn: 8, since }], 9);
    heal();
    expect((await store.head(`${prefix}inbox_removed/note.md`))?.metadata.turn).toBe('8');
    // Turn 10 carries both closed turns: it takes the notice through a key after turn 9's.
    const lost = [
      { turn: 8, since },
      { turn: 9, since },
    ];
    const [first, second] = await Promise.all([inbox.recover('s1', lost, 10), inbox.recover('s1', lost, 11)]);
    expect([...first, ...second].map((notice) => notice.content)).toEqual(['once']);
    // The closed turn's owner giving it back now finds it taken.
    await inbox.giveBack('s1', taken.delivered, 8);
    expect(await inbox.listPending('s1')).toEqual([]);
  });
});

import { describe, expect, it } from 'vitest';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { Inbox, type InboxLogEvent } from '../../lib/inbox/index.ts';
import type { InboxOptions } from '../../lib/inbox/types.ts';
import { sessionConfigKey, sessionPrefix } from '../../lib/session/keys.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { HeldStore } from '../support/held-store.ts';

/**
 * The inbox semantics every ObjectStore must support, run against the memory store, S3 on
 * fauxqs and R2 in workerd. `writeDirect` writes a notice the way an outside client would
 * (a plain S3 PutObject or R2 binding put, no metadata), bypassing the ObjectStore.
 */
export interface InboxSuiteTarget {
  store: ObjectStore;
  writeDirect: (key: string, body: string | Uint8Array) => Promise<void>;
}

let counter = 0;

export function inboxSemanticsSuite(label: string, target: () => InboxSuiteTarget): void {
  describe(`inbox semantics on ${label}`, () => {
    const runId = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;

    async function setup(
      options: { createSession?: boolean } & Pick<InboxOptions, 'maxNoticesPerTurn' | 'maxPendingNotices'> = {},
    ) {
      const { store, writeDirect } = target();
      counter += 1;
      const keyPrefix = `inbox-${runId}-${counter}/`;
      const sessionId = 's1';
      const events: InboxLogEvent[] = [];
      const inbox = new Inbox(store, {
        keyPrefix,
        sessionExists: sessionExistsIn(store, keyPrefix),
        log: (event) => events.push(event),
        ...(options.maxNoticesPerTurn ? { maxNoticesPerTurn: options.maxNoticesPerTurn } : {}),
        ...(options.maxPendingNotices ? { maxPendingNotices: options.maxPendingNotices } : {}),
      });
      if (options.createSession !== false)
        await store.put(sessionConfigKey(keyPrefix, sessionId), '{}', { onlyIfAbsent: true });
      const prefix = sessionPrefix(keyPrefix, sessionId);
      const allKeys = async () => {
        const keys: string[] = [];
        let cursor: string | undefined;
        do {
          const page = await store.list(keyPrefix, cursor === undefined ? {} : { cursor });
          keys.push(...page.objects.map((object) => object.key));
          cursor = page.truncated ? page.cursor : undefined;
        } while (cursor !== undefined);
        return keys;
      };
      return { store, writeDirect, keyPrefix, sessionId, prefix, inbox, events, allKeys };
    }

    it('delivers notices once, in byte order of names, and records them', async () => {
      const { inbox, sessionId, prefix, store } = await setup();
      for (const name of ['a_x', '2_x', '10_x']) await inbox.post(sessionId, { name, content: `content of ${name}` });
      const pending = await inbox.listPending(sessionId);
      expect(pending.map((notice) => notice.name)).toEqual(['10_x', '2_x', 'a_x']);
      expect(pending[0]!.size).toBe('content of 10_x'.length);

      const result = await inbox.consume(sessionId, { turn: 3 });
      expect(result.abort).toBeUndefined();
      expect(result.delivered.map((notice) => [notice.name, notice.stored_as, notice.content])).toEqual([
        ['10_x', '10_x', 'content of 10_x'],
        ['2_x', '2_x', 'content of 2_x'],
        ['a_x', 'a_x', 'content of a_x'],
      ]);
      expect(await inbox.listPending(sessionId)).toEqual([]);
      expect(await inbox.consume(sessionId, { turn: 4 })).toEqual({ delivered: [] });

      const delivered = await inbox.listDelivered(sessionId);
      expect(delivered.map((record) => [record.name, record.stored_as, record.turn])).toEqual([
        ['10_x', '10_x', 3],
        ['2_x', '2_x', 3],
        ['a_x', 'a_x', 3],
      ]);
      const posted = pending.find((notice) => notice.name === '2_x')!;
      expect(delivered[1]!.posted_at).toBe(posted.posted_at);
      expect(delivered[1]!.posted_at).toBe(result.delivered[1]!.posted_at);
      expect(Date.parse(delivered[1]!.delivered_at)).toBeGreaterThanOrEqual(Date.parse(posted.posted_at));
      const copy = await store.get(`${prefix}inbox_removed/2_x`);
      expect(new TextDecoder().decode(copy!.body)).toBe('content of 2_x');
    });

    it('consumes a notice written straight into the bucket, with its upload time as posted_at', async () => {
      const { inbox, sessionId, prefix, writeDirect, store } = await setup();
      await writeDirect(`${prefix}inbox/0001-budget.md`, 'Budget left: 2 USD');
      const uploaded = (await store.head(`${prefix}inbox/0001-budget.md`))!.uploaded.toISOString();
      const pending = await inbox.listPending(sessionId);
      expect(pending).toEqual([{ name: '0001-budget.md', size: 18, posted_at: uploaded }]);
      expect(await inbox.peek(sessionId)).toEqual([{ name: '0001-budget.md', content: 'Budget left: 2 USD' }]);

      const result = await inbox.consume(sessionId, { turn: 1 });
      expect(result.delivered).toEqual([
        { name: '0001-budget.md', stored_as: '0001-budget.md', content: 'Budget left: 2 USD', posted_at: uploaded },
      ]);
      const [record] = await inbox.listDelivered(sessionId);
      expect(record).toMatchObject({
        name: '0001-budget.md',
        stored_as: '0001-budget.md',
        posted_at: uploaded,
        turn: 1,
      });
      expect(await store.head(`${prefix}inbox/0001-budget.md`)).toBeNull();
    });

    it('delivers a notice whose name is not ASCII and records that name', async () => {
      const { inbox, sessionId, prefix, writeDirect } = await setup();
      await writeDirect(`${prefix}inbox/caf\u00e9 notice.md`, 'na\u00efve content');
      await inbox.consume(sessionId, { turn: 1 });
      await writeDirect(`${prefix}inbox/caf\u00e9 notice.md`, 'second');
      const result = await inbox.consume(sessionId, { turn: 2 });
      expect(result.delivered).toMatchObject([
        { name: 'caf\u00e9 notice.md', stored_as: 'caf\u00e9 notice.1.md', content: 'second' },
      ]);
      expect(
        (await inbox.listDelivered(sessionId)).map((record) => [record.name, record.stored_as, record.turn]),
      ).toEqual([
        ['caf\u00e9 notice.md', 'caf\u00e9 notice.1.md', 2],
        ['caf\u00e9 notice.md', 'caf\u00e9 notice.md', 1],
      ]);
    });

    it('ignores dot-names and keys with a further "/" and leaves them in place', async () => {
      const { inbox, sessionId, prefix, writeDirect, store } = await setup();
      await writeDirect(`${prefix}inbox/.hidden`, 'hidden');
      await writeDirect(`${prefix}inbox/sub/nested.md`, 'nested');
      await writeDirect(`${prefix}inbox/visible.md`, 'visible');
      expect((await inbox.listPending(sessionId)).map((notice) => notice.name)).toEqual(['visible.md']);
      const result = await inbox.consume(sessionId, { turn: 1 });
      expect(result.delivered.map((notice) => notice.name)).toEqual(['visible.md']);
      expect(await store.head(`${prefix}inbox/.hidden`)).not.toBeNull();
      expect(await store.head(`${prefix}inbox/sub/nested.md`)).not.toBeNull();
      expect(await inbox.consume(sessionId, { turn: 2 })).toEqual({ delivered: [] });
    });

    it('gives a name delivered before the next free .n slot before the last extension', async () => {
      const { inbox, sessionId, prefix, store } = await setup();
      for (let round = 0; round < 3; round++) {
        await inbox.post(sessionId, { name: 'a_msg.md', content: `msg ${round}` });
        await inbox.post(sessionId, { name: 'name', content: `name ${round}` });
        await inbox.post(sessionId, { name: 'a.b.md', content: `ab ${round}` });
        const result = await inbox.consume(sessionId, { turn: round + 1 });
        expect(result.delivered.map((notice) => [notice.name, notice.content])).toEqual([
          ['a.b.md', `ab ${round}`],
          ['a_msg.md', `msg ${round}`],
          ['name', `name ${round}`],
        ]);
      }
      const delivered = await inbox.listDelivered(sessionId);
      expect(delivered.map((record) => [record.stored_as, record.name, record.turn])).toEqual([
        ['a.b.1.md', 'a.b.md', 2],
        ['a.b.2.md', 'a.b.md', 3],
        ['a.b.md', 'a.b.md', 1],
        ['a_msg.1.md', 'a_msg.md', 2],
        ['a_msg.2.md', 'a_msg.md', 3],
        ['a_msg.md', 'a_msg.md', 1],
        ['name', 'name', 1],
        ['name.1', 'name', 2],
        ['name.2', 'name', 3],
      ]);
      // No earlier delivery was overwritten.
      const first = await store.get(`${prefix}inbox_removed/a_msg.md`);
      expect(new TextDecoder().decode(first!.body)).toBe('msg 0');
    });

    it('aborts at `abort`: earlier notices delivered, later ones stay, its content is only the reason', async () => {
      const { inbox, sessionId, prefix, store } = await setup();
      for (const name of ['Abort', 'a_first', 'abort', 'abort-now', 'abort.txt', 'b_later']) {
        await inbox.post(sessionId, { name, content: name === 'abort' ? '  budget exhausted \n' : `text ${name}` });
      }
      const result = await inbox.consume(sessionId, { turn: 5 });
      expect(result.delivered.map((notice) => notice.name)).toEqual(['Abort', 'a_first']);
      expect(result.abort).toEqual({
        name: 'abort',
        stored_as: 'abort',
        reason: 'budget exhausted',
        posted_at: expect.any(String),
      });
      expect(result.delivered.some((notice) => notice.content.includes('budget'))).toBe(false);
      expect((await inbox.listPending(sessionId)).map((notice) => notice.name)).toEqual([
        'abort-now',
        'abort.txt',
        'b_later',
      ]);
      expect(await store.head(`${prefix}inbox_removed/abort`)).not.toBeNull();

      const next = await inbox.consume(sessionId, { turn: 6 });
      expect(next.abort).toBeUndefined();
      expect(next.delivered.map((notice) => [notice.name, notice.content])).toEqual([
        ['abort-now', 'text abort-now'],
        ['abort.txt', 'text abort.txt'],
        ['b_later', 'text b_later'],
      ]);
    });

    it.each([
      ['', 'aborted by inbox notice abort'],
      [' \n\t ', 'aborted by inbox notice abort'],
      ['stop', 'stop'],
    ])('an abort with content %j gives the reason %j', async (content, reason) => {
      const { inbox, sessionId } = await setup();
      const posted = await inbox.post(sessionId, { name: 'abort', content });
      const result = await inbox.consume(sessionId, { turn: 1 });
      expect(result).toEqual({
        delivered: [],
        abort: { name: 'abort', stored_as: 'abort', reason, posted_at: posted.posted_at },
      });
      expect(await inbox.consume(sessionId, { turn: 2 })).toEqual({ delivered: [] });
    });

    it('delivers every notice exactly once across 8 concurrent consumers', async () => {
      const { inbox, sessionId, store, prefix } = await setup();
      const names = Array.from({ length: 20 }, (_, index) => `n${String(index).padStart(2, '0')}.md`);
      // Half the names were delivered before, so their claims take the `.1` slot path.
      for (const name of names.slice(0, 10)) await inbox.post(sessionId, { name, content: `old ${name}` });
      await inbox.consume(sessionId, { turn: 1 });
      await Promise.all(names.map((name) => inbox.post(sessionId, { name, content: `new ${name}` })));

      const results = await Promise.all(
        Array.from({ length: 8 }, (_, index) => inbox.consume(sessionId, { turn: 10 + index })),
      );
      const delivered = results.flatMap((result) => result.delivered);
      expect(delivered.map((notice) => notice.content).sort()).toEqual(names.map((name) => `new ${name}`));
      for (const notice of delivered) {
        expect(notice.stored_as).toBe(
          names.indexOf(notice.name) < 10 ? notice.name.replace('.md', '.1.md') : notice.name,
        );
      }
      expect(await inbox.listPending(sessionId)).toEqual([]);
      const records = await inbox.listDelivered(sessionId);
      expect(records).toHaveLength(30);
      expect((await store.list(`${prefix}inbox/`)).objects).toEqual([]);
    });

    it('never delivers a notice twice when consumers race on a name with earlier deliveries', async () => {
      const { inbox, sessionId } = await setup();
      for (let round = 0; round < 3; round++) {
        await inbox.post(sessionId, { name: 'status.md', content: `status ${round}` });
        await inbox.post(sessionId, { name: 'status.1.md', content: `literal ${round}` });
        const results = await Promise.all(Array.from({ length: 4 }, () => inbox.consume(sessionId, { turn: round })));
        const contents = results.flatMap((result) => result.delivered.map((notice) => notice.content)).sort();
        expect(contents).toEqual([`literal ${round}`, `status ${round}`]);
      }
      const records = await inbox.listDelivered(sessionId);
      expect(records).toHaveLength(6);
      expect(new Set(records.map((record) => record.stored_as)).size).toBe(6);
    });

    it('sets a body that is not UTF-8 aside in inbox_unreadable/, logs, lists it, delivers the rest', async () => {
      const { inbox, sessionId, prefix, writeDirect, store, events } = await setup();
      const bad = new Uint8Array([0x61, 0xff, 0xfe, 0x62]);
      await writeDirect(`${prefix}inbox/a_ok`, 'fine');
      await writeDirect(`${prefix}inbox/b_bad`, bad);
      await writeDirect(`${prefix}inbox/c_ok`, 'also fine');
      expect(await inbox.peek(sessionId)).toEqual([
        { name: 'a_ok', content: 'fine' },
        { name: 'c_ok', content: 'also fine' },
      ]);
      const result = await inbox.consume(sessionId, { turn: 1 });
      expect(result.delivered.map((notice) => notice.name)).toEqual(['a_ok', 'c_ok']);
      expect(await store.head(`${prefix}inbox/b_bad`)).toBeNull();
      expect((await store.get(`${prefix}inbox_unreadable/b_bad`))?.body).toEqual(bad);
      expect(events.filter((event) => event.level === 'warn')).toMatchObject([
        {
          key: `${prefix}inbox/b_bad`,
          message: 'notice set aside as inbox_unreadable/b_bad: content is not valid UTF-8',
        },
      ]);
      expect(await inbox.unreadablePage(sessionId)).toEqual({
        unreadable: [
          {
            name: 'b_bad',
            stored_as: 'b_bad',
            size: 4,
            reason: 'not_utf8',
            posted_at: expect.any(String),
            set_aside_at: expect.any(String),
            turn: 1,
          },
        ],
        has_more: false,
        next_after: null,
      });
      expect(await inbox.listPending(sessionId)).toEqual([]);
      expect(await inbox.listDelivered(sessionId)).toHaveLength(2);
      expect(await inbox.peek(sessionId)).toEqual([]);
    });

    it('is a no-op that writes nothing without a session or without an inbox', async () => {
      const missing = await setup({ createSession: false });
      await missing.writeDirect(`${missing.prefix}inbox/orphan`, 'no session');
      const before = await missing.allKeys();
      expect(await missing.inbox.consume(missing.sessionId, { turn: 1 })).toEqual({ delivered: [] });
      expect(await missing.inbox.consume('other', { turn: 1 })).toEqual({ delivered: [] });
      expect(await missing.allKeys()).toEqual(before);

      const empty = await setup();
      const emptyBefore = await empty.allKeys();
      expect(await empty.inbox.consume(empty.sessionId, { turn: 1 })).toEqual({ delivered: [] });
      expect(await empty.inbox.peek(empty.sessionId)).toEqual([]);
      expect(await empty.allKeys()).toEqual(emptyBefore);
    });

    it('answers not_found for a missing session on post, list, withdraw, delivered and unreadable', async () => {
      const { inbox } = await setup({ createSession: false });
      await expect(inbox.post('s1', { content: 'x' })).rejects.toMatchObject({ code: 'not_found' });
      await expect(inbox.listPending('s1')).rejects.toMatchObject({ code: 'not_found' });
      await expect(inbox.withdraw('s1', 'x')).rejects.toMatchObject({ code: 'not_found' });
      await expect(inbox.listDelivered('s1')).rejects.toMatchObject({ code: 'not_found' });
      await expect(inbox.unreadablePage('s1')).rejects.toMatchObject({ code: 'not_found' });
    });

    it('refuses a taken pending name, withdraws, and lets a delivered name be posted again', async () => {
      const { inbox, sessionId } = await setup();
      await inbox.post(sessionId, { name: 'note', content: 'one' });
      await expect(inbox.post(sessionId, { name: 'note', content: 'two' })).rejects.toMatchObject({
        code: 'name_taken',
      });
      await inbox.withdraw(sessionId, 'note');
      await expect(inbox.withdraw(sessionId, 'note')).rejects.toMatchObject({ code: 'not_found' });
      expect(await inbox.consume(sessionId, { turn: 1 })).toEqual({ delivered: [] });
      await inbox.post(sessionId, { name: 'note', content: 'three' });
      await inbox.consume(sessionId, { turn: 2 });
      await inbox.post(sessionId, { name: 'note', content: 'four' });
      expect((await inbox.listPending(sessionId)).map((notice) => notice.name)).toEqual(['note']);
    });

    it('generates names that sort after every earlier one', async () => {
      const { inbox, sessionId } = await setup();
      const names: string[] = [];
      for (let index = 0; index < 5; index++) names.push((await inbox.post(sessionId, { content: `n${index}` })).name);
      expect([...names].sort()).toEqual(names);
      expect(new Set(names).size).toBe(5);
      const result = await inbox.consume(sessionId, { turn: 1 });
      expect(result.delivered.map((notice) => notice.content)).toEqual(['n0', 'n1', 'n2', 'n3', 'n4']);
    });

    it('a notice a stalled taker took over goes to the turn that took it over after that taker, once', async () => {
      const { store, sessionId, keyPrefix, prefix } = await setup();
      const held = new HeldStore(store);
      const inbox = new Inbox(held, { keyPrefix, sessionExists: sessionExistsIn(held, keyPrefix) });
      await inbox.post(sessionId, { name: 'note.md', content: 'once' });
      const since = new Date(Date.now() - 60_000).toISOString();
      await inbox.consume(sessionId, { turn: 8 });
      // Turn 8 was closed by someone else; turn 9 takes its notice over and stalls before its
      // rewrite, its decision key created. Then turn 9 is closed too, still running.
      const rewrite = held.hold(
        ({ operation, keys, options }) =>
          operation === 'put' && keys[0] === `${prefix}inbox_removed/note.md` && options?.ifMatch !== undefined,
      );
      const stalled = inbox.recover(sessionId, [{ turn: 8, since }], 9);
      await rewrite.reached;
      // Turn 10 carries both closed turns: it takes the notice through the key after turn 9's.
      const lost = [
        { turn: 8, since },
        { turn: 9, since },
      ];
      const taken = await inbox.recover(sessionId, lost, 10);
      expect(taken.map((notice) => notice.content)).toEqual(['once']);
      rewrite.release();
      // Turn 9 goes on: it finds the notice taken and has nothing to give back at its close.
      const late = await stalled;
      await inbox.giveBack(sessionId, late, 9);
      expect(await inbox.listPending(sessionId)).toEqual([]);
      expect(late).toEqual([]);
      expect((await inbox.listDelivered(sessionId)).map((notice) => notice.turn)).toEqual([10]);
    });

    it('peeks without side effects and stops before abort', async () => {
      const { inbox, sessionId, allKeys } = await setup();
      await inbox.post(sessionId, { name: 'a', content: 'first' });
      await inbox.post(sessionId, { name: 'abort', content: 'stop' });
      await inbox.post(sessionId, { name: 'b', content: 'after' });
      const before = await allKeys();
      expect(await inbox.peek(sessionId)).toEqual([{ name: 'a', content: 'first' }]);
      expect(await allKeys()).toEqual(before);
    });

    const names = (notices: { name: string }[]) => notices.map((notice) => notice.name);

    it('takes at most maxNoticesPerTurn notices a turn, oldest name first; peek shows those', async () => {
      const { inbox, sessionId } = await setup({ maxNoticesPerTurn: 3 });
      for (let index = 0; index < 5; index++) await inbox.post(sessionId, { content: `notice ${index}` });
      const posted = names(await inbox.listPending(sessionId));
      expect(names(await inbox.peek(sessionId))).toEqual(posted.slice(0, 3));
      expect(names((await inbox.consume(sessionId, { turn: 1 })).delivered)).toEqual(posted.slice(0, 3));
      expect(names(await inbox.listPending(sessionId))).toEqual(posted.slice(3));
      expect(names(await inbox.peek(sessionId, 1))).toEqual(posted.slice(3, 4));
      expect(names((await inbox.consume(sessionId, { turn: 2, room: 1 })).delivered)).toEqual(posted.slice(3, 4));
      expect(names((await inbox.consume(sessionId, { turn: 3 })).delivered)).toEqual(posted.slice(4));
    });

    it('stops a turn at `abort` when more than a turn takes are pending, taking the first before it', async () => {
      const { inbox, sessionId } = await setup({ maxNoticesPerTurn: 2 });
      for (const name of ['1', '2', '3', '4', 'abort', 'b']) await inbox.post(sessionId, { name, content: name });
      expect(names(await inbox.peek(sessionId))).toEqual(['1', '2']);
      const aborted = await inbox.consume(sessionId, { turn: 1 });
      expect(aborted.abort).toMatchObject({ name: 'abort', reason: 'abort' });
      expect(names(aborted.delivered)).toEqual(['1', '2']);
      expect(names(await inbox.listPending(sessionId))).toEqual(['3', '4', 'b']);
      // With no room left (a turn delivering notices earlier turns took), the abort still stops it.
      await inbox.post(sessionId, { name: 'abort', content: 'again' });
      const full = await inbox.consume(sessionId, { turn: 2, room: 0 });
      expect(full).toMatchObject({ delivered: [], abort: { reason: 'again' } });
      expect(names(await inbox.listPending(sessionId))).toEqual(['3', '4', 'b']);
    });

    it('refuses a post when maxPendingNotices are pending, storing nothing, but for `abort`', async () => {
      const { inbox, sessionId } = await setup({ maxPendingNotices: 3, maxNoticesPerTurn: 2 });
      for (const name of ['a', 'b', 'c']) await inbox.post(sessionId, { name, content: name });
      await expect(inbox.post(sessionId, { name: 'd', content: 'd' })).rejects.toMatchObject({
        code: 'inbox_full',
        details: { limit: 3 },
      });
      await expect(inbox.post(sessionId, { content: 'generated' })).rejects.toMatchObject({ code: 'inbox_full' });
      // A pending name is refused as taken, as when there is room.
      await expect(inbox.post(sessionId, { name: 'b', content: 'again' })).rejects.toMatchObject({
        code: 'name_taken',
      });
      expect(names(await inbox.listPending(sessionId))).toEqual(['a', 'b', 'c']);
      await inbox.post(sessionId, { name: 'abort', content: 'stop' });
      expect(names(await inbox.listPending(sessionId))).toEqual(['a', 'abort', 'b', 'c']);
      await inbox.withdraw(sessionId, 'abort');
      await inbox.consume(sessionId, { turn: 1 });
      await inbox.post(sessionId, { name: 'a', content: 'a delivered name, posted again' });
      expect(names(await inbox.listPending(sessionId))).toEqual(['a', 'c']);
    });

    it('lists pending and delivered notices in pages after a name', async () => {
      const { inbox, sessionId, store, prefix } = await setup({ maxNoticesPerTurn: 4 });
      for (const name of ['a', 'b', 'c', 'd', 'e']) await inbox.post(sessionId, { name, content: name });
      const first = await inbox.pendingPage(sessionId, { limit: 2 });
      expect(first).toMatchObject({ has_more: true, next_after: 'b' });
      expect(names(first.pending)).toEqual(['a', 'b']);
      const second = await inbox.pendingPage(sessionId, { after: 'b', limit: 2 });
      expect(names(second.pending)).toEqual(['c', 'd']);
      expect(await inbox.pendingPage(sessionId, { after: 'd', limit: 2 })).toMatchObject({
        pending: [{ name: 'e', size: 1 }],
        has_more: false,
        next_after: null,
      });
      expect(names((await inbox.pendingPage(sessionId, { after: 'bb' })).pending)).toEqual(['c', 'd', 'e']);

      await inbox.consume(sessionId, { turn: 7 });
      // A takeover marker under a record is no record.
      await store.put(`${prefix}inbox_removed/b/taken-7-0`, 'x');
      const delivered = await inbox.deliveredPage(sessionId, { limit: 3 });
      expect(delivered).toMatchObject({ has_more: true, next_after: 'c' });
      expect(delivered.delivered.map((record) => [record.stored_as, record.turn])).toEqual([
        ['a', 7],
        ['b', 7],
        ['c', 7],
      ]);
      expect(await inbox.deliveredPage(sessionId, { after: 'c', limit: 3 })).toMatchObject({
        delivered: [{ stored_as: 'd', turn: 7 }],
        has_more: false,
        next_after: null,
      });
    });
  });
}

import { describe, expect, it } from 'vitest';
import { Inbox } from '../../lib/inbox/index.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { sessionConfigKey, sessionPrefix } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { HeldStore } from '../support/held-store.ts';

const keyPrefix = 'p/';
const since = new Date(Date.now() - 60_000).toISOString();
const inboxOn = (store: ObjectStore) =>
  new Inbox(store, { keyPrefix, sessionExists: sessionExistsIn(store, keyPrefix) });

/** A memory store holding turn 8's delivery record of `note.md` ('once'). */
async function consumedByTurn8() {
  const memory = new MemoryStore();
  await memory.put(sessionConfigKey(keyPrefix, 's1'), '{}');
  const inbox = inboxOn(memory);
  await inbox.post('s1', { name: 'note.md', content: 'once' });
  await inbox.consume('s1', { turn: 8 });
  return { memory, inbox, record: `${sessionPrefix(keyPrefix, 's1')}inbox_removed/note.md` };
}

/**
 * A store on which the process dies at its `k`th call once armed: that call fails (after it
 * landed when `after`), and so does every later one.
 */
function diesAtCall(store: ObjectStore, k: number, after: boolean) {
  const faulty = new FaultyStore(store);
  let calls: number | undefined;
  const counted = () => calls !== undefined && ++calls === k;
  faulty.failWhen(counted, { after, times: 1 });
  faulty.failWhen(() => calls !== undefined && calls >= k);
  return { store: faulty, arm: () => (calls = 0), died: () => faulty.injected > 0 };
}

describe('a turn taking a closed turn’s notice over that dies at any storage call', () => {
  it.each([false, true])('leaves it to one of the turns after it (the call landed: %s)', async (after) => {
    for (let k = 1; ; k++) {
      const { memory, inbox } = await consumedByTurn8();
      // Turn 9 takes turn 8's notice over and dies at its kth storage call.
      const dying = diesAtCall(memory, k, after);
      dying.arm();
      const taken = await inboxOn(dying.store)
        .recover('s1', [{ turn: 8, since }], 9)
        .catch(() => []);
      const lost = [
        { turn: 8, since },
        { turn: 9, since },
      ];
      const [first, second] = await Promise.all([inbox.recover('s1', lost, 10), inbox.recover('s1', lost, 11)]);
      expect(
        [...first, ...second].map((notice) => notice.content),
        `dies at call ${k}`,
      ).toEqual(['once']);
      if (dying.died()) continue;
      // Turn 9 did not die: it was closed still running, and gives back what it took.
      expect(taken.map((notice) => notice.content)).toEqual(['once']);
      await inbox.giveBack('s1', taken, 9);
      expect(await inbox.listPending('s1')).toEqual([]);
      expect(k).toBe(6); // past its five calls
      return;
    }
  });

  it.each([false, true])(
    'leaves it to the turn that took it over while it stalled before its rewrite (the call landed: %s)',
    async (after) => {
      for (let k = 1; ; k++) {
        const { memory, inbox, record } = await consumedByTurn8();
        const dying = diesAtCall(memory, k, after);
        const held = new HeldStore(dying.store);
        const rewrite = held.hold(
          ({ operation, keys, options }) => operation === 'put' && keys[0] === record && !!options?.ifMatch,
        );
        const stalled = inboxOn(held).recover('s1', [{ turn: 8, since }], 9);
        await rewrite.reached;
        const lost = [
          { turn: 8, since },
          { turn: 9, since },
        ];
        expect((await inbox.recover('s1', lost, 10)).map((notice) => notice.content)).toEqual(['once']);
        // Turn 9 goes on, and dies at its kth storage call from its rewrite on.
        dying.arm();
        rewrite.release();
        const late = await stalled.catch(() => []);
        expect(late, `dies at call ${k}`).toEqual([]);
        if (dying.died()) continue;
        // Turn 9 did not die: it was closed still running, and has nothing to give back.
        expect(await inbox.listPending('s1')).toEqual([]);
        expect((await inbox.listDelivered('s1')).map((notice) => notice.turn)).toEqual([10]);
        expect(k).toBe(6); // past its five calls
        return;
      }
    },
  );

  it('a turn that read the record before a stalled taker kept it takes it over from that taker, once', async () => {
    const { memory, inbox, record } = await consumedByTurn8();
    const taker = new HeldStore(memory);
    const rewrite = taker.hold(
      ({ operation, keys, options }) => operation === 'put' && keys[0] === record && !!options?.ifMatch,
    );
    const stalled = inboxOn(taker).recover('s1', [{ turn: 8, since }], 9);
    await rewrite.reached;
    // Turn 10 reads the record as turn 8's, then waits before its decision key.
    const successor = new HeldStore(memory);
    const decision = successor.hold(({ operation, keys }) => operation === 'put' && keys[0]!.includes('/taken-'));
    const lost = [
      { turn: 8, since },
      { turn: 9, since },
    ];
    const taking = inboxOn(successor).recover('s1', lost, 10);
    await decision.reached;
    // Turn 9 rewrites the record and keeps the notice; turn 10 takes it over from turn 9.
    rewrite.release();
    const kept = await stalled;
    expect(kept.map((notice) => notice.content)).toEqual(['once']);
    decision.release();
    expect((await taking).map((notice) => notice.content)).toEqual(['once']);
    // Turn 9, closed still running, gives back nothing: it is turn 10's.
    await inbox.giveBack('s1', kept, 9);
    expect(await inbox.listPending('s1')).toEqual([]);
    expect((await inbox.listDelivered('s1')).map((notice) => notice.turn)).toEqual([10]);
  });
});

describe('a chain of decision keys past many turns whose takeover failed', () => {
  it('keeps its keys within the 1024 bytes S3 allows, and the notice reaches one turn', async () => {
    // The longest names: a 256-character key prefix, a 64-character session id, a 200-character notice name.
    const longPrefix = `${'k'.repeat(255)}/`;
    const id = 's'.repeat(64);
    const memory = new MemoryStore();
    await memory.put(sessionConfigKey(longPrefix, id), '{}');
    const limited = new FaultyStore(memory).failWhen(({ key }) => new TextEncoder().encode(key).length > 1024);
    const on = (store: ObjectStore) =>
      new Inbox(store, { keyPrefix: longPrefix, log: () => {}, sessionExists: async () => true });
    await on(memory).post(id, { name: 'n'.repeat(200), content: 'once' });
    await on(memory).consume(id, { turn: 8 });
    const lostUpTo = (last: number) => Array.from({ length: last - 7 }, (_, index) => ({ turn: 8 + index, since }));
    // Turns 9 to 88 each win the notice's next decision key, then fail at the create confirming their hold.
    for (let turn = 9; turn <= 88; turn++) {
      let rewritten = false;
      const failing = new FaultyStore(limited).failWhen(({ options }) => {
        rewritten ||= !!options?.ifMatch;
        return rewritten && !!options?.onlyIfAbsent;
      });
      await expect(on(failing).recover(id, lostUpTo(turn - 1), turn)).rejects.toThrow();
    }
    const taken = await on(limited).recover(id, lostUpTo(88), 89);
    expect(taken.map((notice) => notice.content)).toEqual(['once']);
    expect(limited.injected).toBe(0);
  });
});

describe('a give-back whose name a notice holds', () => {
  it('leaves a notice posted again under the name, same content and second, to be delivered too', async () => {
    // The store's clock stands still: a second post lands in the same second as the first (S3
    // and R2 tell an object's time to the second), with the same content, so the same etag.
    const at = new Date('2026-01-01T00:00:00.000Z');
    const memory = new MemoryStore({ clock: () => at });
    await memory.put(sessionConfigKey(keyPrefix, 's1'), '{}');
    const inbox = new Inbox(memory, { keyPrefix, sessionExists: sessionExistsIn(memory, keyPrefix), clock: () => at });
    await inbox.post('s1', { name: 'note.md', content: 'once' });
    // Turn 8 moves it; its delete of the original fails.
    const original = `${sessionPrefix(keyPrefix, 's1')}inbox/note.md`;
    const failing = new FaultyStore(memory).failWhen(
      ({ operation, key }) => operation === 'delete' && key === original,
    );
    const taken = await new Inbox(failing, {
      keyPrefix,
      sessionExists: sessionExistsIn(memory, keyPrefix),
      clock: () => at,
    }).consume('s1', { turn: 8 });
    expect(taken.delivered.map((notice) => notice.content)).toEqual(['once']);
    // The original goes (withdrawn), and the client posts again under the name.
    await inbox.withdraw('s1', 'note.md');
    await inbox.post('s1', { name: 'note.md', content: 'once' });
    // Turn 8, closed by someone else, gives its notice back: the name is taken by the new post.
    await inbox.giveBack('s1', taken.delivered, 8);
    expect((await inbox.listPending('s1')).map((notice) => notice.name)).toHaveLength(2);
  });
});

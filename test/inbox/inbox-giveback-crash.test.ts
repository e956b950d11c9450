import { describe, expect, it } from 'vitest';
import { Inbox } from '../../lib/inbox/index.ts';
import type { DeliveredNotice } from '../../lib/inbox/types.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { HeldStore } from '../support/held-store.ts';

const keyPrefix = 'p/';
const since = new Date(Date.now() - 60_000).toISOString();
const inboxOn = (store: ObjectStore) =>
  new Inbox(store, { keyPrefix, log: () => {}, sessionExists: sessionExistsIn(store, keyPrefix) });

/**
 * A memory store where turn 8 consumed `note.md` ('once'), then was closed by someone else;
 * given `nameTaken`, another notice was posted under its name since (the give-back takes
 * another name).
 */
async function consumedByTurn8(nameTaken: boolean) {
  const memory = new MemoryStore();
  await memory.put(sessionConfigKey(keyPrefix, 's1'), '{}');
  const inbox = inboxOn(memory);
  await inbox.post('s1', { name: 'note.md', content: 'once' });
  const { delivered } = await inbox.consume('s1', { turn: 8 });
  if (nameTaken) await inbox.post('s1', { name: 'note.md', content: 'other' });
  return { memory, inbox, delivered };
}

/** A store on which the process dies at its `k`th call: it fails (after it landed when `after`), and every later. */
function diesAtCall(store: ObjectStore, k: number, after: boolean) {
  const faulty = new FaultyStore(store);
  let calls = 0;
  faulty.failWhen(() => ++calls === k, { after, times: 1 });
  faulty.failWhen(() => calls >= k);
  return { store: faulty, died: () => faulty.injected > 0 };
}

/**
 * Turn 9, which carries turn 8 as closed by someone else (it takes over what turn 8 still
 * holds, then consumes), then turns 10 to 13: what each shows.
 */
async function laterTurns(inbox: Inbox): Promise<DeliveredNotice[][]> {
  const shown = [
    [...(await inbox.recover('s1', [{ turn: 8, since }], 9)), ...(await inbox.consume('s1', { turn: 9 })).delivered],
  ];
  for (let turn = 10; turn < 14; turn++) shown.push((await inbox.consume('s1', { turn })).delivered);
  return shown;
}

describe('a give-back that dies at any storage call', () => {
  it.each([
    [false, false],
    [true, false],
    [false, true],
    [true, true],
  ])(
    'leaves the notice to exactly one later turn (the call landed: %s, its name taken: %s)',
    async (after, nameTaken) => {
      for (let k = 1; ; k++) {
        const { memory, inbox, delivered } = await consumedByTurn8(nameTaken);
        const dying = diesAtCall(memory, k, after);
        await inboxOn(dying.store).giveBack('s1', delivered, 8);
        const shown = (await laterTurns(inbox)).flat().map((notice) => notice.content);
        expect(
          shown.filter((content) => content === 'once'),
          `dies at call ${k}`,
        ).toEqual(['once']);
        expect(shown.filter((content) => content === 'other')).toEqual(nameTaken ? ['other'] : []);
        expect(await inbox.listPending('s1'), `dies at call ${k}`).toEqual([]);
        if (!dying.died()) return;
      }
    },
  );

  it.each([false, true])(
    'gives it to one turn when the next turn finishes it while the give-back stalls (its name taken: %s)',
    async (nameTaken) => {
      const { memory, inbox, delivered } = await consumedByTurn8(nameTaken);
      // The give-back stalls right after its decision key, before it posts the notice back.
      const held = new HeldStore(memory);
      const post = held.hold(({ operation, keys }) => operation === 'put' && /\/inbox\/[^/]+$/.test(keys[0]!));
      const giving = inboxOn(held).giveBack('s1', delivered, 8);
      await post.reached;
      // Turn 9 finds it given back but not posted, posts it and shows it; then the give-back goes on.
      const ninth = await laterTurns(inbox);
      post.release();
      await giving;
      const later = await laterTurns(inbox);
      const shown = [...ninth, ...later].flat().map((notice) => notice.content);
      expect(shown.filter((content) => content === 'once')).toEqual(['once']);
      expect(await inbox.listPending('s1')).toEqual([]);
    },
  );
});

describe('a give-back that stalls before its mark while the next turn finishes it', () => {
  it('leaves the record of the turn that then consumed the notice under the same name alone', async () => {
    const { memory, inbox, delivered } = await consumedByTurn8(false);
    // The give-back stalls once it posted the notice back, at its next call on the record.
    const held = new HeldStore(memory);
    const mark = held.hold(
      ({ operation, keys, options }) =>
        /\/inbox_removed\/note\.md$/.test(keys[0]!) &&
        (operation === 'head' || (operation === 'put' && options?.ifMatch !== undefined)),
    );
    const giving = inboxOn(held).giveBack('s1', delivered, 8);
    await mark.reached;
    // Turn 9 finds it given back, finishes the give-back (the record deleted), then consumes the
    // post: its claim takes the record's key again, the same bytes.
    const ninth = [
      ...(await inbox.recover('s1', [{ turn: 8, since }], 9)),
      ...(await inbox.consume('s1', { turn: 9 })).delivered,
    ];
    expect(ninth.map((notice) => notice.content)).toEqual(['once']);
    mark.release();
    await giving;
    // Turn 9 is closed by someone else before a model saw it: turn 10 takes it over.
    const records = await inbox.listDelivered('s1');
    expect(records.map((record) => record.stored_as)).toEqual([ninth[0]!.stored_as]);
    const tenth = [
      ...(await inbox.recover('s1', [{ turn: 9, since }], 10)),
      ...(await inbox.consume('s1', { turn: 10 })).delivered,
    ];
    expect(tenth.map((notice) => notice.content)).toEqual(['once']);
  });
});

describe('a give-back that stalls before its delete of the record while the next turn finishes it', () => {
  it('leaves the claim of the turn that then consumed the notice alone', async () => {
    const { memory, inbox, delivered } = await consumedByTurn8(false);
    // The give-back stalls at its delete of the record, its head having found it still the claim read.
    const held = new HeldStore(memory);
    const removal = held.hold(
      ({ operation, keys }) => operation === 'delete' && /\/inbox_removed\/note\.md$/.test(keys[0]!),
    );
    const giving = inboxOn(held).giveBack('s1', delivered, 8);
    await removal.reached;
    // Turn 9 finds it given back, finishes the give-back (the record deleted), then consumes the post.
    const ninth = [
      ...(await inbox.recover('s1', [{ turn: 8, since }], 9)),
      ...(await inbox.consume('s1', { turn: 9 })).delivered,
    ];
    expect(ninth.map((notice) => notice.content)).toEqual(['once']);
    removal.release();
    await giving;
    // Turn 9's claim is still there: turn 10 takes it over once turn 9 was closed by someone else.
    expect((await inbox.listDelivered('s1')).map((record) => record.stored_as)).toEqual([ninth[0]!.stored_as]);
    const tenth = [
      ...(await inbox.recover('s1', [{ turn: 9, since }], 10)),
      ...(await inbox.consume('s1', { turn: 10 })).delivered,
    ];
    expect(tenth.map((notice) => notice.content)).toEqual(['once']);
  });
});

describe('a notice given back and withdrawn', () => {
  it('is not posted back again by the turn that finishes the give-back once it stalled', async () => {
    const { memory, inbox, delivered } = await consumedByTurn8(false);
    // The give-back stalls once it posted the notice back, before its record is deleted.
    const held = new HeldStore(memory);
    const stalled = held.hold(
      ({ operation, keys, options }) =>
        /\/inbox_removed\/note\.md$/.test(keys[0]!) &&
        (operation === 'head' || (operation === 'put' && options?.ifMatch !== undefined)),
    );
    const giving = inboxOn(held).giveBack('s1', delivered, 8);
    await stalled.reached;
    expect((await inbox.listPending('s1')).map((notice) => notice.name)).toEqual(['note.md']);
    await inbox.withdraw('s1', 'note.md');
    // Turn 9 finds the give-back unfinished and finishes it: the notice withdrawn stays withdrawn.
    const shown = await laterTurns(inbox);
    stalled.release();
    await giving;
    shown.push(...(await laterTurns(inbox)));
    expect(shown.flat()).toEqual([]);
    expect(await inbox.listPending('s1')).toEqual([]);
  });

  it('withdraws the other post of its give-back too', async () => {
    const { memory, inbox, delivered } = await consumedByTurn8(false);
    // The give-back stalls before it posts the notice back; turn 9 finishes it (posts it), then
    // the notice is delivered by no turn until the give-back posted it again, under its name.
    const held = new HeldStore(memory);
    const post = held.hold(({ operation, keys }) => operation === 'put' && /\/inbox\/[^/]+$/.test(keys[0]!));
    const giving = inboxOn(held).giveBack('s1', delivered, 8);
    await post.reached;
    expect(await inbox.recover('s1', [{ turn: 8, since }], 9)).toEqual([]);
    const first = await inbox.listPending('s1');
    expect(first.map((notice) => notice.name)).toEqual(['note.md']);
    // Withdrawn, then the stalled give-back posts its own (the name free again).
    await inbox.withdraw('s1', 'note.md');
    post.release();
    await giving;
    // The later turns' consume drops that post, and says why.
    const logged: string[] = [];
    const watched = new Inbox(memory, {
      keyPrefix,
      log: (event) => logged.push(event.message),
      sessionExists: sessionExistsIn(memory, keyPrefix),
    });
    const shown = await laterTurns(watched);
    expect(shown.flat()).toEqual([]);
    expect(await inbox.listPending('s1')).toEqual([]);
    expect(logged).toContain('removed a notice a give-back posted again, withdrawn');
  });
});

describe('a second post of a give-back that a consume drops', () => {
  it('is told from a notice posted under its name since with the same bytes in the same second', async () => {
    // S3 and R2 stamp uploads in seconds and make the etag of the body: the store's clock stands still.
    const second = new Date(Math.floor(Date.now() / 1000) * 1000);
    const memory = new MemoryStore({ clock: () => second });
    await memory.put(sessionConfigKey(keyPrefix, 's1'), '{}');
    const inbox = inboxOn(memory);
    await inbox.post('s1', { name: 'note.md', content: 'once' });
    const { delivered } = await inbox.consume('s1', { turn: 8 });
    // The give-back stalls before its post; turn 9 finishes it and consumes its post; then the
    // stalled give-back posts the notice again, under its name (free again).
    const held = new HeldStore(memory);
    const post = held.hold(({ operation, keys }) => operation === 'put' && /\/inbox\/[^/]+$/.test(keys[0]!));
    const giving = inboxOn(held).giveBack('s1', delivered, 8);
    await post.reached;
    expect(await inbox.recover('s1', [{ turn: 8, since }], 9)).toEqual([]);
    expect((await inbox.consume('s1', { turn: 9 })).delivered.map((notice) => notice.content)).toEqual(['once']);
    post.release();
    await giving;
    // Turn 10's consume of that second post stalls before its check of the post it drops; meanwhile
    // the post is withdrawn and a client posts the same text under the name.
    const dropping = new HeldStore(memory);
    const check = dropping.hold(({ operation, keys }) => operation === 'head' && /\/inbox\/note\.md$/.test(keys[0]!));
    const tenth = inboxOn(dropping).consume('s1', { turn: 10 });
    await check.reached;
    await inbox.withdraw('s1', 'note.md');
    await inbox.post('s1', { name: 'note.md', content: 'once' });
    check.release();
    expect((await tenth).delivered).toEqual([]);
    const later = (await laterTurns(inbox)).flat().map((notice) => notice.content);
    expect(later).toEqual(['once']);
  });
});

describe('a withdrawal of a notice given back that dies at any storage call', () => {
  it.each([false, true])('is finished by its retry: no turn shows it (the call landed: %s)', async (after) => {
    for (let k = 1; ; k++) {
      const { memory, inbox, delivered } = await consumedByTurn8(false);
      await inbox.giveBack('s1', delivered, 8);
      expect((await inbox.listPending('s1')).map((notice) => notice.name)).toEqual(['note.md']);
      const dying = diesAtCall(memory, k, after);
      await inboxOn(dying.store)
        .withdraw('s1', 'note.md')
        .catch(() => {});
      await inbox.withdraw('s1', 'note.md').catch((error: unknown) => {
        if (!(error instanceof Error && error.name === 'NotFoundError')) throw error;
      });
      const shown = (await laterTurns(inbox)).flat();
      expect(shown, `dies at call ${k}`).toEqual([]);
      expect(await inbox.listPending('s1'), `dies at call ${k}`).toEqual([]);
      if (!dying.died()) return;
    }
  });
});

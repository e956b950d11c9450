import { describe, expect, it } from 'vitest';
import { Inbox } from '../../lib/inbox/index.ts';
import type { LostTurn } from '../../lib/inbox/carry.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { CountingStore } from '../support/counting-store.ts';
import { HeldStore } from '../support/held-store.ts';

/**
 * `GET .../inbox/delivered` (lib/inbox/pages.ts `deliveredPage`) for the records of a turn closed
 * by someone else whose give-back ended their chain of decision keys but did not finish (its
 * process stalled or died before it deleted the record): the notice goes back to the inbox, so
 * the delivered listing leaves the record out, as the prompt preview does, and the notice shows
 * once, pending, once it is posted back.
 */

const keyPrefix = 'p/';
const since = new Date(Date.now() - 60_000).toISOString();
const lost: LostTurn[] = [{ turn: 8, since }];
const inboxOn = (store: ObjectStore) =>
  new Inbox(store, { keyPrefix, log: () => {}, sessionExists: sessionExistsIn(store, keyPrefix) });

/** Turn 8 consumed `note.md`, then was closed by someone else; its give-back stalls where `at` picks. */
async function giveBackStalled(at: 'post' | 'delete') {
  const memory = new MemoryStore();
  await memory.put(sessionConfigKey(keyPrefix, 's1'), '{}');
  const inbox = inboxOn(memory);
  await inbox.post('s1', { name: 'note.md', content: 'once' });
  const { delivered } = await inbox.consume('s1', { turn: 8 });
  const held = new HeldStore(memory);
  const stall =
    at === 'post'
      ? // Right after its decision key, before it posts the notice back.
        held.hold(({ operation, keys }) => operation === 'put' && /\/inbox\/[^/]+$/.test(keys[0]!))
      : // Once it posted the notice back, at its next call on the record (before the delete).
        held.hold(({ operation, keys }) => operation === 'head' && /\/inbox_removed\/note\.md$/.test(keys[0]!));
  const giving = inboxOn(held).giveBack('s1', delivered, 8);
  await stall.reached;
  return { memory, inbox, finish: () => (stall.release(), giving) };
}

/** What the listings show of the notices: pending names, delivered `[stored_as, turn]`. */
async function listings(inbox: Inbox) {
  const pending = (await inbox.pendingPage('s1')).pending.map((notice) => notice.name);
  const page = await inbox.deliveredPage('s1', {}, async () => lost);
  return { pending, delivered: page.delivered.map((record) => [record.stored_as, record.turn]) };
}

describe('the delivered listing of a record whose chain a give-back ended', () => {
  it('leaves it out once the notice is posted back: the notice is listed once, pending', async () => {
    const { inbox, finish } = await giveBackStalled('delete');
    expect(await listings(inbox)).toEqual({ pending: ['note.md'], delivered: [] });
    // As the prompt preview: the turn takes the notice from the inbox, not from the record.
    expect(await inbox.peekLost('s1', lost)).toEqual([]);
    await finish();
    expect(await listings(inbox)).toEqual({ pending: ['note.md'], delivered: [] });
  });

  it('leaves it out before the notice is posted back, listed in neither until it is', async () => {
    const { inbox, finish } = await giveBackStalled('post');
    expect(await listings(inbox)).toEqual({ pending: [], delivered: [] });
    expect(await inbox.peekLost('s1', lost)).toEqual([]);
    await finish();
    expect(await listings(inbox)).toEqual({ pending: ['note.md'], delivered: [] });
  });

  it('lists it in neither until the next turn posts it back as it starts, and takes it then', async () => {
    const { inbox, finish } = await giveBackStalled('post');
    // Turn 9 finds the give-back unfinished: it posts the notice back. A consume that lists the inbox
    // after that takes it; a turn lists the inbox alongside its claim, before, and leaves it to the
    // turn after (test/turn/preview-turn.test.ts, the give-back states).
    expect(await inbox.recover('s1', lost, 9)).toEqual([]);
    const ninth = await inbox.consume('s1', { turn: 9 });
    expect(ninth.delivered.map((notice) => notice.content)).toEqual(['once']);
    expect(await listings(inbox)).toEqual({ pending: [], delivered: [[ninth.delivered[0]!.stored_as, 9]] });
    // The stalled give-back goes on: its late post is a second one (docs/STORAGE.md, "Give-backs").
    await finish();
    expect((await listings(inbox)).delivered).toEqual([[ninth.delivered[0]!.stored_as, 9]]);
  });

  it('lists a record of a closed turn that no give-back ended under no turn, one get per decision key', async () => {
    const memory = new MemoryStore();
    const store = new CountingStore(memory);
    await memory.put(sessionConfigKey(keyPrefix, 's1'), '{}');
    const inbox = inboxOn(store);
    for (const name of ['a.md', 'b.md']) await inbox.post('s1', { name, content: name });
    await inbox.consume('s1', { turn: 7, room: 1 });
    await inbox.consume('s1', { turn: 8 });
    store.reset();
    // A normal listing (no turn closed by someone else) reads no more than the page.
    const normal = await inbox.deliveredPage('s1', {}, async () => []);
    expect(normal.delivered.map((record) => [record.stored_as, record.turn])).toEqual([
      ['a.md', 7],
      ['b.md', 8],
    ]);
    expect(store.counts).toMatchObject({ list: 1, get: 0, put: 0 });
    store.reset();
    // Turn 8 closed by someone else: its record alone pays a get of its first decision key (none yet).
    expect((await listings(inbox)).delivered).toEqual([
      ['a.md', 7],
      ['b.md', null],
    ]);
    expect(store.counts).toMatchObject({ list: 2, get: 1, put: 0 });
  });
});

import { describe, expect, it } from 'vitest';
import { Inbox } from '../../lib/inbox/index.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { HeldStore } from '../support/held-store.ts';

/**
 * A turn reads its notices before its claim lands (`Inbox.fetch`), so its move checks that the
 * notice under the name is still the one it read. A notice taken and given back meanwhile is
 * posted again with the same bytes: on a store whose etag is the body's (S3, R2, the memory
 * store) its etag is the one read, but it is a new notice (another upload time and notice id),
 * which only a consume that reads it may deliver (docs/STORAGE.md, "Notices").
 */

const keyPrefix = 'p/';
const inboxOn = (store: ObjectStore) =>
  new Inbox(store, { keyPrefix, log: () => {}, sessionExists: sessionExistsIn(store, keyPrefix) });

/** `note.md` read by turn 9 (not yet moved), then taken by turn 8 and given back. */
async function givenBackAfterTheRead() {
  const memory = new MemoryStore();
  await memory.put(sessionConfigKey(keyPrefix, 's1'), '{}');
  const inbox = inboxOn(memory);
  await inbox.post('s1', { name: 'note.md', content: 'once' });
  const fetched = inbox.fetch('s1');
  await Promise.all((await fetched).map((notice) => notice.read));
  const eighth = await inbox.consume('s1', { turn: 8 });
  expect(eighth.delivered.map((notice) => notice.content)).toEqual(['once']);
  // Turn 8 was closed by someone else: it gives the notice back, posted again with the same bytes.
  await inbox.giveBack('s1', eighth.delivered, 8);
  return { memory, inbox, fetched };
}

describe('a move of a notice read before it was taken and given back', () => {
  it('moves nothing: the notice posted back stays pending for the next consume', async () => {
    const { inbox, fetched } = await givenBackAfterTheRead();
    expect((await inbox.consume('s1', { turn: 9, fetched })).delivered).toEqual([]);
    const tenth = await inbox.consume('s1', { turn: 10 });
    // Claimed past the slot of the record it was given back from.
    expect(tenth.delivered.map((notice) => [notice.content, notice.stored_as])).toEqual([['once', 'note.1.md']]);
  });

  it('delivers it once when the stale move races a consume of the notice posted back', async () => {
    const { memory, inbox, fetched } = await givenBackAfterTheRead();
    // Turn 10 consumes the notice posted back; its delete of the original waits, so the stale
    // move's check finds the post still under the name.
    const held = new HeldStore(memory);
    const removal = held.hold(
      ({ operation, keys }) => operation === 'delete' && keys[0] === 'p/sessions/s1/inbox/note.md',
    );
    const tenth = inboxOn(held).consume('s1', { turn: 10 });
    await removal.reached;
    const ninth = await inbox.consume('s1', { turn: 9, fetched });
    removal.release();
    const delivered = [...ninth.delivered, ...(await tenth).delivered].map((notice) => notice.content);
    expect(delivered).toEqual(['once']);
    expect((await inbox.listDelivered('s1')).map((record) => record.turn)).toEqual([10]);
  });
});

import { describe, expect, it } from 'vitest';
import { Inbox } from '../../lib/inbox/index.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { HeldStore } from '../support/held-store.ts';

// An import keeps the created_at of the session it was exported from, but its config's
// `incarnation` is its own: a notice names both, and a turn tells incarnations apart by it.
const CREATED = '2026-01-01T00:00:00.000Z';

function setup() {
  const store = new MemoryStore();
  let current = { created_at: CREATED, incarnation: 'first' };
  const inbox = new Inbox(store, { sessionExists: async () => current });
  /** The session deleted and imported again under its id, with the same created_at. */
  const imported = () => {
    current = { created_at: CREATED, incarnation: 'second' };
  };
  const consume = (turn: number) =>
    inbox.consume('s', { turn, sessionExists: true, since: CREATED, incarnation: current.incarnation });
  return { store, inbox, imported, consume };
}

describe('a session deleted and imported again under its id', () => {
  it('drops a notice posted to the deleted one', async () => {
    const { inbox, imported, consume } = setup();
    await inbox.post('s', { name: 'late', content: 'for the deleted session' });
    imported();
    expect((await consume(1)).delivered).toEqual([]);
    expect(await inbox.listPending('s')).toEqual([]);
  });

  it('keeps none of the notices a turn of the deleted one gives back', async () => {
    const { inbox, imported, consume } = setup();
    await inbox.post('s', { name: 'taken', content: 'by a turn that then failed' });
    const taken = await consume(1);
    expect(taken.delivered.map((notice) => notice.name)).toEqual(['taken']);
    imported();
    await inbox.giveBack('s', taken.delivered, 1, { created_at: CREATED, incarnation: 'first' });
    expect(await inbox.listPending('s')).toEqual([]);
  });

  it('delivers a notice that names only the created_at, as posted before notices named the incarnation', async () => {
    const { store, inbox, consume } = setup();
    await store.put('sessions/s/inbox/older', 'posted before', {
      metadata: { 'posted-at': new Date().toISOString(), 'notice-id': 'n1', 'session-created': CREATED },
    });
    expect((await consume(1)).delivered.map((notice) => notice.content)).toEqual(['posted before']);
    expect(await inbox.listPending('s')).toEqual([]);
  });
});

describe('a give-back of a deleted incarnation that the next turn finished while it stalled', () => {
  it('removes the post it found its own, which the turn made', async () => {
    const { store, inbox, imported, consume } = setup();
    await inbox.post('s', { name: 'taken', content: 'by a turn that then failed' });
    const taken = await consume(1);
    const first = { created_at: CREATED, incarnation: 'first' };
    // The give-back stalls before its post; turn 2, which took turn 1 over, finishes it (posts it).
    const held = new HeldStore(store);
    const post = held.hold(({ operation, keys }) => operation === 'put' && keys[0] === 'sessions/s/inbox/taken');
    let named = first;
    const giving = new Inbox(held, { sessionExists: async () => named }).giveBack('s', taken.delivered, 1, first);
    await post.reached;
    await inbox.recover('s', [{ turn: 1, since: CREATED }], 2, undefined, undefined, first);
    expect((await inbox.listPending('s')).map((notice) => notice.name)).toEqual(['taken']);
    // The id is deleted (its sweep past the inbox already) and imported again; the give-back goes on.
    imported();
    named = { created_at: CREATED, incarnation: 'second' };
    post.release();
    await giving;
    expect(await inbox.listPending('s')).toEqual([]);
  });
});

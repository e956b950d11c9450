import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import type { TurnOutcome } from '../../lib/session/log/types.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { listAll, type GetOptions } from '../../lib/store/object-store.ts';
import { SessionLog } from '../support/session-log.ts';

/**
 * What another run of a turn learns from the completion that closed it (SessionLog.closerNotices):
 * the notices it showed and those it carries on, read alike from the completion and, once a pack
 * buried it, from the turn's segment line, whose receipt keeps what it carries on without the
 * turn's receipt as the API shows it changing.
 */

const user = (content: string): Item => ({ type: 'message', role: 'user', content });
const notice = (name: string) => ({ name, stored_as: name, posted_at: '2030-01-01T00:00:00.000Z' });

/** A store whose segment reads miss `misses` times (one merged away since it was listed). */
class MissingSegmentStore extends MemoryStore {
  misses = 0;
  override async get(key: string, options?: GetOptions) {
    if (key.endsWith('.seg') && this.misses > 0) {
      this.misses -= 1;
      return null;
    }
    return super.get(key, options);
  }
}

async function closedWith(outcome: TurnOutcome, store = new MemoryStore()) {
  const sessions = new SessionLog(store);
  await sessions.create({ id: 's' });
  const claim = await sessions.beginTurn('s', { input: [user('one')] });
  if (claim.kind !== 'claimed') throw new Error('expected a claim');
  await sessions.completeTurn(claim.turn, outcome);
  const otherRun = { ...claim.turn, writer: 'another-run' };
  const read = async () => [...((await sessions.closerNotices(otherRun)) ?? ['unknown'])].sort();
  const unpacked = { notices: await read(), turn: await sessions.getTurn('s', 1) };
  for (const text of ['two', 'three']) await sessions.append('s', [user(text)]);
  await sessions.pack('s', { refresh: true });
  const dones = (await listAll(store, '')).filter((info) => info.key.endsWith('.done'));
  expect(dones.map((info) => info.size)).toEqual([0]);
  return { unpacked, packed: { notices: await read(), turn: await sessions.getTurn('s', 1) } };
}

describe('the notices of the completion that closed a turn', () => {
  it('a failed turn: those it showed and those it carries on, packed or not', async () => {
    const { unpacked, packed } = await closedWith({
      status: 'failed',
      output: [],
      receipt: { strategies: ['inbox'], notices: [notice('a.md')] },
      error: { code: 'internal_error', message: 'internal error' },
      undelivered: { notices: [{ ...notice('b.md'), content: 'b' }], lost_turns: [] },
    });
    expect(unpacked.notices).toEqual(['a.md', 'b.md']);
    expect(packed.notices).toEqual(['a.md', 'b.md']);
    expect(packed.turn.receipt).toEqual(unpacked.turn.receipt);
    expect(packed.turn.notices).toEqual(unpacked.turn.notices);
  });

  it('a failed turn that carries nothing on and showed nothing: none, packed or not', async () => {
    const { unpacked, packed } = await closedWith({
      status: 'failed',
      output: [],
      receipt: { strategies: [] },
      error: { code: 'internal_error', message: 'internal error' },
    });
    expect(unpacked.notices).toEqual([]);
    expect(packed.notices).toEqual([]);
    expect(packed.turn.receipt).toEqual(unpacked.turn.receipt);
  });

  it('a completed turn: those it showed, packed or not', async () => {
    const { unpacked, packed } = await closedWith({
      status: 'completed',
      output: [user('echo')],
      receipt: { strategies: ['inbox'], notices: [notice('a.md')] },
    });
    expect(unpacked.notices).toEqual(['a.md']);
    expect(packed.notices).toEqual(['a.md']);
    expect(packed.turn.receipt).toEqual(unpacked.turn.receipt);
  });
});

describe('the notices of a completion whose receipt does not read as lib/turn/receipt.ts writes it', () => {
  it('a field the receipt schema refuses beside its notices: those it showed, packed or not', async () => {
    const { unpacked, packed } = await closedWith({
      status: 'completed',
      output: [user('echo')],
      receipt: { strategies: ['inbox'], notices: [notice('a.md')], usage: 'not a usage' },
    });
    expect(unpacked.notices).toEqual(['a.md']);
    expect(packed.notices).toEqual(['a.md']);
  });

  it('notices that do not read, or a receipt that is no object: not known, packed or not', async () => {
    for (const receipt of [{ strategies: ['inbox'], notices: [{ name: 'a.md' }] }, 'not a receipt', null]) {
      const { unpacked, packed } = await closedWith({ status: 'completed', output: [user('echo')], receipt });
      expect(unpacked.notices).toEqual(['unknown']);
      expect(packed.notices).toEqual(['unknown']);
    }
  });

  it("a failed turn's line carrying on what does not read: not known", async () => {
    const { packed } = await closedWith({
      status: 'failed',
      output: [],
      receipt: { strategies: ['inbox'], notices: 'not a list' },
      error: { code: 'internal_error', message: 'internal error' },
      undelivered: { notices: [{ ...notice('b.md'), content: 'b' }], lost_turns: [] },
    });
    expect(packed.notices).toEqual(['unknown']);
  });
});

describe('the notices of a packed completion whose segment is not there to read', () => {
  const failed: TurnOutcome = {
    status: 'failed',
    output: [],
    receipt: { strategies: ['inbox'], notices: [notice('a.md')] },
    error: { code: 'internal_error', message: 'internal error' },
    undelivered: { notices: [{ ...notice('b.md'), content: 'b' }], lost_turns: [] },
  };

  it('listed but gone when read (merged into another meanwhile): read from a fresh listing', async () => {
    const store = new MissingSegmentStore();
    const { packed } = await closedWith(failed, store);
    store.misses = 1;
    const sessions = new SessionLog(store);
    const claimed = await sessions.beginTurn('s', { input: [user('four')] });
    if (claimed.kind !== 'claimed') throw new Error('expected a claim');
    expect(packed.notices).toEqual(['a.md', 'b.md']);
    const turn = { ...claimed.turn, record: 1, turn: 1, writer: 'another-run' };
    expect([...((await sessions.closerNotices(turn)) ?? ['unknown'])].sort()).toEqual(['a.md', 'b.md']);
  });

  it('gone for good (only its tombstones left): not known, no error', async () => {
    const store = new MemoryStore();
    await closedWith(failed, store);
    const segments = (await listAll(store, '')).filter((info) => info.key.endsWith('.seg'));
    expect(segments).toHaveLength(1);
    await store.delete(segments.map((info) => info.key));
    const sessions = new SessionLog(store);
    const claimed = await sessions.beginTurn('s', { input: [user('four')] });
    if (claimed.kind !== 'claimed') throw new Error('expected a claim');
    const turn = { ...claimed.turn, record: 1, turn: 1, writer: 'another-run' };
    expect(await sessions.closerNotices(turn)).toBeNull();
  });
});

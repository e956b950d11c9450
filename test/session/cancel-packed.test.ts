import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SessionLog } from '../support/session-log.ts';

/**
 * A turn closed by someone else (a cancel, an `interrupt`) whose completion a pack moved into a
 * segment since (its `.done` buried) is read by its late owner as it was closed: its renewal
 * (closedBy) and its own completion, refused, tell the error its segment line keeps, not
 * `lease_expired`, which only a lapsed lease's close says.
 */

const user = (content: string): Item => ({ type: 'message', role: 'user', content });

/** Session `s` whose turn 2 was closed by `close` and packed since: its owner's open turn, and the log. */
async function closedAndPacked(close: 'cancel' | 'interrupt') {
  const sessions = new SessionLog(new MemoryStore(), { keepRecords: 1, packMinRecords: 1 });
  await sessions.create({ id: 's' });
  const first = await sessions.beginTurn('s', { input: [user('one')] });
  if (first.kind !== 'claimed') throw new Error('expected a claim');
  await sessions.completeTurn(first.turn, { status: 'completed', output: [user('echo: one')], receipt: {} });
  const second = await sessions.beginTurn('s', { input: [user('two')] });
  if (second.kind !== 'claimed') throw new Error('expected a claim');
  await sessions.cancelTurn('s', 2, close === 'interrupt');
  // A later turn, so the pack moves turn 2's record and completion into a segment.
  const third = await sessions.beginTurn('s', { input: [user('three')] });
  if (third.kind !== 'claimed') throw new Error('expected a claim');
  await sessions.completeTurn(third.turn, { status: 'completed', output: [user('echo: three')], receipt: {} });
  const packed = await sessions.pack('s');
  expect(packed.packed).toBe(true);
  expect(packed.through).toBeGreaterThanOrEqual(second.turn.record);
  return { sessions, turn: second.turn };
}

describe('a turn closed by someone else, packed since, read by its owner', () => {
  for (const close of ['cancel', 'interrupt'] as const) {
    // The stored error names the turn, as its owner's answer does.
    const details = { details: { session_id: 's', turn: 2, ...(close === 'interrupt' ? { interrupted: true } : {}) } };

    it(`reads as cancelled, not lease_expired, after a ${close}`, async () => {
      const { sessions, turn } = await closedAndPacked(close);
      expect((await sessions.getTurn('s', 2)).status).toBe('cancelled');
      expect(await sessions.closedBy(turn)).toEqual({ code: 'turn_cancelled', ...details });
    });

    it(`has its own completion refused as cancelled after a ${close}`, async () => {
      const { sessions, turn } = await closedAndPacked(close);
      await expect(
        sessions.completeTurn(turn, { status: 'completed', output: [user('late')], receipt: {} }),
      ).rejects.toMatchObject({
        code: 'turn_cancelled',
        details: { session_id: 's', turn: 2, ...(close === 'interrupt' ? { interrupted: true } : {}) },
      });
    });
  }
});

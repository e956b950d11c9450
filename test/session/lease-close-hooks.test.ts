import { describe, expect, it } from 'vitest';
import type { ClosedTurn } from '../../lib/session/log/types.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SessionLog } from '../support/session-log.ts';

/**
 * The close of a turn whose lease ran out, by someone other than its owner, when the turn's
 * event (`onClosed`, the webhook outbox) cannot be written after its completion landed: the
 * inputs queued behind the turn are still taken up (`onLeaseClosed`), since the turn is closed.
 */

const LEASE_MS = 1000;

async function deadTurn() {
  let now = Date.parse('2030-01-01T00:00:00Z');
  const store = new MemoryStore();
  const pickups: ClosedTurn[] = [];
  const sessions = new SessionLog(store, {
    clock: () => new Date(now),
    leaseMs: LEASE_MS,
    onClosed: async () => {
      throw new Error('the webhook sink is down');
    },
    onLeaseClosed: (closed) => void pickups.push(closed),
  });
  await sessions.create({ id: 's' });
  // Turn 1's owner died: nothing renews or closes it.
  await sessions.beginTurn('s', { input: [{ type: 'message', role: 'user', content: 'hello' }] });
  now += 2 * LEASE_MS;
  return { sessions, pickups };
}

describe('a dead turn closed while its event cannot be written', () => {
  it('by a reader (closeIfExpired) has the inputs queued behind it taken up', async () => {
    const { sessions, pickups } = await deadTurn();
    await expect(sessions.closeIfExpired('s', 1)).rejects.toThrow('the webhook sink is down');
    expect((await sessions.getTurn('s', 1)).error?.code).toBe('lease_expired');
    expect(pickups.map(({ turn, status }) => ({ turn, status }))).toEqual([{ turn: 1, status: 'failed' }]);
  });

  it('by a newcomer whose claim then fails has them taken up too', async () => {
    const { sessions, pickups } = await deadTurn();
    const claim = sessions.beginTurn('s', { input: [{ type: 'message', role: 'user', content: 'next' }] });
    await expect(claim).rejects.toThrow('the webhook sink is down');
    expect((await sessions.getTurn('s', 1)).error?.code).toBe('lease_expired');
    expect(pickups.map(({ turn, status }) => ({ turn, status }))).toEqual([{ turn: 1, status: 'failed' }]);
  });
});

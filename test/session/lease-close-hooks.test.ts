import { describe, expect, it } from 'vitest';
import type { ClosedTurn } from '../../lib/session/log/types.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { SessionLog } from '../support/session-log.ts';

/**
 * The close of a turn by someone other than its owner (a lease run out, a cancel) when the
 * turn's event (`onClosed`, the webhook outbox) cannot be written after its completion landed:
 * the close stands, the failure logged (the turn's intent stays for the outbox's drainer), and
 * the inputs queued behind the turn are taken up (`onLeaseClosed`), since the turn is closed.
 */

const LEASE_MS = 1000;

async function deadTurn(store: ObjectStore = new MemoryStore()) {
  let now = Date.parse('2030-01-01T00:00:00Z');
  const pickups: ClosedTurn[] = [];
  const logged: string[] = [];
  const sessions = new SessionLog(store, {
    log: (message) => void logged.push(message),
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
  const expire = () => {
    now += 2 * LEASE_MS;
  };
  return { sessions, pickups, logged, expire };
}

describe('a turn closed by someone else while its event cannot be written', () => {
  it('by a reader (closeIfExpired) is closed, logged, and has the inputs queued behind it taken up', async () => {
    const { sessions, pickups, logged, expire } = await deadTurn();
    expire();
    expect(await sessions.closeIfExpired('s', 1)).toMatchObject({ error: { code: 'lease_expired' } });
    expect((await sessions.getTurn('s', 1)).error?.code).toBe('lease_expired');
    expect(pickups.map(({ turn, status }) => ({ turn, status }))).toEqual([{ turn: 1, status: 'failed' }]);
    expect(logged).toEqual([expect.stringContaining('turn 1 of session s is closed (lease_expired)')]);
  });

  it('by a newcomer, whose claim then goes on: its own close takes up the queue', async () => {
    const { sessions, pickups, logged, expire } = await deadTurn();
    expire();
    const claim = await sessions.beginTurn('s', { input: [{ type: 'message', role: 'user', content: 'next' }] });
    expect(claim.kind).toBe('claimed');
    expect((await sessions.getTurn('s', 1)).error?.code).toBe('lease_expired');
    expect(pickups).toEqual([]);
    expect(logged).toHaveLength(1);
  });

  it('by a cancel, which answers the turn cancelled', async () => {
    const { sessions, pickups, logged } = await deadTurn();
    expect(await sessions.cancelTurn('s', 1)).toEqual({ turn: 1, status: 'failed' });
    expect((await sessions.getTurn('s', 1)).status).toBe('cancelled');
    expect(pickups).toEqual([]);
    expect(logged).toEqual([expect.stringContaining('turn 1 of session s is closed (turn_cancelled)')]);
    await expect(sessions.cancelTurn('s', 1)).rejects.toMatchObject({ code: 'turn_not_open' });
  });

  it('not by a cancel whose own completion did not land: it fails though the other cancel closed it', async () => {
    const store = new FaultyStore(new MemoryStore());
    const { sessions, logged } = await deadTurn(store);
    // The first completion put fails before it lands; the other cancel's lands.
    store.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.done'), { times: 1 });
    const [first, second] = await Promise.allSettled([sessions.cancelTurn('s', 1), sessions.cancelTurn('s', 1)]);
    expect(store.injected).toBe(1);
    const outcomes = [first, second].map((settled) =>
      settled.status === 'fulfilled' ? settled.value.status : (settled.reason as { code: string }).code,
    );
    expect(outcomes.sort()).toEqual(['failed', 'storage_error']);
    expect((await sessions.getTurn('s', 1)).status).toBe('cancelled');
    expect(logged).toHaveLength(1);
  });
});

import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SessionLog } from '../support/session-log.ts';

/**
 * A turn that must follow an older turn (`afterTurn`) is not judged by the newest turn's open
 * calls (lib/session/log/commit.ts): its caller branches, where they are judged. Whatever its
 * input, such a claim stores nothing: it is refused as not following the newest turn, also when
 * it first closes a newest turn whose lease ran out.
 */

const LEASE_MS = 1000;
const user = (content: string): Item => ({ type: 'message', role: 'user', content });
const call: Item = { type: 'function_call', call_id: 'c1', name: 'read', arguments: '{}' };
const output = (callId: string): Item => ({ type: 'function_call_output', call_id: callId, output: 'x' });

async function withOpenCall(closeSecond: boolean) {
  let now = Date.parse('2030-01-01T00:00:00Z');
  const sessions = new SessionLog(new MemoryStore(), { clock: () => new Date(now), leaseMs: LEASE_MS });
  await sessions.create({ id: 's' });
  const first = await sessions.beginTurn('s', { input: [user('one')] });
  if (first.kind !== 'claimed') throw new Error('expected a claim');
  await sessions.completeTurn(first.turn, { status: 'completed', output: [user('echo')], receipt: {} });
  // Turn 2 opens call c1; when not closed, its owner died and its lease runs out.
  const second = await sessions.beginTurn('s', { input: [user('two')] });
  if (second.kind !== 'claimed') throw new Error('expected a claim');
  if (closeSecond) await sessions.completeTurn(second.turn, { status: 'completed', output: [call], receipt: {} });
  now += 2 * LEASE_MS;
  return sessions;
}

describe('a claim after an older turn', () => {
  for (const closeSecond of [true, false]) {
    const newest = closeSecond ? 'completed' : 'left open past its lease';
    it(`is refused whatever its calls, nothing stored (the newest turn ${newest})`, async () => {
      const sessions = await withOpenCall(closeSecond);
      const before = await sessions.get('s');
      for (const input of [[output('c1')], [output('unknown')], [call], [user('three')]])
        await expect(sessions.beginTurn('s', { input, afterTurn: 1 })).rejects.toThrow(/newest/i);
      const after = await sessions.get('s');
      expect(after.counts).toEqual(before.counts);
    });
  }

  it('following the newest turn, has its calls judged by that turn', async () => {
    const sessions = await withOpenCall(true);
    await expect(sessions.beginTurn('s', { input: [output('unknown')], afterTurn: 2 })).rejects.toThrow(/unknown/);
    const answered = await sessions.beginTurn('s', { input: [output('c1')], afterTurn: 2 });
    expect(answered.kind).toBe('claimed');
  });
});

import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { claimedTurn, SPENT as USAGE, user } from '../support/refused-writes.ts';
import { SessionLog } from '../support/session-log.ts';

// What a turn spent, stored apart from its completion (a charge, a stopped turn's spend), is read
// back with `stoppedSpendSchema`, and one it refuses would count as nothing spent: such a spend is
// refused before the put, and the session's totals stay as they were.

describe('a spend its readers would refuse', () => {
  it.each([
    ['a fractional usage', { usage: { ...USAGE, input_tokens: 2.5 } }],
    ['a negative summary usage', { summary_usage: { ...USAGE, output_tokens: -1 } }],
  ])('%s: refused as a charge, nothing stored', async (_name, spent) => {
    const store = new MemoryStore();
    const sessions = new SessionLog(store);
    const turn = await claimedTurn(sessions);
    const keys = async () => (await store.list('', { limit: 1000 })).objects.map((object) => object.key);
    const before = await keys();
    await expect(sessions.storeCharge(turn, spent)).rejects.toThrow(/invariant/);
    expect(await keys()).toEqual(before);
    expect(await sessions.storeCharge(turn, { usage: USAGE })).toBe(true);
    await sessions.completeTurn(turn, { status: 'completed', output: [user('echo')], receipt: {} });
    await sessions.append('s', [user('two')]);
    expect((await sessions.get('s')).usage).toMatchObject({ input_tokens: 10, output_tokens: 2 });
  });
});

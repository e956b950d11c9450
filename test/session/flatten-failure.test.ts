import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { SessionLog } from '../support/session-log.ts';
import { contents, turnOf } from './rewind-simulation-suite.ts';

const user = (content: string): Item => ({ type: 'message', role: 'user', content });
const CHARGE = {
  input_tokens: 10,
  cached_input_tokens: 0,
  cache_write_tokens: 0,
  output_tokens: 1,
  reasoning_tokens: 0,
  cost_usd: 0,
};

/** The generations anything under session `s` is stored for. */
async function levels(store: MemoryStore): Promise<Set<string>> {
  const listed = await store.list('sessions/s/', { limit: 10000 });
  return new Set(listed.objects.map((object) => object.key.split('/')[3] ?? '').filter((level) => level !== ''));
}

describe('a delete that flattens the history and then fails', () => {
  it.each<[string, (call: { operation: string; key: string }) => boolean]>([
    ['a charge it counts cannot be read', ({ operation, key }) => operation === 'get' && key.includes('/-charge-')],
    ['its fence is not put', ({ operation, key }) => operation === 'put' && /\/turn\/[^/]+\/\d+$/.test(key)],
  ])('%s: what it flattened is removed', async (_, failing) => {
    const memory = new MemoryStore();
    const store = new FaultyStore(memory);
    const log = new SessionLog(store, { packMinRecords: 2, keepRecords: 1 });
    await log.create({ id: 's' });
    for (let n = 1; n <= 9; n++) {
      await turnOf(log, 's', `kept ${n}`);
      await turnOf(log, 's', `gone ${n}`);
      if (n < 9) await log.deleteTurn('s', n + 1);
    }
    // A call of the newest turn whose record never landed: a charge the delete counts.
    const begun = await log.beginTurn('s', { input: [user('charged')] });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    await log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {} });
    expect(await log.storeCharge(begun.turn, { usage: CHARGE })).toBe(true);
    const before = await contents(log, 's');
    const known = await levels(memory);
    store.failWhen(failing, { times: 1 });
    await expect(log.deleteTurn('s', 11)).rejects.toThrow();
    expect([...(await levels(memory))].filter((level) => !known.has(level))).toEqual([]);
    expect(await contents(log, 's')).toEqual(before);
    // Retried, it flattens: the charge counts once, before and after the session's next write.
    const usage = (await log.get('s')).usage;
    expect(usage.input_tokens).toBeGreaterThan(0);
    await log.deleteTurn('s', 11);
    expect((await log.get('s')).usage).toEqual(usage);
    await log.append('s', [user('after')]);
    expect((await log.get('s')).usage).toEqual(usage);
    expect(
      (await memory.list('sessions/s/', { limit: 10000 })).objects.filter((o) => o.key.includes('-charge-')),
    ).toEqual([]);
  });
});

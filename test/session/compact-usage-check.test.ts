import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { contextPrefix } from '../../lib/session/keys.ts';
import type { Summarize } from '../../lib/session/log/compaction.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SessionLog } from '../support/session-log.ts';

// A manual compaction's summary usage is added to the totals its record carries (and stored as
// the claim's spend when no record charges it), whose readers take whole, non-negative counts
// (`turnUsageSchema`): a usage they would refuse is refused before anything is stored, the claim
// ended charging nothing, and the session stays readable.

const user = (content: string): Item => ({ type: 'message', role: 'user', content });
const USAGE = {
  input_tokens: 40,
  cached_input_tokens: 0,
  cache_write_tokens: 0,
  output_tokens: 5,
  reasoning_tokens: 0,
  cost_usd: 0,
};
const CONTEXT = {
  start_seq: 3,
  summary: 's',
  summarized: { first_seq: 1, last_seq: 2 },
  interrupted: [],
  model: 'm',
};

const answering =
  (usage: typeof USAGE): Summarize =>
  async (_view, claim) => {
    await claim();
    return { context: CONTEXT, usage };
  };

describe("a manual compaction's summary usage its readers would refuse", () => {
  it.each([
    ['fractional', { ...USAGE, input_tokens: 1.5 }],
    ['negative', { ...USAGE, output_tokens: -2 }],
  ])('%s: refused, nothing stored, the session readable and free', async (_name, usage) => {
    const store = new MemoryStore();
    const log = new SessionLog(store);
    await log.create({ id: 'p' });
    await log.append('p', [user('a'), user('b'), user('c')]);
    await expect(log.compact('p', answering(usage))).rejects.toThrow(/invariant/);
    expect((await log.get('p')).usage).toMatchObject({ input_tokens: 0, output_tokens: 0 });
    expect((await store.list(contextPrefix(await log.scope('p')), { limit: 10 })).objects).toEqual([]);
    expect(await log.currentContext('p')).toBeNull();
    await log.append('p', [user('d')]);
    const { context } = await log.compact('p', answering(USAGE));
    expect(context?.start_seq).toBe(3);
    const cold = new SessionLog(store);
    expect((await cold.get('p')).usage).toMatchObject({ input_tokens: 40, output_tokens: 5 });
  });
});

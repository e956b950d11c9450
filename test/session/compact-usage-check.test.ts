import { describe, expect, it } from 'vitest';
import { contextPrefix } from '../../lib/session/keys.ts';
import { answering, CONTEXT, SUMMARY_USAGE as USAGE, threeItemSession, user } from '../support/refused-writes.ts';
import { SessionLog } from '../support/session-log.ts';

// A manual compaction's summary usage is added to the totals its record carries (and stored as
// the claim's spend when no record charges it), whose readers take whole, non-negative counts
// (`turnUsageSchema`): a usage they would refuse is refused before anything is stored, the claim
// ended charging nothing, and the session stays readable.

describe("a manual compaction's summary usage its readers would refuse", () => {
  it.each([
    ['fractional', { ...USAGE, input_tokens: 1.5 }],
    ['negative', { ...USAGE, output_tokens: -2 }],
  ])('%s: refused, nothing stored, the session readable and free', async (_name, usage) => {
    const { store, log } = await threeItemSession();
    await expect(log.compact('p', answering(CONTEXT, usage))).rejects.toThrow(/invariant/);
    expect((await log.get('p')).usage).toMatchObject({ input_tokens: 0, output_tokens: 0 });
    expect((await store.list(contextPrefix(await log.scope('p')), { limit: 10 })).objects).toEqual([]);
    expect(await log.currentContext('p')).toBeNull();
    await log.append('p', [user('d')]);
    const { context } = await log.compact('p', answering());
    expect(context?.start_seq).toBe(3);
    const cold = new SessionLog(store);
    expect((await cold.get('p')).usage).toMatchObject({ input_tokens: 40, output_tokens: 5 });
  });
});

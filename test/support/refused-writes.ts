import type { Summarize } from '../../lib/session/log/compaction.ts';
import type { TurnUsage } from '../../lib/ledger/usage.ts';
import type { NewContext } from '../../lib/session/log/types.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { user } from './charges.ts';
import { type OpenTurn, SessionLog, type SessionLogOptions } from './session-log.ts';

// Fixtures of the tests of writes refused before their put, as their readers would refuse what
// they carry (a completion, a spend, a compaction's context or summary usage).

export { user };

/** What a turn spent: 10 in, 2 out, at no known cost. */
export const SPENT = {
  input_tokens: 10,
  cached_input_tokens: 0,
  cache_write_tokens: 0,
  output_tokens: 2,
  reasoning_tokens: 0,
  cost_usd: null,
};

/** What a summary spent: 40 in, 5 out. */
export const SUMMARY_USAGE = { ...SPENT, input_tokens: 40, output_tokens: 5, cost_usd: 0 };

/** A context its readers take back: seqs 1 and 2 summarized, the context starting at seq 3. */
export const CONTEXT: NewContext = {
  start_seq: 3,
  summary: 's',
  summarized: { first_seq: 1, last_seq: 2 },
  interrupted: [],
  model: 'm',
};

/** A summarizer that claims the session, as the service's does, and answers `context` and `usage`. */
export const answering =
  (context: NewContext = CONTEXT, usage: TurnUsage = SUMMARY_USAGE): Summarize =>
  async (_view, claim) => {
    await claim();
    return { context, usage };
  };

/** Session `p` in a store of its own, its items `a`, `b` and `c` appended. */
export async function threeItemSession(options: Partial<SessionLogOptions> = {}) {
  const store = new MemoryStore();
  const log = new SessionLog(store, options);
  await log.create({ id: 'p' });
  await log.append('p', [user('a'), user('b'), user('c')]);
  return { store, log };
}

/** Session `s`, created by `sessions`, its turn 1 claimed with input `one`. */
export async function claimedTurn(sessions: SessionLog): Promise<OpenTurn> {
  await sessions.create({ id: 's' });
  const claimed = await sessions.beginTurn('s', { input: [user('one')] });
  if (claimed.kind !== 'claimed') throw new Error('expected a claim');
  return claimed.turn;
}

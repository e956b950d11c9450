import type { Item } from '../../lib/items.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import type { HeldCall } from './held-store.ts';
import type { OpenTurn, SessionLog } from './session-log.ts';

// Fixtures of the tests of charges (lib/session/log/charges.ts): what a model call spent whose
// turn's record never landed, stored as `turn/<g>/-charge-<id>` under session `s1`.

export const user = (content: string): Item => ({ type: 'message', role: 'user', content });

/** What a completed turn spent: 100 in, 5 out. */
export const USAGE = {
  input_tokens: 100,
  cached_input_tokens: 0,
  cache_write_tokens: 0,
  output_tokens: 5,
  reasoning_tokens: 0,
  cost_usd: 0,
};

/** What a charge spent: 10 in, 1 out. */
export const CHARGED = { ...USAGE, input_tokens: 10, output_tokens: 1 };

/** Whether `key` (a prefix too) is a charge's, its carried marker's included. */
export const isCharge = (key: string) => key.includes('/-charge-');

/** A delete's fence: its first put of a record (the turn's own is stored before). */
export const fencePut = ({ operation, keys }: HeldCall) =>
  operation === 'put' && keys[0]!.includes('/turn/') && !isCharge(keys[0]!);

/** A get of session `s1`'s config. */
export const configGet = ({ operation, keys }: HeldCall) =>
  operation === 'get' && keys[0] === sessionConfigKey('', 's1');

/** A listing of charges. */
export const chargeList = ({ operation, keys }: HeldCall) => operation === 'list' && isCharge(keys[0]!);

/** A put of a charge. */
export const chargePut = ({ operation, keys }: HeldCall) => operation === 'put' && isCharge(keys[0]!);

/** Claims a turn of session `s1` with input `content` and completes it, spending `USAGE`. */
export async function completedTurn(log: SessionLog, content: string): Promise<OpenTurn> {
  const begun = await log.beginTurn('s1', { input: [user(content)] });
  if (begun.kind !== 'claimed') throw new Error('expected a claim');
  await log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {}, usage: USAGE });
  return begun.turn;
}

/** Session `s1` whose turn 1 completed (`USAGE`): the turn a charge of its generation is stored for. */
export async function chargeableSession(log: SessionLog): Promise<OpenTurn> {
  await log.create({ id: 's1' });
  await completedTurn(log, 'a');
  return { scope: await log.scope('s1') } as OpenTurn;
}

/** Session `s1`'s totals once two writes (of `contents`) counted the charges that waited. */
export async function totalsAfterTwoWrites(log: SessionLog, contents: [string, string] = ['b', 'c']) {
  for (const content of contents) await log.append('s1', [user(content)]);
  return (await log.get('s1')).usage;
}

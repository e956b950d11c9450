import type { Item } from '../../lib/items.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { FaultyStore, type FaultyStoreOptions } from './faulty-store.ts';
import { type HeldCall, HeldStore } from './held-store.ts';
import { type OpenTurn, SessionLog, type SessionLogOptions } from './session-log.ts';

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

/** Session `s1`'s totals once its deleted turn's spend and one charge count: 110 in, 6 out. */
export const COUNTED = { turns: 1, input_tokens: 110, output_tokens: 6 };

/** Leases of `leaseMs` on a clock of their own that only `advance` moves. */
export function leaseClock(leaseMs: number) {
  let now = Date.parse('2026-01-01T00:00:00Z');
  return { options: { clock: () => new Date(now), leaseMs }, advance: (ms: number) => (now += ms) };
}

/** Appends of `contents` to session `s1`, each once the clock moved three leases on. */
export async function appendsLeasesApart(log: SessionLog, contents: string[], clock: ReturnType<typeof leaseClock>) {
  for (const content of contents) {
    clock.advance(3 * clock.options.leaseMs);
    await log.append('s1', [user(content)]);
  }
}

/** `check(k, after, label)` for each call `k` of `calls` a process may die at, that call landed or not. */
export async function forEachDeath(
  calls: number,
  check: (k: number, after: boolean, label: string) => Promise<void>,
): Promise<void> {
  for (let k = 1; k <= calls; k++)
    for (const after of [false, true])
      await check(k, after, `call ${k} of ${calls}, ${after ? 'landed' : 'not landed'}`);
}

/**
 * A process over `store` dying at its `k`th call from now on (that call landed when `after`, or
 * not), every call after it failing too; `calls` records each call seen (`<operation> <key>`).
 */
export function dieAt(store: FaultyStore, k: number, after: boolean): string[] {
  const calls: string[] = [];
  let dead = false;
  store.failWhen(() => dead);
  store.failWhen(
    ({ operation, key }) => {
      calls.push(`${operation} ${key}`);
      if (calls.length !== k) return false;
      dead = true;
      return true;
    },
    { after, times: 1 },
  );
  return calls;
}

/** How `fencedDelete` builds its log: the log's options, its FaultyStore's, whether the delete's failure is caught. */
export interface FencedDeleteOptions {
  log?: Partial<SessionLogOptions>;
  store?: FaultyStoreOptions;
  caught?: boolean;
}

/**
 * Session `s1` (`chargeableSession`) over a FaultyStore of `inner` behind a HeldStore; `charge`
 * stores a charge (`CHARGED`) of its generation, and `fenced` starts the delete of its turn 1 and
 * holds it at its fence (`fence`), `deleted` once released (its failure caught when `caught`).
 */
export async function heldSession(inner: ObjectStore, { log: options, store: faults }: FencedDeleteOptions = {}) {
  const faulty = new FaultyStore(inner, faults);
  const store = new HeldStore(faulty);
  const log = new SessionLog(store, options);
  const turn = await chargeableSession(log);
  const charge = () => log.storeCharge(turn, { usage: CHARGED });
  const fenced = async (caught = false) => {
    const fence = store.hold(fencePut);
    const deleting = log.deleteTurn('s1', 1);
    const deleted = caught ? deleting.catch(() => undefined) : deleting;
    await fence.reached;
    return { fence, deleted };
  };
  return { faulty, store, log, turn, charge, fenced };
}

/** `heldSession` with the delete of its turn 1 held at its fence. */
export async function fencedDelete(inner: ObjectStore, options: FencedDeleteOptions = {}) {
  const session = await heldSession(inner, options);
  return { ...session, ...(await session.fenced(options.caught)) };
}

/**
 * Session `s1` with a charge a delete of its newest turn left owed (`carry_from`): put after the
 * delete read its head, the delete's listings of charges failing, as a process that died once it
 * moved the config. Its store healed since.
 */
export async function owedByDelete(inner: ObjectStore) {
  const { faulty, log, charge, fence, deleted } = await fencedDelete(inner);
  if (!(await charge())) throw new Error('expected the charge stored');
  faulty.failWhen(({ operation, key }) => operation === 'list' && isCharge(key));
  fence.release();
  await deleted;
  faulty.heal();
  return { faulty, log };
}

/** Session `s1`'s totals and its row's (its listing's first). */
export async function usageAndRow(log: SessionLog) {
  const { usage } = await log.get('s1');
  const [row] = (await log.listSessions({ limit: 10 })).sessions;
  return { usage, row: row?.usage };
}

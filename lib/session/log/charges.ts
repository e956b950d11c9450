import { randomHex } from '../../hash.ts';
import { addToLedger, type Ledger } from '../../ledger/usage.ts';
import { firstToCreate } from '../../store/create-only.ts';
import { listAll, mapLimit } from '../../store/object-store.ts';
import { chargeKey, type LogScope } from '../keys.ts';
import type { LogRecord, StoppedSpendRecord } from '../records.ts';
import { backoff, PARALLEL_GETS, type LogContext } from './context.ts';
import { ledgerOf, scopeOf, type Head } from './head.ts';
import { configReading, parsedSpend, putSpend, shownLedger } from './unbilled.ts';

/**
 * Charges: what a model call spent whose turn's record never landed (its put failed, or its
 * process died before it), so that no record or completion of the turn counts it. The turn puts
 * it at `turn/<g>/-charge-<id>` (keys.ts chargeKey), which lists before every record of its
 * generation: the next write of the chain (a commit's `prepareCommit`, before its budget check)
 * finds it in the listing it reads anyway, gets it, adds it to the totals it carries and names it
 * in `charged`. A write that lists a charge the newest record names (counted already) names it
 * again and deletes it; one no longer listed is named no more. So each charge is counted by one
 * record of the chain: a record is written from the newest before it, which names every counted
 * charge still listed, and a charge, put once create-only, never lists again once deleted. A write
 * that does not land counted nothing; a failed get leaves the charge to the next write. A delete
 * of the newest turn moves the session to another generation: its fence counts (and deletes,
 * before the config moves) every charge its head listed, and one put after that is carried to
 * the generation the session moved to (carry), by the delete or by its writer (or, the delete
 * stopped first, by the next write: log/owed-charges.ts).
 */

/** The most charges one write counts (the others wait for the next write). */
const MAX_CHARGES = 16;

/**
 * The totals with the charges `listed` (ids, keys.ts chargeKey) that `newest` does not name, and
 * the ids to name. `all`: every one of them, a failed get thrown (a write no later one of the
 * generation follows), not MAX_CHARGES at most, one whose get failed left to the next write.
 */
export async function billCharges(
  log: LogContext,
  scope: LogScope,
  listed: readonly string[],
  newest: { record: LogRecord } | null | undefined,
  ledger: Ledger,
  all = false,
): Promise<{ ledger: Ledger; charged: string[] }> {
  if (listed.length === 0) return { ledger, charged: [] };
  const named = new Set(newest?.record.charged ?? []);
  const counted = listed.filter((id) => named.has(id));
  // Counted by a record that landed: gone, it is named no more (a failed delete: named again).
  if (counted.length > 0) log.store.delete(counted.map((id) => chargeKey(scope, id))).catch(() => undefined);
  const found = await uncounted(log, scope, listed, named, all);
  return { ledger: found.reduce(withCharge, ledger), charged: [...counted, ...found.map((charge) => charge.id)] };
}

/**
 * `head` with the charges its listing shows counted in its newest record's totals and named in
 * its `charged`: for a delete of the newest turn, whose fence and next generation carry the totals
 * on. That generation lists none of this one's charges, so every one listed is counted here, and
 * a get that fails refuses the delete (thrown, before anything is written). Not `fresh` (the
 * newest record is another delete's fence, whose config may land instead): only those it names,
 * the others left to be carried on (carriedOn) by whichever delete moves the config.
 */
export async function withCharges(log: LogContext, head: Head, fresh = true): Promise<Head> {
  const { newest, cursor, scope } = head;
  if (!newest || cursor.charges.length === 0) return head;
  const named = new Set(newest.record.charged ?? []);
  const listed = fresh ? cursor.charges : cursor.charges.filter((id) => named.has(id));
  const billed = await billCharges(log, scope, listed, newest, ledgerOf(newest), true);
  const record = { ...newest.record, ledger: billed.ledger, charged: billed.charged };
  const done = newest.done?.ledger ? { ...newest.done, ledger: billed.ledger } : newest.done;
  return { ...head, newest: { ...newest, record, done } };
}

/**
 * What a read of the session shows as its totals: the newest record's, with what stopped turns
 * stored (log/unbilled.ts shownLedger) and the charges its listing showed that the record does
 * not count yet, as the next write will (gets only; a get that fails counts nothing). `all`
 * (an export, whose totals an import goes on from): every one of those charges, not MAX_CHARGES
 * at most, a failed get thrown.
 */
export async function shownTotals(
  log: LogContext,
  scope: LogScope,
  { newest, cursor }: { newest: Head['newest']; cursor: { charges: readonly string[] } },
  all = false,
): Promise<Ledger> {
  const ledger = await shownLedger(log, scope, newest);
  if (cursor.charges.length === 0) return ledger;
  const found = await uncounted(log, scope, cursor.charges, new Set(newest?.record.charged ?? []), all);
  return found.reduce(withCharge, ledger);
}

/**
 * The charges of `listed` not `named`, as stored: at most MAX_CHARGES, one whose get failed left
 * out; `all`: every one, PARALLEL_GETS at a time, a failed get thrown.
 */
async function uncounted(
  log: LogContext,
  scope: LogScope,
  listed: readonly string[],
  named: ReadonlySet<string>,
  all = false,
): Promise<{ id: string; spent: StoppedSpendRecord | null }[]> {
  const fresh = listed.filter((id) => !named.has(id));
  const get = (id: string) =>
    log.store.get(chargeKey(scope, id)).then((object) => (object ? { id, spent: parsedSpend(object.body) } : null));
  const found = all
    ? await mapLimit(fresh, PARALLEL_GETS, get)
    : await Promise.all(fresh.slice(0, MAX_CHARGES).map((id) => get(id).catch(() => null)));
  return found.filter((charge) => charge !== null);
}

/** `totals` with a charge's usage and, for a stopped turn's spend stored as a charge, its summary's. */
function withCharge(totals: Ledger, { spent }: { spent: StoppedSpendRecord | null }): Ledger {
  const used = spent?.usage ? addToLedger(totals, spent.usage, 0) : totals;
  return spent?.summary_usage ? addToLedger(used, spent.summary_usage, 0) : used;
}

/**
 * Deletes the charges a delete of the newest turn counted in its fence (landed; withCharges's head),
 * before it moves the config: once it did, a charge of the generation left that is still there
 * is one no write counted (carriedOn). A delete that fails is thrown (the delete goes no further).
 */
export async function dropCharges(log: LogContext, { scope, cursor, newest }: Head): Promise<void> {
  const ids = cursor.charges.length > 0 ? (newest?.record.charged ?? []) : [];
  if (ids.length > 0) await log.store.delete(ids.map((id) => chargeKey(scope, id)));
}

/**
 * Stores a charge of `scope` (what a call spent whose turn's record never landed), then reads the
 * config: a delete of the newest turn that moved the session to another generation meanwhile
 * gets it carried there (carry); a delete of the session (or one deleted and created again), it
 * is deleted again (a sweep may have passed before it landed). False when it will not be counted.
 */
export async function storeCharge(
  log: LogContext,
  scope: LogScope,
  spent: Omit<StoppedSpendRecord, 'format'>,
): Promise<boolean> {
  const id = randomHex(8);
  if (!(await putSpend(log, chargeKey(scope, id), spent))) return false;
  const now = await movedTo(log, scope);
  if (now === scope) return true;
  if (now) return carry(log, scope, id, now);
  await log.store.delete([chargeKey(scope, id)]);
  return false;
}

/**
 * Where the session `scope` was read from is now, by its config (read now): `scope` itself while
 * the config names its generation, the scope of the generation a delete of its newest turn moved
 * it to (the config reads `scope`'s generation, names it in `queued_in`, or is of the same
 * incarnation), else null (the session deleted, or deleted and created again).
 */
async function movedTo(log: LogContext, scope: LogScope): Promise<LogScope | null> {
  const { config, reads } = await configReading(log, scope);
  if (!config) return null;
  if ((config.generation ?? '') === scope.generation) return scope;
  // A delete of the newest turn names the generation it left in `queued_in` (never taken out),
  // whether or not the config names its incarnation or reads that generation.
  const left = (config.queued_in ?? []).includes(scope.generation);
  const same = config.incarnation !== undefined && config.incarnation === scope.incarnation;
  return reads || left || same ? scopeOf(log.keyPrefix, config) : null;
}

/** How many times a delete of the newest turn lists the charges of the generation it left (carriedOn). */
export const CARRY_ATTEMPTS = 3;

/**
 * After a delete of the newest turn moved the config off the generation of `left` (the charges
 * its fence counted deleted before): every charge still there, which no write counted (put after
 * the delete read its head), carried to the generation the config names now. No write lists that
 * generation on its own again, and its writer may have read the config before it moved: the
 * config names it in `carry_from` until this ran once without a failure (log/owed-charges.ts). A
 * failure lists it again, up to `attempts` times in all (one carried or being carried has its
 * marker, and is passed over); the last one is thrown.
 */
export async function carriedOn(log: LogContext, left: LogScope, attempts = CARRY_ATTEMPTS): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await carryLeft(log, left);
    } catch (error) {
      if (attempt + 1 >= attempts) throw error;
      await backoff(attempt);
    }
  }
}

/** One listing of carriedOn: carries each charge of `left` that has no marker. */
async function carryLeft(log: LogContext, left: LogScope): Promise<void> {
  const prefix = chargeKey(left, '');
  // Page after page: a page may hold fewer keys than asked while truncated (R2).
  const names = (await listAll(log.store, prefix)).map((object) => object.key.slice(prefix.length));
  const marked = new Set(names.filter((name) => name.endsWith(CARRIED)).map((name) => name.slice(0, -CARRIED.length)));
  const ids = names.filter((name) => !name.endsWith(CARRIED) && !marked.has(name));
  if (ids.length === 0) return;
  const to = await movedTo(log, left);
  if (to && to !== left) await mapLimit(ids, PARALLEL_GETS, (id) => carry(log, left, id, to));
}

/** What a charge's name takes on while it is carried to another generation (carry). */
const CARRIED = '.carried';

/**
 * Carries charge `id` of `from`, a generation the session left, to `to`: as a new charge there
 * (storeCharge, which carries it on again when the session left `to` too), then deleted here.
 * Its writer (storeCharge) and the delete that left `from` (carriedOn) may both carry it: the one
 * whose create-only marker (`<charge key>.carried`, a random body, which a listing of the log
 * passes over) lands does (its own found there after a refusal, or a lost answer, too), the other
 * leaves it. One that is gone was counted (by the fence of the delete that left
 * `from`, which deleted it before it moved the config) or carried already. A failure after the
 * marker leaves it (counted nowhere, as a charge whose put failed), and the marker, which goes
 * only once the charge is gone; true unless it was not stored.
 */
async function carry(log: LogContext, from: LogScope, id: string, to: LogScope): Promise<boolean> {
  const key = chargeKey(from, id);
  // A marker refused, or unanswered, that is its own landed (a store's retry refused by its first attempt).
  if (!(await firstToCreate(log.store, `${key}${CARRIED}`)).first) return true;
  const object = await log.store.get(key);
  const spent = object ? parsedSpend(object.body) : null;
  const { format: _, ...carried } = spent ?? { format: 'tailgate.spent.v1' };
  const stored = spent ? await storeCharge(log, to, carried) : true;
  // The charge before its marker (a batch delete keeps no order): a marker gone while the charge
  // is still there would let its other carrier carry it again.
  await log.store.delete([key]);
  await log.store.delete([`${key}${CARRIED}`]);
  return stored;
}

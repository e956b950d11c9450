import { randomHex } from '../../hash.ts';
import { addToLedger, type Ledger } from '../../ledger/usage.ts';
import { mapLimit } from '../../store/object-store.ts';
import { chargeKey, type LogScope } from '../keys.ts';
import type { LogRecord, StoppedSpendRecord } from '../records.ts';
import { PARALLEL_GETS, type LogContext } from './context.ts';
import { ledgerOf, type Head } from './head.ts';
import { parsedSpend, shownLedger, storeSpend } from './unbilled.ts';

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
 * that does not land counted nothing; a failed get leaves the charge to the next write.
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
 * a get that fails refuses the delete (thrown, before anything is written).
 */
export async function withCharges(log: LogContext, head: Head): Promise<Head> {
  const { newest, cursor, scope } = head;
  if (!newest || cursor.charges.length === 0) return head;
  const billed = await billCharges(log, scope, cursor.charges, newest, ledgerOf(newest), true);
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

function withCharge(totals: Ledger, { spent }: { spent: StoppedSpendRecord | null }): Ledger {
  return spent?.usage ? addToLedger(totals, spent.usage, 0) : totals;
}

/**
 * Deletes the charges `ids` of `scope` once no write of the session lists them again (a delete
 * of the newest turn moved it to a new generation, its fence having counted them); a delete that
 * fails leaves them, counted, until the session's sweep.
 */
export async function dropCharges(log: LogContext, scope: LogScope, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await log.store.delete(ids.map((id) => chargeKey(scope, id))).catch(() => undefined);
}

/** Stores a charge of `scope` (what a call spent whose turn's record never landed): false when it was not. */
export function storeCharge(
  log: LogContext,
  scope: LogScope,
  spent: Omit<StoppedSpendRecord, 'format'>,
): Promise<boolean> {
  return storeSpend(log, scope, chargeKey(scope, randomHex(8)), spent);
}

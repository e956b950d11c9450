import { randomHex } from '../../hash.ts';
import { addToLedger, type Ledger } from '../../ledger/usage.ts';
import { firstToCreate } from '../../store/create-only.ts';
import { decodeUtf8, listAll, mapLimit } from '../../store/object-store.ts';
import { chargeKey, generationSchemaPattern, sessionConfigKey, type LogScope } from '../keys.ts';
import { StorageError } from '../../errors.ts';
import type { LogRecord, StoppedSpendRecord } from '../records.ts';
import { backoff, PARALLEL_GETS, type LogContext } from './context.ts';
import { ledgerOf, readConfig, scopeOf, type Head } from './head.ts';
import { configReading, parsedSpend, putSpendAt, shownLedger } from './unbilled.ts';

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
  if (counted.length > 0)
    deleteCharges(
      log,
      counted.map((id) => chargeKey(scope, id)),
    ).catch(() => undefined);
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
  await deleteCharges(
    log,
    ids.map((id) => chargeKey(scope, id)),
  );
}

/**
 * Stores a charge of `scope` (what a call spent whose turn's record never landed), then reads the
 * config: a delete of the newest turn that moved the session to another generation meanwhile
 * gets it carried there (carry); a delete of the session (or one deleted and created again), it
 * is deleted again (a sweep may have passed before it landed). False when it will not be counted.
 * `carried`: the id of a charge a carry puts here (carryOn), create-only under that id.
 */
export async function storeCharge(
  log: LogContext,
  scope: LogScope,
  spent: Omit<StoppedSpendRecord, 'format'>,
  carried?: string,
): Promise<boolean> {
  const id = carried ?? randomHex(8);
  const put = await putSpendAt(log, chargeKey(scope, id), spent);
  if (carried !== undefined) {
    // Found there: put by an earlier try of its carry. Not told: its carry goes no further (resumed).
    if (put === 'unknown') throw new StorageError(`the carried charge ${chargeKey(scope, id)} was not stored`);
  } else if (put !== 'stored') return false;
  const now = await movedTo(log, scope);
  if (now === scope) return true;
  if (!now) {
    await log.store.delete([chargeKey(scope, id)]);
    return false;
  }
  // Owed first: a carrier that stops after its marker leaves the carry to a later write.
  await oweAgain(log, scope).catch(() => undefined);
  return (await carry(log, scope, id, now)) !== false;
}

/** How many times a writer that carries a charge tries to put the config naming its generation in `carry_from`. */
const OWE_ATTEMPTS = 3;

/**
 * Names `left`, a generation the session left, in the config's `carry_from`, with a new random
 * `carry_mark` (if-match, read again when refused): a write that read the config before this put,
 * and listed `left` before this charge landed, cannot take it out (its put, if-match, refused),
 * so a carry of it stopped after its marker is resumed by the write after (carriedOn).
 */
async function oweAgain(log: LogContext, left: LogScope): Promise<void> {
  for (let attempt = 0; attempt < OWE_ATTEMPTS; attempt++) {
    const { config, info } = await readConfig(log, left.id);
    if ((config.generation ?? '') === left.generation) return;
    const carry_from = [left.generation, ...(config.carry_from ?? []).filter((g) => g !== left.generation)];
    const next = { ...config, carry_from, carry_mark: randomHex(8) };
    const put = { ifMatch: info.etag, contentType: 'application/json' };
    if (await log.store.put(sessionConfigKey(log.keyPrefix, left.id), JSON.stringify(next), put)) return;
    await backoff(attempt);
  }
  throw new StorageError(`session ${left.id}: too many concurrent updates`);
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
 * config names it in `carry_from` until this ran once without a failure and left no carry
 * unfinished (log/owed-charges.ts; true then). A failure lists it again, up to `attempts` times in
 * all (one carried or being carried has its marker, and is passed over, or resumed once that
 * marker is older than a lease); the last one is thrown. `onMoved` is called for each charge this
 * call put under the generation the config names (a failure after it does not take it back).
 */
export async function carriedOn(
  log: LogContext,
  left: LogScope,
  attempts = CARRY_ATTEMPTS,
  onMoved: () => void = () => undefined,
): Promise<boolean> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await carryLeft(log, left, onMoved);
    } catch (error) {
      if (attempt + 1 >= attempts) throw error;
      await backoff(attempt);
    }
  }
}

/**
 * One listing of carriedOn: carries each charge of `left` that has no marker, and finishes each
 * carry whose marker is older than a lease (its carrier stopped: resume). True when no carry is
 * left unfinished (one whose marker is younger, its carrier taken to be at it: listed again).
 */
async function carryLeft(log: LogContext, left: LogScope, onMoved: () => void): Promise<boolean> {
  const prefix = chargeKey(left, '');
  // Page after page: a page may hold fewer keys than asked while truncated (R2).
  const names = (await listAll(log.store, prefix)).map((object) => object.key.slice(prefix.length));
  const charges = new Set(names.filter((name) => !name.includes('.')));
  const marked = names.filter((name) => name.endsWith(CARRIED)).map((name) => name.slice(0, -CARRIED.length));
  const ids = [...charges].filter((id) => !marked.includes(id));
  if (ids.length === 0 && marked.length === 0) return true;
  const to = await movedTo(log, left);
  if (!to || to === left) return true;
  // A marker another carrier put since the listing: its carry may be unfinished (listed again).
  const carried = await mapLimit(ids, PARALLEL_GETS, (id) => carry(log, left, id, to, onMoved));
  const finished = await mapLimit(marked, PARALLEL_GETS, (id) => resume(log, left, id, charges.has(id), onMoved));
  return carried.every((outcome) => outcome !== THEIRS) && finished.every(Boolean);
}

/** What carry answers when another carrier's marker is there: that carry may not be finished. */
const THEIRS = 'theirs';

/** What a charge's name takes on while it is carried to another generation (carry). */
const CARRIED = '.carried';

/** The name of a carried charge's copy under the generation it is carried to, before it is a charge there (carry). */
const PENDING = '.pending';

/**
 * Deletes the charges `keys`, each one's pending copy (carry) before it: a charge put by a carry
 * is gone only once its copy is, which tells a carry resumed that it landed.
 */
async function deleteCharges(log: LogContext, keys: string[]): Promise<void> {
  if (keys.length === 0) return;
  await log.store.delete(keys.map((key) => `${key}${PENDING}`));
  await log.store.delete(keys);
}

/**
 * Carries charge `id` of `from`, a generation the session left, to `to`. Its writer (storeCharge)
 * and whoever lists `from` once the config moved (carriedOn) may both carry it: the one whose
 * create-only marker (`<charge key>.carried`, its body `<ms>:<to's generation>:<random>`, which a
 * listing of the log passes over) lands does (its own found there after a refusal, or a lost
 * answer, too), the other leaves it. One that is gone was counted (by the fence of the delete
 * that left `from`, which deleted it before it moved the config) or carried already. The carry
 * (carryOn) can be resumed where it stopped, so a carrier that stops after its marker leaves it to
 * the next listing once the marker is older than a lease; true unless it was not stored, THEIRS
 * when another carrier's marker is there (its carry may be unfinished). `onMoved`: see carryOn.
 */
async function carry(
  log: LogContext,
  from: LogScope,
  id: string,
  to: LogScope,
  onMoved: () => void = () => undefined,
): Promise<boolean | typeof THEIRS> {
  const key = chargeKey(from, id);
  const since = log.clock().getTime();
  // A marker refused, or unanswered, that is its own landed (a store's retry refused by its first attempt).
  if (!(await firstToCreate(log.store, `${key}${CARRIED}`, `${since}:${to.generation}`)).first) return THEIRS;
  const object = await log.store.get(key);
  return carryOn(log, from, id, to, object ? parsedSpend(object.body) : null, object !== null, since, onMoved);
}

/**
 * A carry once its marker landed: the charge `spent` copied to `<to's charge key>.pending`, then
 * deleted (`there`: not yet), then put as a charge of `to` under its own id, create-only (a
 * charge there already is this one: storeCharge, which carries it on again when the session left
 * `to` too), then its copy deleted, then the marker. Each step can be done again: while the charge
 * is there no copy was put as a charge; while its copy is, the one put is not deleted yet (a
 * charge's copy goes before it, deleteCharges), so a put again is refused. A carrier that took more
 * than half a lease since `since` stops (thrown): one resuming may be at it. False when the put
 * under `to` failed; `onMoved` is called as soon as it landed (or was found there), before the
 * deletes after it, so a failure of those does not hide that the charge is under `to` now.
 */
async function carryOn(
  log: LogContext,
  from: LogScope,
  id: string,
  to: LogScope,
  spent: StoppedSpendRecord | null,
  there: boolean,
  since: number,
  onMoved: () => void,
): Promise<boolean> {
  const key = chargeKey(from, id);
  const pending = `${chargeKey(to, id)}${PENDING}`;
  const inTime = () => {
    if (log.clock().getTime() - since > log.leaseMs / 2) throw new StorageError(`the carry of ${key} took too long`);
  };
  let stored = true;
  if (there && spent) {
    inTime();
    await log.store.put(pending, JSON.stringify(spent), { contentType: 'application/json' });
  }
  if (there) await deleteCharges(log, [key]);
  if (spent) {
    inTime();
    const { format: _, ...carried } = spent;
    stored = await storeCharge(log, to, carried, id);
    if (stored) onMoved();
    await log.store.delete([pending]);
  }
  await log.store.delete([`${key}${CARRIED}`]);
  return stored;
}

/**
 * Resumes the carry of charge `id` of `from` whose marker is older than a lease (its carrier
 * stopped; `there`: the charge was listed), once it put the marker again with its own time,
 * if-match (so it is the carrier now, with half a lease to go): from the charge, or, gone, from
 * its pending copy under the generation the marker names (none: carried, only its marker left).
 * False when the marker is younger (its carrier may be at it) or its put was refused (another
 * resumes it); a marker that names no time (older code's) is left as it was, true. `onMoved`: see
 * carryOn.
 */
async function resume(
  log: LogContext,
  from: LogScope,
  id: string,
  there: boolean,
  onMoved: () => void,
): Promise<boolean> {
  const key = chargeKey(from, id);
  const marker = await log.store.get(`${key}${CARRIED}`);
  if (!marker) return true;
  const [ms, generation] = decodeUtf8(marker.body).split(':');
  if (!generation?.match(generationSchemaPattern) || !/^\d+$/.test(ms ?? '')) return true;
  const now = log.clock().getTime();
  if (now - Number(ms) <= log.leaseMs) return false;
  // Taken over (if-match, a body of its own): of writes resuming it at once one goes on, the
  // others find it younger than a lease; failed, it is listed again.
  const body = `${now}:${generation}:${crypto.randomUUID()}`;
  const taken = await log.store.put(`${key}${CARRIED}`, body, { ifMatch: marker.etag }).catch(() => null);
  if (!taken) return false;
  const to = { keyPrefix: from.keyPrefix, id: from.id, generation };
  const source = there ? await log.store.get(key) : null;
  const object = source ?? (await log.store.get(`${chargeKey(to, id)}${PENDING}`));
  await carryOn(log, from, id, to, object ? parsedSpend(object.body) : null, source !== null, now, onMoved);
  return true;
}

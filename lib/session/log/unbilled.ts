import { randomHex } from '../../hash.ts';
import { addToLedger, type Ledger } from '../../ledger/usage.ts';
import { claimSpentKey, doneKey, sessionConfigKey, spentKey, type LogScope } from '../keys.ts';
import {
  doneSchema,
  parseStoredOrUndefined,
  sessionConfigSchema,
  stoppedSpendSchema,
  type DoneRecord,
  type LogRecord,
  type SessionConfig,
  type StoppedSpendRecord,
  type Unbilled,
} from '../records.ts';
import { checkInvariant, type LogContext } from './context.ts';
import { ledgerOf } from './head.ts';

/**
 * The spend of turns closed by someone else, counted in the session's totals (docs/STORAGE.md,
 * "Stopped spend"). The closer's completion knows nothing of what the stopped turn's aborted model
 * call spent; the stopped turn learns of the close later (at once, or at its next lease renewal)
 * and puts what it spent, create-only, at `spent/<generation>/<turn>`. The closer's completion
 * names the turn in `unbilled`, which every record and completion after it carries on until a write
 * of the chain (a record's commit, before its budget check; a turn's own completion) reads that
 * object: it adds the spend to the totals it carries and drops the turn, in the one create-only
 * object. The chain is a line of create-only writes, each from the newest one before it, so the
 * write that counts it is the only one that drops it: counted once, whoever crashed where. A write
 * that finds nothing there once SPENT_WAIT_LEASES leases passed since the close (the stopped turn
 * died, or never called a model) puts an empty object create-only, and drops the turn: whichever
 * put lands first decides, so a stopped turn whose put is refused then stores its spend as a
 * charge instead (log/charges.ts), which the chain counts once; so does a write that finds more
 * than MAX_UNBILLED turns named, for the oldest, and so does a run of a background turn whose
 * other run, closed by the same close, stored its spend first. Only a chain whose
 * newest object names a turn reads anything more (one get per turn named, bounded by MAX_UNBILLED).
 */

/** How long, in leases after its close, the chain waits for a stopped turn's spend. */
export const SPENT_WAIT_LEASES = 2;

/**
 * The most turns the chain waits for at once: a write that reads more (turns closed faster than
 * their stopped owners store, or owners that died) stops waiting for the oldest of them at once,
 * as past their wait, so no write reads more than one turn past it and no record grows with them.
 */
export const MAX_UNBILLED = 16;

/** The turns not yet counted, as of the newest record (its completion decides; absent: none). */
export function unbilledOf(newest: { record: LogRecord; done: DoneRecord | null } | null | undefined): Unbilled {
  if (!newest) return [];
  return (newest.done ? newest.done.unbilled : newest.record.unbilled) ?? [];
}

/** The totals with what the turns of `unbilled` found stored spent, and the turns still waited for. */
export interface Billed {
  ledger: Ledger;
  unbilled: Unbilled;
  /** Some turn was dropped: the totals (or the list) changed. */
  changed: boolean;
}

/** Whether `entry` is a turn `billed` counted (so dropped). */
export function counted(billed: Billed & { read: Readonly<Unbilled> }, entry: Unbilled[number]): boolean {
  const same = (other: Unbilled[number]) =>
    other.generation === entry.generation && spentName(other) === spentName(entry);
  return billed.read.some(same) && !billed.unbilled.some(same);
}

/** Reads the spend of each turn of `unbilled` (nothing when there is none) and adds what is found to `ledger`. */
export async function billStopped(
  log: LogContext,
  scope: LogScope,
  unbilled: Readonly<Unbilled>,
  ledger: Ledger,
): Promise<Billed & { read: Readonly<Unbilled> }> {
  if (unbilled.length === 0) return { ledger, unbilled: [], changed: false, read: unbilled };
  const overdue = unbilled.length - MAX_UNBILLED;
  const found = await Promise.all(unbilled.map((entry, index) => spentOf(log, scope, entry, index < overdue)));
  const left = unbilled.filter((_, index) => found[index] === undefined);
  const totals = found.reduce(withSpend, ledger);
  return { ledger: totals, unbilled: left, changed: left.length < unbilled.length, read: unbilled };
}

/**
 * The totals of `newest` with what the turns it names unbilled stored spent, which the chain's
 * next write counts (a claim's budget check counts it already): what a read of the session shows.
 * Reads only (one get per turn named; nothing when none is); a read that fails counts nothing.
 */
export async function shownLedger(
  log: LogContext,
  scope: LogScope,
  newest: { record: LogRecord; done: DoneRecord | null } | null,
): Promise<Ledger> {
  const ledger = ledgerOf(newest);
  const unbilled = unbilledOf(newest);
  if (unbilled.length === 0) return ledger;
  const found = await Promise.all(
    unbilled.map(async (entry) => {
      const object = await log.store.get(spentKeyOf(scope, entry)).catch(() => null);
      return object ? parsedSpend(object.body) : undefined;
    }),
  );
  return found.reduce(withSpend, ledger);
}

/** `totals` with what one stopped turn spent (nothing when none is known). */
function withSpend(totals: Ledger, spent: StoppedSpendRecord | null | undefined): Ledger {
  const used = spent?.usage ? addToLedger(totals, spent.usage, 0) : totals;
  return spent?.summary_usage ? addToLedger(used, spent.summary_usage, 0) : used;
}

/** What an entry names: a turn, or a compaction's claim. */
function spentName(entry: Unbilled[number]): string {
  return 'claim' in entry ? `claim ${entry.claim}` : `turn ${entry.turn}`;
}

/** Where the turn or claim `entry` names stored what it spent (its generation's, of the session of `scope`). */
function spentKeyOf(scope: LogScope, entry: Unbilled[number]): string {
  const held = { keyPrefix: scope.keyPrefix, id: scope.id, generation: entry.generation };
  return 'claim' in entry ? claimSpentKey(held, entry.claim) : spentKey(held, entry.turn);
}

/**
 * A write that passes over `newest`, a manual compaction's claim whose lease ran out (not its own
 * compaction's, `heldBy`; lib/session/log/compaction-claim.ts), names the claim unbilled: neither
 * the compaction's record nor the one ending its claim can follow it now, and the compaction
 * stores its summary's usage at its `spent/` key instead (storeSpend), which the chain counts.
 */
export function passedClaim(
  scope: LogScope,
  newest: { record: LogRecord } | null | undefined,
  closedAt: string,
  heldBy?: string,
): Unbilled {
  const record = newest?.record;
  if (record?.kind !== 'compact' || !record.lease_expires_at || record.writer === heldBy) return [];
  return [{ generation: scope.generation, claim: record.record, closed_at: closedAt }];
}

/**
 * Whether `entry` names the claim `ownClaim` of `scope`'s generation: the compaction's own record,
 * which charges that claim's summary, drops it, so what the compaction stored for it (when it did
 * not learn that its record landed) is never counted as well.
 */
export function chargesClaim(scope: LogScope, entry: Unbilled[number], ownClaim: number | undefined): boolean {
  return (
    ownClaim !== undefined && 'claim' in entry && entry.claim === ownClaim && entry.generation === scope.generation
  );
}

/** A stored spend's body: null when nothing is known (empty, or not a spend record). */
export function parsedSpend(body: Uint8Array): StoppedSpendRecord | null {
  return body.length === 0 ? null : (parseStoredOrUndefined(body, stoppedSpendSchema) ?? null);
}

/**
 * What is stored at the turn's `spent/` key: undefined while nothing is (or a read or put
 * failed: the next write tells), null when nothing is known (empty, or not a spend record).
 * `overdue`: waited for no longer, whatever the time (MAX_UNBILLED).
 */
async function spentOf(
  log: LogContext,
  scope: LogScope,
  entry: Unbilled[number],
  overdue: boolean,
): Promise<StoppedSpendRecord | null | undefined> {
  const key = spentKeyOf(scope, entry);
  try {
    const object = await log.store.get(key);
    if (object) return parsedSpend(object.body);
    const waited = log.clock().getTime() >= Date.parse(entry.closed_at) + SPENT_WAIT_LEASES * log.leaseMs;
    if (!waited && !overdue) return undefined;
    // Waited long enough: nothing known, unless the stopped turn's put lands first.
    if (await log.store.put(key, '', { onlyIfAbsent: true })) return null;
    const again = await log.store.get(key);
    return again ? parsedSpend(again.body) : undefined;
  } catch {
    return undefined;
  }
}

/** Puts a spend at `key`, create-only: false when another is there (the chain stopped waiting) or the put failed. */
export async function putSpend(
  log: LogContext,
  key: string,
  spent: Omit<StoppedSpendRecord, 'format'>,
): Promise<boolean> {
  return (await putSpendAt(log, key, spent)) === 'stored';
}

/** The metadata key of a spend put's own random mark, which tells its object from another's (lower case: S3). */
const SPEND_MARK = 'tailgate-spend';

/**
 * putSpend, telling why a put is not stored: `other` when the key holds what another put there,
 * `unknown` when it cannot tell (its key not read). A put refused, or failed, may have landed all
 * the same (a store's retry refused by its own first attempt; an answer lost after the write), and
 * another's put may carry the same body (two runs of a background turn spending alike): the
 * object there is this put's when it carries its mark.
 */
export async function putSpendAt(
  log: LogContext,
  key: string,
  spent: Omit<StoppedSpendRecord, 'format'>,
): Promise<'stored' | 'other' | 'unknown'> {
  // As every read of it parses it (parsedSpend): one it refused would count as nothing spent.
  const record = { format: 'tailgate.spent.v1', ...spent } satisfies StoppedSpendRecord;
  checkInvariant(stoppedSpendSchema, record);
  const body = JSON.stringify(record);
  const mark = randomHex(8);
  const options = { onlyIfAbsent: true, contentType: 'application/json', metadata: { [SPEND_MARK]: mark } };
  try {
    if (await log.store.put(key, body, options)) return 'stored';
  } catch {
    // A lost answer: the key tells.
  }
  const stored = await log.store.get(key).catch(() => null);
  if (stored === null) return 'unknown';
  return stored.metadata[SPEND_MARK] === mark ? 'stored' : 'other';
}

/**
 * Stores what `turn` (of record `record`, run by `writer`), closed by someone else, spent,
 * create-only: `stored` when the session's totals count it from there; `counted` when its own
 * completion landed after all (unseen: its answer lost), which counted it; `elsewhere` when no
 * write of the chain counts it from there, so it is to be stored as a charge (log/charges.ts): its
 * lease was taken over (`takenOver`: another run of a background turn, whose completion names
 * nothing unbilled), the completion that ended the turn never waited for it (another run's), or
 * the key holds what another put there (another run of the turn, closed by the same close, stored
 * its own; or the chain stopped waiting and counted nothing); `lost` when the put cannot be told
 * (failed or refused, its key not read), or it landed after a delete of its session (or a delete
 * of its newest turn's, which keeps the generation it names: the config reads it) swept the
 * generation, and is removed again.
 */
export async function storeStoppedSpend(
  log: LogContext,
  scope: LogScope,
  turn: { turn: number; record: number; writer: string },
  spent: Omit<StoppedSpendRecord, 'format'>,
  takenOver = false,
): Promise<'stored' | 'counted' | 'elsewhere' | 'lost'> {
  const closer = await closerOf(log, scope, turn);
  if (closer === 'own') return 'counted';
  if (takenOver || closer === 'other') return 'elsewhere';
  const key = spentKey(scope, turn.turn);
  const put = await putSpendAt(log, key, spent);
  if (put === 'other') return 'elsewhere';
  if (put === 'unknown') return 'lost';
  return (await keptUnlessSwept(log, scope, key)) ? 'stored' : 'lost';
}

/**
 * Who ended `turn`: `own` its own completion (landed, its answer lost); `waits` a completion that
 * waits for its spend (a close by someone else names the turn unbilled, log/lease.ts), or none
 * read (none yet, gone, packed since, a failed read: taken to wait); `other` the completion of
 * another run of a background turn (run twice, its lease taken over), which does not wait, so the
 * run it refused stores its spend as a charge instead.
 */
async function closerOf(
  log: LogContext,
  scope: LogScope,
  { turn, record, writer }: { turn: number; record: number; writer: string },
): Promise<'own' | 'waits' | 'other'> {
  const object = await log.store.get(doneKey(scope, record)).catch(() => null);
  const done = object?.body.length ? parseStoredOrUndefined(object.body, doneSchema) : undefined;
  if (!done) return 'waits';
  if (done.writer === writer) return 'own';
  const named = (done.unbilled ?? []).some(
    (entry) => 'turn' in entry && entry.turn === turn && entry.generation === scope.generation,
  );
  return named ? 'waits' : 'other';
}

/**
 * storeStoppedSpend's put at `spentAt`, removed again when a delete's sweep ran before it landed;
 * also what a manual compaction made (`summary_usage`; none: it made none) when neither its record
 * nor the one ending its claim landed (`claimSpentKey` of its claim's record,
 * lib/session/log/compaction-claim.ts): counted once a write passed its claim over (passedClaim),
 * else never (its own record, landed unseen, charged it). False when it will not be counted.
 */
export async function storeSpend(
  log: LogContext,
  scope: LogScope,
  spentAt: string,
  spent: Omit<StoppedSpendRecord, 'format'>,
): Promise<boolean> {
  if (!(await putSpend(log, spentAt, spent))) return false;
  return keptUnlessSwept(log, scope, spentAt);
}

/**
 * Whether an object at `key` of the generation `scope`, put just before, is still the session's:
 * its config (read now, after the put) names that generation, or a delete of its newest turn
 * forked from it (or flattened it, `named`). Else (the session deleted, or deleted and created
 * again) a delete's sweep may have passed before the put landed, and the object is deleted
 * (false).
 */
export async function keptUnlessSwept(log: LogContext, scope: LogScope, key: string): Promise<boolean> {
  if ((await configReading(log, scope)).reads) return true;
  await log.store.delete([key]);
  return false;
}

/**
 * The session's config as stored now (undefined: none, or one that does not parse) and whether it
 * reads the generation of `scope`: names it, or a delete of its newest turn forked from it (or
 * flattened it, `named`).
 */
export async function configReading(
  log: LogContext,
  scope: LogScope,
): Promise<{ config: SessionConfig | undefined; reads: boolean }> {
  const object = await log.store.get(sessionConfigKey(scope.keyPrefix, scope.id));
  const config = object ? parseStoredOrUndefined(object.body, sessionConfigSchema) : undefined;
  const reads =
    config !== undefined &&
    ((config.generation ?? '') === scope.generation ||
      (config.fork_of ?? []).some((point) => point.id === scope.id && point.generation === scope.generation) ||
      (config.named ?? []).some((point) => point.generation === scope.generation));
  return { config, reads };
}

import { StorageError } from '../../errors.ts';
import { SessionDeletedError } from '../../session-deleted.ts';
import type { TurnUsage } from '../../ledger/usage.ts';
import { claimSpentKey, leaseKey, sessionConfigKey, type LogScope } from '../keys.ts';
import { parseStoredOrUndefined, sessionConfigSchema, type SessionConfig } from '../records.ts';
import { commitState, landCommit, prepareCommit, type Commit, type CommitOptions } from './commit.ts';
import { MAX_CLAIM_ATTEMPTS, type LogContext } from './context.ts';
import { renewalMs, renewLease, type LeaseHolder } from './lease.ts';
import { storeSpend } from './unbilled.ts';

/**
 * A manual compaction's claim (docs/STORAGE.md, "Compaction (the context start)"): before its
 * summary's model call, a compaction puts a `compact` record with no items and a lease, right
 * after the record it read. While the lease runs (renewed beside it, `.lease`, as a turn's is),
 * every other commit is refused with turn_in_progress (a turn, an append, another compaction),
 * and the compaction's own record, which charges its summary, ends the hold. A compaction that
 * fails after its claim puts a record of its own ending it (charging the summary when one was
 * made); a crash leaves the claim to its lease, as a crashed turn's.
 */

/** A claim that landed: its record, its writer, and how it ends. */
export interface CompactionClaim {
  readonly record: number;
  readonly writer: string;
  readonly scope: LogScope;
  /**
   * Aborted once a renewal found the session gone (NotFoundError: deleted) or moved to another
   * incarnation (what `check` threw): the summary call it holds the session for stops.
   */
  readonly signal: AbortSignal;
  /**
   * Stops renewing the lease (the compaction's own record, or its release, ends the hold);
   * answers once every renewal under way ended.
   */
  stop(): Promise<void>;
  /**
   * Ends the hold with a record of no items charging `charge` (a summary made whose record did
   * not land), only while the claim is still the newest record: whether it landed. A failure is
   * swallowed (false: the lease runs out).
   */
  release(check: (config: SessionConfig) => void, charge?: TurnUsage): Promise<boolean>;
  /**
   * Stores what the compaction's summary used (`charge`; none: it made none) for the write that
   * passes the claim over (log/unbilled.ts, storeSpend), when neither its record nor its
   * release is known to have landed; a failure is swallowed (the chain stops waiting for it).
   */
  storeSpend(charge?: TurnUsage): Promise<void>;
}

/** The claim did not land right after the record read: the session moved on (read it again). */
export class ClaimMoved extends Error {}

/**
 * Claims the session for a compaction of the state ending at record `after` (throws what a
 * commit throws: turn_in_progress while a turn or another claim holds it, budget_exhausted, what
 * `check` throws of the session's config), and renews its lease until `stop`. ClaimMoved when
 * another record came after `after`. `check` tells the incarnation read: a delete of the newest
 * turn starts the next one with a record numbered as that turn's, which a claim must not follow.
 * `onLapsed` judges a turn whose lease ran out that the claim would close or follow
 * (CommitOptions.onLapsed).
 */
export async function claimCompaction(
  log: LogContext,
  id: string,
  after: number,
  check: (config: SessionConfig) => void,
  onLapsed?: CommitOptions['onLapsed'],
): Promise<CompactionClaim> {
  const options: CommitOptions = { kind: 'compact', hold: true, check, ...(onLapsed ? { onLapsed } : {}) };
  const claimed = await commitAfter(log, id, after, options);
  if (!claimed) throw new ClaimMoved();
  const { scope } = claimed;
  const holder = { scope, record: claimed.record.record, writer: claimed.record.writer ?? '' };
  const { stop, signal } = renewClaim(log, id, holder, check);
  return {
    ...holder,
    signal,
    stop,
    async release(check, charge) {
      await stop();
      const options = { kind: 'compact', heldBy: holder.writer, check, ...(charge && { charge }) } as const;
      return (await commitAfter(log, id, holder.record, options).catch(() => null)) !== null;
    },
    async storeSpend(charge) {
      const spent = charge ? { summary_usage: charge } : {};
      await storeSpend(log, scope, claimSpentKey(scope, holder.record), spent).catch(() => undefined);
    },
  };
}

/**
 * Renews the claim's lease every third of the lease until `stop`. Each renewal then reads the
 * session's config: gone, or naming another incarnation (a delete of the session committed,
 * whose sweep may have passed the lease already), the renewal deletes the lease it wrote,
 * whether its put was answered or not, and no renewal follows. So a delete leaves no lease of a
 * claim behind: a renewal whose put lands after the sweep reads the config after it. `signal`
 * is then aborted, with NotFoundError (no config) or what `check` threw.
 */
function renewClaim(log: LogContext, id: string, holder: LeaseHolder, check: (config: SessionConfig) => void) {
  const key = leaseKey(holder.scope, holder.record);
  const inFlight = new Set<Promise<void>>();
  let stopped = false;
  const lost = new AbortController();
  const gone = async (): Promise<unknown> => {
    const object = await log.store.get(sessionConfigKey(log.keyPrefix, id));
    const config = object ? parseStoredOrUndefined(object.body, sessionConfigSchema) : undefined;
    if (!config) return object === null ? new SessionDeletedError(id, 'its compaction') : null;
    try {
      check(config);
      return null;
    } catch (error) {
      return error;
    }
  };
  const renew = async () => {
    await renewLease(log, holder).catch(() => undefined);
    const reason = await gone();
    if (reason === null) return;
    stopped = true;
    clearInterval(renewals);
    lost.abort(reason);
    await log.store.delete(key);
  };
  const renewals = setInterval(() => {
    if (stopped) return;
    const work = renew().catch(() => undefined);
    inFlight.add(work);
    void work.finally(() => inFlight.delete(work));
  }, renewalMs(log.leaseMs));
  return {
    signal: lost.signal,
    stop: async () => {
      stopped = true;
      clearInterval(renewals);
      await Promise.all(inFlight);
    },
  };
}

/**
 * Commits a record only as number `after + 1` (create-only, as `commit`): null when the newest
 * record is another by then. A commit found landed after a lost answer is answered as written.
 */
async function commitAfter(log: LogContext, id: string, after: number, options: CommitOptions): Promise<Commit | null> {
  const state = commitState();
  for (; state.attempt < MAX_CLAIM_ATTEMPTS; state.attempt++) {
    const prepared = await prepareCommit(log, id, [], options, state);
    if (!prepared) continue;
    if (!('key' in prepared)) return 'replay' in prepared || 'appended' in prepared ? null : prepared;
    if (prepared.record.record !== after + 1) return null;
    if (await landCommit(log, prepared, state)) return prepared;
  }
  throw new StorageError(`session ${id}: too many concurrent writers`);
}

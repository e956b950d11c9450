import type { LogScope } from './keys.ts';
import { cancelTurn, closedBy, closeIfOpenExpired, leaveDeleted, openLeaseUntil, renewLease } from './log/lease.ts';
import { holdsLease, releaseHeldLease, renewHeldLease, takeLease } from './log/held-lease.ts';
import type { TakenLease } from './log/types.ts';
import { closerNotices } from './log/closer-notices.ts';
import { leaveGone } from './log/claimed-after-delete.ts';
import { EventJournal } from './log/journal.ts';
import { storeStoppedSpend } from './log/unbilled.ts';
import { storeCharge } from './log/charges.ts';
import type { StoppedSpendRecord } from './records.ts';
import { completedResponse, journalRun } from './log/turns.ts';
import {
  enqueueInput,
  listQueued,
  lowerSignal,
  readQueued,
  removeQueued,
  takenBefore,
  type NewQueuedInput,
  type QueuedEntry,
} from './log/queue.ts';
import { type QueueHeld, queuedInputs, type QueuedRow } from './log/queue-listing.ts';
import { takenUp } from './log/queue-taking.ts';
import { markTaking, withdrawing, withdrawQueued } from './log/queue-withdraw.ts';
import { markedQueues, markIfQueued, markQueue, unmarkIfEmpty, unmarkWhileSpent } from './log/queue-markers.ts';
import type { OpenTurn, StoredOutcome } from './log/types.ts';
import type { QueuedInput } from './queued-input.ts';
import type { TurnStatus } from './records.ts';
import { SessionLogBase } from './session-log-base.ts';

/**
 * What a session log does around running turns (lib/session/session-log.ts extends it with the
 * turn path itself): their leases (renewed by their owner, taken, renewed and released by a
 * background turn's runner), the closes by someone else (a cancel, an expired lease), the inputs
 * queued behind them, and the event journals of streamed and background turns.
 */
export class SessionLogRunning extends SessionLogBase {
  /** Writes the turn's lease again, `leaseMs` from now: its expiry (log/lease.ts). */
  async renewLease(turn: OpenTurn): Promise<string> {
    return renewLease(this.log, turn);
  }

  /** Takes a background turn's lease for its runner: its etag, and whether taken over (log/held-lease.ts). */
  async takeLease(turn: OpenTurn): Promise<TakenLease> {
    return takeLease(this.log, turn);
  }

  /** Renews a lease takeLease took: its etag, null once another's (log/held-lease.ts). */
  async renewHeldLease(turn: OpenTurn, etag: string): Promise<string | null> {
    return renewHeldLease(this.log, turn, etag);
  }

  /** Whether a lease takeLease took still names its runner (log/held-lease.ts). */
  async holdsLease(turn: OpenTurn, since?: number): Promise<boolean> {
    return holdsLease(this.log, turn, since);
  }

  /** Gives a lease takeLease took up for the turn's next runner to take at once: whether it was (log/held-lease.ts). */
  async releaseHeldLease(turn: OpenTurn, etag: string): Promise<boolean> {
    return releaseHeldLease(this.log, turn, etag);
  }

  /**
   * Queues an input while a turn runs (busy policy `enqueue`; lib/session/log/queue.ts): its
   * name and place among the queued (1: next; 0: taken up already), `replayed` when its key
   * had queued it already. `beforeEntry` writes what the entry references (its images and
   * files) under the session's scope, before the entry. `onlyAgain`: only the input its key queued
   * already is answered, none is queued (gone: null).
   */
  async enqueue(
    id: string,
    input: NewQueuedInput,
    beforeEntry?: (scope: LogScope) => Promise<void>,
    onlyAgain?: boolean,
  ): Promise<{ queued_turn: string; position: number | null; replayed: boolean } | null> {
    return enqueueInput(this.log, id, input, beforeEntry, onlyAgain);
  }

  /** The event journals of streamed and background turns (lib/session/log/journal.ts). */
  journal(): EventJournal {
    return new EventJournal(this.log);
  }

  /** The session's queued inputs, oldest first (one listing); one of them (null once taken up); its removal. */
  async queued(scope: LogScope): Promise<QueuedEntry[]> {
    return listQueued(this.log, scope);
  }

  /** GET /v1/sessions/{id}/queue: the first `limit` queued inputs, previewed (log/queue-listing.ts). */
  async listQueuedInputs(
    id: string,
    limit: number,
  ): Promise<{ queued: QueuedRow[]; total: number; listed: number; held?: QueueHeld }> {
    return queuedInputs(this.log, id, limit);
  }

  async readQueued(scope: LogScope, keyHash: string): Promise<QueuedInput | null> {
    return readQueued(this.log, scope, keyHash);
  }

  /** Whether an input queued under an older generation (`queued_in`) was taken up there or after it. */
  async queuedTakenBefore(scope: LogScope, entry: { keyHash: string; generation: string }): Promise<boolean> {
    return takenBefore(this.log, scope, entry);
  }

  /**
   * Whether queued input `input` (listed as `entry`) is taken up: marked by a pickup whose turn is
   * stored (log/queue-taking.ts `takenUp`). Reads only.
   */
  async queuedTakenUp(scope: LogScope, entry: { keyHash: string; generation: string }, input: QueuedInput) {
    return takenUp(this.log, scope, entry, input);
  }

  async removeQueued(scope: LogScope, keyHash: string): Promise<void> {
    return removeQueued(this.log, scope, keyHash);
  }

  /** Empties the queue's signal if its etag is still `etag` (log/queue.ts lowerSignal). */
  async lowerQueueSignal(scope: LogScope, etag: string): Promise<boolean> {
    return lowerSignal(this.log, scope, etag);
  }

  /** Marks a queued input as being claimed, before its turn's record (log/queue-withdraw.ts). */
  async markQueued(scope: LogScope, keyHash: string, writer: string): Promise<void> {
    return markTaking(this.log, scope, keyHash, writer);
  }

  /** Whether a withdraw's tombstone stands under a listed entry; a stale one is deleted (log/queue-withdraw.ts). */
  async queuedWithdrawing(scope: LogScope, keyHash: string): Promise<boolean> {
    return withdrawing(this.log, scope, keyHash);
  }

  /** DELETE /v1/sessions/{id}/queue/{queued_turn}: withdraws a queued input (log/queue-withdraw.ts). */
  async withdrawQueued(id: string, keyHash: string): Promise<void> {
    return withdrawQueued(this.log, id, keyHash);
  }

  /** The sessions an input was queued in, by their markers, some stale (log/queue-markers.ts). */
  async markedQueues(): Promise<string[]> {
    return markedQueues(this.log);
  }

  /**
   * Marks session `id` for the sweep of queues, nothing queued: a background turn its queue gave
   * up, or one this process runs, which the sweep closes once its lease ran out (log/queue-markers.ts).
   */
  async markForSweep(id: string): Promise<void> {
    return markQueue(this.log, id);
  }

  /** Removes session `id`'s marker when nothing is queued in it: whether it did (log/queue-markers.ts). */
  async unmarkQueue(id: string): Promise<boolean> {
    return unmarkIfEmpty(this.log, id);
  }

  /**
   * Removes session `id`'s marker while its queue waits for its budget, unless `spent` finds the
   * budget no longer spent after the delete: whether it did (log/queue-markers.ts).
   */
  async unmarkSpentQueue(id: string, spent: () => Promise<boolean>): Promise<boolean> {
    return unmarkWhileSpent(this.log, id, spent);
  }

  /** Marks session `id` as one an input is queued in, when one is: whether it did (log/queue-markers.ts). */
  async markQueueIfQueued(id: string): Promise<boolean> {
    return markIfQueued(this.log, id);
  }

  /**
   * The stored error someone else closed the turn with (cancel, interrupt, lease, delete: its
   * code, and its details, `interrupted` for an interrupt's cancel); null while open.
   */
  async closedBy(turn: OpenTurn): Promise<{ code: string; details?: unknown } | null> {
    return closedBy(this.log, turn);
  }

  /**
   * The notices (`stored_as`) the completion someone else closed the turn with showed or carries
   * on: none of them is this run's to give back (log/closer-notices.ts); null when not known.
   */
  async closerNotices(turn: OpenTurn): Promise<Set<string> | null> {
    return closerNotices(this.log, turn);
  }

  /**
   * Removes what a turn whose session was deleted left beside the delete's fence once its attempt
   * ended: its lease, and the fence with its `idem/` once the sweep removed its record (log/lease.ts).
   */
  async leaveDeleted(turn: OpenTurn): Promise<void> {
    return leaveDeleted(this.log, turn);
  }

  /**
   * Removes what a turn stored whose session its owner found gone after it (its claim landed
   * after the delete's sweep had passed: nothing fenced it), as the delete would have removed it
   * (log/claimed-after-delete.ts).
   */
  async leaveGone(turn: OpenTurn): Promise<void> {
    return leaveGone(this.log, turn);
  }

  /**
   * Stores what `turn`, closed by someone else, spent, for the session's totals to count
   * (log/unbilled.ts): at its `spent/` key, or, when no write counts it from there (its lease was
   * taken over, `takenOver`; another run of the turn completed it, or stored its own spend there
   * first; or the chain stopped waiting), as a charge (log/charges.ts); nothing when its own
   * completion landed after all (its answer lost), which counted it. False when they will not
   * count it (it was deleted, or a put failed).
   */
  async storeStoppedSpend(
    turn: OpenTurn,
    spent: Omit<StoppedSpendRecord, 'format'>,
    takenOver = false,
  ): Promise<boolean> {
    const stored = await storeStoppedSpend(this.log, turn.scope, turn, spent, takenOver);
    if (stored !== 'elsewhere') return stored !== 'lost';
    if (!spent.usage && !spent.summary_usage) return true;
    return storeCharge(this.log, turn.scope, spent);
  }

  /** Stores what `turn`'s model call spent, its record never landed, for the next write to count (log/charges.ts). */
  async storeCharge(turn: OpenTurn, spent: Omit<StoppedSpendRecord, 'format'>): Promise<boolean> {
    return storeCharge(this.log, turn.scope, spent);
  }

  /**
   * Ends an open turn as failed (`turn_cancelled`), for a turn whose server died or that is
   * no longer wanted: its input stays, its owner stops at once when it runs in this process
   * (`onClosedByOther`), else at its next lease renewal (closedBy; its completion, were it
   * first, is refused). A turn that is
   * not the open one: TurnNotOpenError (NotFoundError when it never existed). `answered_at_end`:
   * its record says it is answered only once it ended (lib/turn/dead-turn.ts). `interrupt`: an
   * `interrupt` cancels it (busy policy), as its stored error says (log/lease.ts).
   */
  async cancelTurn(
    id: string,
    turnNumber: number,
    interrupt = false,
  ): Promise<{ turn: number; status: TurnStatus; answered_at_end?: true }> {
    return cancelTurn(this.log, id, turnNumber, interrupt);
  }

  /**
   * Whether turn `turnNumber` has an event journal however it ended: a background turn no runner
   * took over (`never`), a streamed turn or one a runner took (`taken`), or a turn without one
   * (null): log/turns.ts.
   */
  async journalRun(id: string, turnNumber: number): Promise<'never' | 'taken' | null> {
    return journalRun(this.log, id, turnNumber);
  }

  /**
   * The stored answer of turn `turnNumber` (its 200 body, as its owner journaled it in
   * `turn.completed`) when it completed; null for any other turn (open, failed, cancelled, none).
   * A reader ends with it the journal of a turn whose owner died after its completion.
   */
  async completedResponse(id: string, turnNumber: number): Promise<unknown> {
    return completedResponse(this.log, id, turnNumber);
  }

  /**
   * Closes turn `turnNumber` (undefined: whichever turn is open) as a newcomer would (failed,
   * `lease_expired`) when it is the session's open turn and its lease ran out: its stored
   * outcome, or null when it is not the open turn (read it again), or none is. TurnInProgressError
   * while the lease runs.
   */
  async closeIfExpired(id: string, turnNumber?: number): Promise<StoredOutcome | null> {
    return closeIfOpenExpired(this.log, id, turnNumber);
  }

  /**
   * When open turn `turnNumber`'s lease runs out (ms), as renewed beside its record (its
   * record's when none is); undefined when it is not the open turn.
   */
  async leaseUntil(id: string, turnNumber: number): Promise<number | undefined> {
    return openLeaseUntil(this.log, id, turnNumber);
  }
}

import type { StoredItem } from '../../items.ts';
import type { TurnUsage } from '../../ledger/usage.ts';
import type { DoneRecord } from '../records.ts';
import type { LogContext } from './context.ts';
import { eventLeftToOutbox, intentStored as intentPut } from './lease.ts';
import type { ClosedTurn, OpenTurn, TurnOutcome } from './types.ts';

/**
 * The close of a turn by its own completion (SessionLog.completeTurn, lib/session/log/claim.ts)
 * once its `.done` landed: the webhook event, and what its failure leaves standing.
 */

/**
 * What SessionLog.completeTurn throws once the turn's own completion landed and only its
 * webhook event failed, with no intent known stored: the turn is closed, as it reads, and is
 * answered the event's error (`cause`), which lib/turn/close-turn.ts (closeFailed) rethrows.
 * `counted` is what the completion added to the session's totals (a completed turn's usage, a
 * compaction's summary), which the turn's token is charged all the same.
 */
export class ClosedByItsCompletionError extends Error {
  override readonly cause: unknown;
  readonly counted: { usage?: TurnUsage | undefined; summaryUsage?: TurnUsage | undefined };
  constructor(cause: unknown, counted: ClosedByItsCompletionError['counted'] = {}) {
    const told = cause instanceof Error ? cause.message : String(cause);
    super(`the turn's completion stands; its webhook event failed: ${told}`);
    this.name = 'ClosedByItsCompletionError';
    this.cause = cause;
    this.counted = counted;
  }
}

/**
 * Tells `onClosed` that the owner's completion landed, then answers with the stored output.
 * Its failure is logged and the completion stands once the turn's webhook intent is stored
 * (`intentStored`, or put now: an adopted record's claim put it unseen): the outbox's drainer
 * delivers the event from it. Else it is thrown, as the cause of a ClosedByItsCompletionError: the
 * turn is answered its error rather than an event lost unsaid.
 */
export async function ownerClosed(
  log: LogContext,
  turn: OpenTurn,
  done: DoneRecord,
  spent: Pick<TurnOutcome, 'usage' | 'summaryUsage'> | undefined,
  stored: StoredItem[],
  intentStored: boolean,
): Promise<StoredItem[]> {
  const completed = done.status === 'completed';
  const closed: ClosedTurn = {
    scope: turn.scope,
    turn: turn.turn,
    status: done.status,
    error: done.error,
    usage: completed ? spent?.usage : undefined,
    compactionUsage: completed ? spent?.summaryUsage : undefined,
    completedAt: done.completed_at,
    webhookUrl: turn.session.webhook_url,
  };
  try {
    await log.onClosed?.(closed);
  } catch (error) {
    const intent = intentStored || (await intentPut(log, turn));
    if (!intent) {
      // What the completion's totals took (lib/session/log/claim.ts totalsAfter).
      const counted = { usage: closed.usage, summaryUsage: done.ledger ? spent?.summaryUsage : undefined };
      throw new ClosedByItsCompletionError(error, counted);
    }
    eventLeftToOutbox(log, closed, error);
  }
  return stored;
}

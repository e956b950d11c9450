import type { StoredItem } from '../../items.ts';
import type { DoneRecord } from '../records.ts';
import type { LogContext } from './context.ts';
import { eventLeftToOutbox, intentStored as intentPut } from './lease.ts';
import type { ClosedTurn, OpenTurn, TurnOutcome } from './types.ts';

/**
 * The close of a turn by its own completion (SessionLog.completeTurn, lib/session/log/claim.ts)
 * once its `.done` landed: the webhook event, and what its failure leaves standing.
 */

/** Errors completeTurn threw after the turn's own completion landed (see ownerClosed). */
const thrownOnceClosed = new WeakSet<object>();

/**
 * Whether `error` was thrown by SessionLog.completeTurn after the turn's own completion landed:
 * only its webhook event failed, with no intent known stored. The turn is closed, as it reads.
 */
export function closedByItsCompletion(error: unknown): boolean {
  return typeof error === 'object' && error !== null && thrownOnceClosed.has(error);
}

/**
 * Tells `onClosed` that the owner's completion landed, then answers with the stored output.
 * Its failure is logged and the completion stands once the turn's webhook intent is stored
 * (`intentStored`, or put now: an adopted record's claim put it unseen): the outbox's drainer
 * delivers the event from it. Else it is thrown (closedByItsCompletion): the turn is answered its
 * error rather than an event lost unsaid.
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
      if (typeof error === 'object' && error !== null) thrownOnceClosed.add(error);
      throw error;
    }
    eventLeftToOutbox(log, closed, error);
  }
  return stored;
}

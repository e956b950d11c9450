import { DeleteRefusedError, LEASE_EXPIRED } from '../../errors.ts';
import type { LogScope } from '../keys.ts';
import type { UnitCursor } from '../unit-cursor.ts';
import type { LogContext } from './context.ts';
import { behindLapsedFence } from './fence.ts';
import type { Point } from './fork.ts';
import { readHead, type Head } from './head.ts';
import { interruptedBy } from './lease.ts';
import { pointBefore, type RewindOptions } from './rewind.ts';

/**
 * The session a preview reads when the next turn takes the dead turn of a turn answered at its end
 * out first (lib/turn/dead-turn.ts `takeOutDead`), nothing written: the newest turn (or the one
 * behind the lapsed fence of a take-out cut short), as the claim finds it closed (`newest`),
 * failed `lease_expired` or cancelled by an `interrupt`, with no output, and a request that says
 * `answered_at_end`. Its take-out, a delete of the newest turn, goes back to the record before it
 * (./rewind.ts `pointBefore`, whose refusals, as notices it took, keep it in: undefined then, as
 * for any other newest record): that record (null: none, the turn was the first) and a listing
 * positioned after it. Costs, only for such a turn, a head read again and the reads of the
 * delete's checks (a listing of the inbox's delivery records for a turn closed by someone else).
 */
export async function pastDeadTurn(
  log: LogContext,
  scope: LogScope,
  newest: NonNullable<Head['newest']>,
  tookNothing: NonNullable<RewindOptions['tookNothing']>,
): Promise<{ newest: Point | null; cursor: UnitCursor } | undefined> {
  const fenced = newest.record.kind === 'turn' ? null : await behindLapsedFence(log, scope, newest);
  const dead = fenced ?? newest;
  if (!takenOut(dead) || dead.record.turn === undefined) return undefined;
  const head = await readHead(log, scope.id, 100);
  // A writer came in since: its claim met what it wrote, not this turn.
  if (head.newest?.record.record !== newest.record.record || head.scope.generation !== scope.generation)
    return undefined;
  try {
    const previous = await pointBefore(log, { ...head, newest: { ...head.newest, ...newest } }, dead.record.turn, {
      tookNothing,
    });
    return { newest: previous, cursor: head.cursor };
  } catch (error) {
    if (error instanceof DeleteRefusedError) return undefined;
    throw error;
  }
}

/** Whether `turn`, closed as the claim finds it, is such a dead turn (above). */
function takenOut(turn: NonNullable<Head['newest']>): boolean {
  const { record, done } = turn;
  const answeredAtEnd = (record.request as { answered_at_end?: unknown } | undefined)?.answered_at_end === true;
  if (record.kind !== 'turn' || !answeredAtEnd || !done || done.items.length > 0 || done.status !== 'failed')
    return false;
  return done.error?.code === LEASE_EXPIRED || interruptedBy(done.error);
}

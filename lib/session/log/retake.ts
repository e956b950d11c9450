import { InvalidRequestError } from '../../errors.ts';
import type { LogContext } from './context.ts';
import { countsOf, type Head } from './head.ts';
import { walkTurns } from './turns.ts';

/**
 * A turn with an empty input takes the newest turn again: the newest turn must have failed (a
 * model error, its lease run out, a cancel), its input standing unanswered in the history, with
 * no item stored after it. Compactions after it (records of no items) store no item and answer
 * no call, so they leave it to be taken again (a turn that failed as its context was too large,
 * then a compaction): only then is the turn before them read, the newest record deciding
 * otherwise. Anything else is InvalidRequestError naming `input`: nothing to answer.
 */
export async function checkRetake(log: LogContext, id: string, newest: Head['newest']): Promise<void> {
  if (newest?.record.kind === 'turn' && newest.done?.status === 'failed') return;
  const turns = countsOf(newest).turns;
  let found =
    turns === 0
      ? 'has no turn yet'
      : newest?.record.kind !== 'turn'
        ? `has items stored after its turn ${turns}`
        : `turn ${turns} ${newest.done?.status === 'aborted' ? 'was aborted' : 'completed'}`;
  if (turns > 0 && newest?.record.kind === 'compact' && newest.record.items.length === 0) {
    const [turn] = await walkTurns(log, id, undefined, 1);
    const summary = turn?.summary;
    // Where its own items end (a retake has none: where its record stands), else where its input does.
    const after = (turn?.lastSeq ?? summary?.input?.last_seq) !== countsOf(newest).items;
    const failed = summary?.status === 'failed' || summary?.status === 'cancelled';
    if (summary && failed && !after) return;
    if (summary && !after) found = `turn ${turns} ${summary.status === 'aborted' ? 'was aborted' : 'completed'}`;
  }
  throw new InvalidRequestError(
    `input is empty, which takes the newest turn again once it failed or was cancelled; session ${id} ${found}: ` +
      'nothing to answer',
    { field: 'input' },
  );
}

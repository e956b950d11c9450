import { InvalidRequestError } from '../../errors.ts';
import type { LogContext } from './context.ts';
import type { LogRecord } from '../records.ts';
import { countsOf, type Head } from './head.ts';
import { walkTurns, type TurnSummary } from './turns.ts';

/**
 * A turn with an empty input takes the newest turn again: the newest turn must have failed (a
 * model error, its lease run out, a cancel), its input standing unanswered in the history, with
 * no item stored after it. Compactions after it (records of no items) store no item and answer
 * no call, so they leave it to be taken again (a turn that failed as its context was too large,
 * then a compaction), as do the other records of no items (a fork's first record, the first of
 * the generation a delete of the newest turn went on in): only then is the turn before them
 * read, the newest record deciding otherwise. Anything else is InvalidRequestError naming
 * `input`: nothing to answer. Returns the first seq of the input taken again when it read the
 * turn before such records (the claim's own reads, from the newest record on, miss it there).
 */
export async function checkRetake(log: LogContext, id: string, newest: Head['newest']): Promise<number | undefined> {
  if (newest?.record.kind === 'turn' && newest.done?.status === 'failed') return undefined;
  const turns = countsOf(newest).turns;
  let found =
    turns === 0
      ? 'has no turn yet'
      : newest?.record.kind !== 'turn'
        ? `has items stored after its turn ${turns}`
        : `turn ${turns} ${newest.done?.status === 'aborted' ? 'was aborted' : 'completed'}`;
  if (turns > 0 && newest && newest.record.kind !== 'turn' && newest.record.items.length === 0) {
    const summary = await pastFailedRetakes(log, id, undefined);
    // A failed turn has no output; a completed one without input (a retake) cannot tell whether items came after it.
    const last = summary?.output?.last_seq ?? summary?.input?.last_seq;
    const after = last !== countsOf(newest).items;
    if (summary && failedOrCancelled(summary) && !after) return summary.input?.first_seq;
    if (summary && !after) found = `turn ${turns} ${summary.status === 'aborted' ? 'was aborted' : 'completed'}`;
  }
  throw new InvalidRequestError(
    `input is empty, which takes the newest turn again once it failed or was cancelled; session ${id} ${found}: ` +
      'nothing to answer',
    { field: 'input' },
  );
}

/**
 * The first seq of the input a claimed retake `own` (a turn record of no items, as only a retake
 * stores one) takes again, when its carry does not hold it: past records of no items (a fork's
 * first record), where checkRetake found it. Read again for a runner taking the claim over.
 */
export async function retakenBefore(log: LogContext, id: string, own: LogRecord): Promise<number | undefined> {
  if (own.items.length > 0 || (own.recent ?? []).some((group) => group.items.length > 0)) return undefined;
  const failed = await pastFailedRetakes(log, id, own.turn);
  return failed?.input?.last_seq === own.first_seq - 1 ? failed.input.first_seq : undefined;
}

const failedOrCancelled = (summary: Pick<TurnSummary, 'status'>) =>
  summary.status === 'failed' || summary.status === 'cancelled';

/**
 * The newest turn below `before` (none: of all) but the failed retakes after it (turns of neither
 * input nor output, failed or cancelled: a retake of them takes that turn's input again).
 */
async function pastFailedRetakes(log: LogContext, id: string, before: number | undefined) {
  for (;;) {
    const summary = (await walkTurns(log, id, before, 1))[0]?.summary;
    if (!summary || summary.input || summary.output || !failedOrCancelled(summary)) return summary;
    before = summary.turn;
  }
}

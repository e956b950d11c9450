import type { LogScope } from '../keys.ts';
import type { TurnStatus } from '../records.ts';
import { toSessionRecord } from './config-object.ts';
import type { LogContext } from './context.ts';
import { countsOf, readHead } from './head.ts';
import { behindLapsedFence } from './fence.ts';
import { interruptedBy } from './lease.ts';
import type { SessionRecord } from './types.ts';
import { shownTotals } from './charges.ts';
import { openCallsOf } from './open-calls.ts';
import { isBackgroundRecord } from './turns.ts';

/** See SessionLog.getWithNewestTurn. */
export async function getSessionWithNewestTurn(
  log: LogContext,
  id: string,
): Promise<{ session: SessionRecord; newestTurn: NewestTurn | null; scope: LogScope; openCalls: string[] | null }> {
  const head = await readHead(log, id);
  const { config, newest, scope } = head;
  // With what stopped turns and charges stored: a claim's budget check counts it already (log/charges.ts).
  const session = toSessionRecord(config, countsOf(newest), await shownTotals(log, scope, head));
  // Behind the fence of a take-out cut short, its lease run out, that turn is still the newest.
  const found = newest?.record.kind === 'turn' ? newest : await behindLapsedFence(log, scope, newest);
  const turn = found?.record.kind === 'turn' ? found.record.turn : undefined;
  // The calls a next input may answer (null: not tracked), as a claim checks them (./open-calls.ts).
  const openCalls = openCallsOf(newest);
  if (turn === undefined) return { session, newestTurn: null, scope, openCalls };
  const { record, done } = found!;
  const first = record.first_seq + record.items.length;
  const outputs = done?.items.length ?? 0;
  const output = outputs > 0 ? { first_seq: first, last_seq: first + outputs - 1 } : null;
  const calls = (done?.items ?? []).flatMap((item) => (item.type === 'function_call' ? [item.call_id] : []));
  const answered = record.items.flatMap((item) => (item.type === 'function_call_output' ? [item.call_id] : []));
  const error = done?.error?.code;
  const answeredAtEnd = (record.request as { answered_at_end?: unknown } | undefined)?.answered_at_end === true;
  return {
    session,
    newestTurn: {
      turn,
      status: done?.status ?? null,
      output,
      calls,
      answered,
      ...(record.items.length === 0 ? { retake: { open: record.open_calls ?? null } } : {}),
      first_seq: record.first_seq,
      ...(!done && record.lease_expires_at ? { lease_expires_at: record.lease_expires_at } : {}),
      ...(error !== undefined ? { error } : {}),
      ...(interruptedBy(done?.error) ? { interrupted: true } : {}),
      ...(answeredAtEnd ? { answered_at_end: true } : {}),
      ...(isBackgroundRecord(record) ? { background: true } : {}),
    },
    scope,
    openCalls,
  };
}

/** The model turn of a session's newest record, as its head holds it (no read more). */
export interface NewestTurn {
  turn: number;
  /** Null: still open. */
  status: TurnStatus | null;
  output: { first_seq: number; last_seq: number } | null;
  /** The call ids of the function calls among its output. */
  calls: string[];
  /** The call ids its input answers (its `function_call_output` items). */
  answered: string[];
  /**
   * It stored no input: it takes the failed turn before it again, whose input answered the calls
   * not `open` after it (null: its record does not track them).
   */
  retake?: { open: string[] | null };
  /** Where its input begins (its output, when it has none). */
  first_seq: number;
  /** An open turn's lease as its claim took it (one renewed beside its record may run longer: ./lease.ts leaseOf). */
  lease_expires_at?: string;
  /** A closed turn's error code, when it failed. */
  error?: string;
  /** It was cancelled by an `interrupt` (its error's `details.interrupted`, ./lease.ts interruptedBy). */
  interrupted?: true;
  /** Its record's settings say its answer was sent only once it ended (TurnOptions.answeredAtEnd). */
  answered_at_end?: true;
  /** Its record's settings say it ran in the background (`background: true`): its create was answered at once. */
  background?: true;
}

import { LEASE_EXPIRED, TURN_CANCELLED } from '../../errors.ts';
import type { TurnUsage } from '../../ledger/usage.ts';
import { spentKeyBeside } from '../keys.ts';
import type { LogContext } from './context.ts';
import { parsedSpend } from './unbilled.ts';

/**
 * What a turn closed by someone else spent, on its receipt (docs/API.md, "Turns"). The closer's
 * completion (a cancel, an `interrupt`, a lapsed lease) knows nothing of the model call it
 * aborted; the stopped turn stores that at `spent/<generation>/<turn>` (./unbilled.ts), which its
 * receipt shows as its `usage` and `compaction_usage`, `usage_estimated` when the provider
 * reported none. Read only for such a turn's receipt: one get each, nothing for any other turn.
 */

/** How a close by someone else ends a turn that stores what it spent (a deleted session's is gone). */
const STOPPED_BY: ReadonlySet<string> = new Set([TURN_CANCELLED, LEASE_EXPIRED]);

/** Whether a turn's error `code` is a close by someone else's, after which it stores what it spent. */
export function stoppedBy(code: string | undefined): boolean {
  return code !== undefined && STOPPED_BY.has(code);
}

/** The part of a receipt a stopped turn's spend fills. */
interface Spent {
  usage: TurnUsage | null;
  compaction_usage?: TurnUsage;
  usage_estimated?: true;
  error: { code: string } | null;
}

/**
 * Where the turn `summary` tells of stored what it spent, if it is a turn closed by someone else
 * (failed or cancelled by a close's error, without usage of its own); `recordsKey` is its record's
 * or segment's key.
 */
export function stoppedSpendKey(recordsKey: string, turn: number, summary: Spent): string | undefined {
  if (summary.usage || !stoppedBy(summary.error?.code)) return undefined;
  return spentKeyBeside(recordsKey, turn);
}

/**
 * `summary` with what its stopped turn stored spent at `key` (stoppedSpendKey; undefined: not a
 * stopped turn). Nothing is added while nothing is stored (its process still storing it, or
 * dead), for an object that is empty or not a spend record, or when the read fails.
 */
export async function withStoppedSpend<Summary extends Spent>(
  log: LogContext,
  summary: Summary,
  key: string | undefined,
): Promise<Summary> {
  if (key === undefined) return summary;
  const object = await log.store.get(key).catch(() => null);
  const spent = object ? parsedSpend(object.body) : null;
  if (!spent) return summary;
  return {
    ...summary,
    ...(spent.usage ? { usage: spent.usage } : {}),
    ...(spent.usage && spent.estimated ? { usage_estimated: true } : {}),
    ...(spent.summary_usage && !summary.compaction_usage ? { compaction_usage: spent.summary_usage } : {}),
  };
}

import type { ResponseOutputItem } from 'openai/resources/responses/responses';
import { stoppedBy } from '../session/log/stopped-receipt.ts';
import type { StoredItem } from '../items.ts';
import type { LogScope } from '../session/keys.ts';
import type { IncompleteReason } from '../models/model.ts';
import type { TurnSummary } from '../session/log/turns.ts';
import { turnAsItStands } from '../turn/journal.ts';
import { turnCompactionOutput } from './compaction.ts';
import type { Facade } from './facade.ts';
import { openaiFailure } from './errors.ts';
import type { ResponseRef } from './ids.ts';
import { storedItemId } from './listed-items.ts';
import { outputText, turnCost, usageOf, type TailgateResponse } from './responses.ts';
import { outputItems } from './output-items.ts';

/**
 * A stored response as its turn's receipt says it stands: one whose object says it runs (a
 * background response's, kept `queued` when it was created) or that has no object yet (a
 * foreground response still running, rebuilt from its conversation: lib/openai/stored-responses.ts).
 */

type TurnStatus = TurnSummary['status'];

/** A turn's receipt status as a response's. */
function responseStatus(status: TurnStatus): TailgateResponse['status'] {
  if (status === 'queued' || status === 'in_progress' || status === 'completed' || status === 'cancelled')
    return status;
  return 'failed';
}

/**
 * A response's object once it ended, from the one it had while it ran: `completed_at` is when
 * its turn ended (its completion's), the same on every read.
 */
export function endedResponse(
  running: TailgateResponse,
  status: TailgateResponse['status'],
  ended: {
    completedAt: string | null;
    output?: ResponseOutputItem[];
    usage?: TailgateResponse['usage'];
    error?: TailgateResponse['error'];
    incomplete?: IncompleteReason | undefined;
  },
  tailgate: Record<string, unknown>,
): TailgateResponse {
  const output = ended.output ?? [];
  // `usage` is null until a response ended (the specification's; the SDK types it optional).
  return {
    ...running,
    status,
    // A completion without its time (an older packed one): the response's own created_at, as stable.
    completed_at: ended.completedAt ? Math.floor(Date.parse(ended.completedAt) / 1000) : running.created_at,
    output,
    output_text: outputText(output),
    usage: ended.usage ?? null,
    error: ended.error ?? null,
    incomplete_details: ended.incomplete ? { reason: ended.incomplete } : null,
    tailgate: { ...running.tailgate, ...tailgate },
  } as TailgateResponse;
}

/**
 * What a failed or cancelled turn's receipt shows it spent, as a response's `usage` and `tailgate`
 * fields: a turn closed by someone else, once it stored what its aborted model call spent
 * (lib/session/log/stopped-receipt.ts), with `usage_estimated` when the provider reported none.
 */
function stoppedUsage(summary: TurnSummary): { usage?: TailgateResponse['usage']; tailgate: Record<string, unknown> } {
  if (!summary.usage) return { tailgate: {} };
  return {
    usage: usageOf(summary.usage),
    tailgate: { ...turnCost(summary), ...(summary.usage_estimated ? { usage_estimated: true } : {}) },
  };
}

/**
 * A kept response that ended as its turn was closed by someone else (cancelled, interrupted, its
 * lease run out), answered before the stopped turn stored what it spent: with that, as its turn's
 * receipt shows it once stored (one receipt read; any other response answered as kept).
 */
export async function withStoppedUsage(
  facade: Facade,
  kept: TailgateResponse,
  ref: ResponseRef,
): Promise<TailgateResponse> {
  if (kept.usage || !stoppedBy(kept.error?.code)) return kept;
  const summary = await turnAsItStands(facade.services, ref.sessionId, ref.turn);
  const { usage, tailgate } = stoppedUsage(summary);
  return usage ? { ...kept, usage, tailgate: { ...kept.tailgate, ...tailgate } } : kept;
}

/**
 * `running` (the response's object while its turn runs: no output, `completed_at` null) as the
 * turn's receipt `summary` says it stands: still running, failed or cancelled with the turn's
 * error, or ended with its output items (`output` reads them) and a compaction's item.
 */
export async function settledAs(
  facade: Facade,
  running: TailgateResponse,
  ref: ResponseRef,
  summary: TurnSummary,
  output: () => Promise<{ output: StoredItem[]; scope: LogScope }>,
): Promise<TailgateResponse> {
  if (summary.status === 'queued' || summary.status === 'in_progress') return { ...running, status: summary.status };
  if (summary.status !== 'completed') {
    const error = summary.error ? (openaiFailure(summary.error) as TailgateResponse['error']) : null;
    const { usage, tailgate } = stoppedUsage(summary);
    return endedResponse(
      running,
      responseStatus(summary.status),
      { completedAt: summary.completed_at, error, ...(usage ? { usage } : {}) },
      tailgate,
    );
  }
  // The receipt's context is the turn's: a compaction there adds its item, as the turn's answer does.
  const [{ output: items, scope }, compacted] = await Promise.all([
    output(),
    turnCompactionOutput(facade, ref.sessionId, ref.turn, summary.context),
  ]);
  return endedResponse(
    running,
    summary.incomplete ? 'incomplete' : 'completed',
    {
      completedAt: summary.completed_at,
      incomplete: summary.incomplete,
      output: [
        ...items.flatMap((item) =>
          outputItems(item as Parameters<typeof outputItems>[0], (type) => storedItemId(scope, type, item.seq)),
        ),
        ...compacted,
      ],
      ...(summary.usage ? { usage: usageOf(summary.usage) } : {}),
    },
    { context: summary.context, ...turnCost(summary) },
  );
}

import type {
  CompactedResponse,
  ResponseCompactionItem,
  ResponseOutputItem,
} from 'openai/resources/responses/responses';
import { compactionSizes, planCompaction, summarizeContext, summaryCallWindow } from '../compaction/index.ts';
import type { Item, PromptItem } from '../items.ts';
import type { TurnUsage } from '../ledger/usage.ts';
import type { Model, ModelUsage } from '../models/model.ts';
import { resolveStrategyConfig } from '../strategies/index.ts';
import { resolveTokenBudget } from '../tokens/model-limits.ts';
import type { TokenEncoders } from '../tokens/token-counter.ts';
import type { TurnResponse } from '../turn/index.ts';
import type { Facade, IndexFacade } from './facade.ts';
import { compactionId } from './ids.ts';
import { usageOf } from './responses.ts';

/**
 * OpenAI's compaction items over tailgate's compaction (lib/compaction). OpenAI returns the
 * summary encrypted; tailgate's is the summary text itself, readable, in `encrypted_content`,
 * so a client can show it and send the item back as input unchanged.
 */

/** A compaction item carrying `summary` as plain text. */
export function compactionItem(id: string, summary: string): ResponseCompactionItem {
  return { type: 'compaction', id, encrypted_content: summary, created_by: 'tailgate' };
}

/**
 * The compaction item of a turn that compacted (its summary is read back from the session,
 * one get); none for other turns, or when a later compaction has moved the context since.
 */
export async function compactionOutput(facade: Facade, response: TurnResponse): Promise<ResponseOutputItem[]> {
  const moved = response.context.compaction;
  if (!moved) return [];
  const current = await facade.services.sessions.currentContext(response.session_id);
  if (current?.start_seq !== moved.start_seq) return [];
  return [compactionItem(compactionId(response.session_id, current), current.summary)];
}

/**
 * The compaction item of turn `turn` of a session when the turn compacted (`context` is its
 * receipt's): its summary as the turn stored it, under its record, so the same after a later
 * compaction moved the session's context on. None for other turns.
 */
export async function turnCompactionOutput(
  facade: IndexFacade,
  sessionId: string,
  turn: number,
  context: Record<string, unknown> | null,
): Promise<ResponseOutputItem[]> {
  const moved = (context as TurnResponse['context'] | null)?.compaction;
  if (!moved) return [];
  const stored = await facade.services.sessions.turnContext(sessionId, turn);
  if (stored?.start_seq !== moved.start_seq) return [];
  return [compactionItem(compactionId(sessionId, stored), stored.summary)];
}

/**
 * A compacted response (`client.responses.compact`): its output and what the summary's model
 * call used (zero when nothing was summarized).
 */
export function compactedResponse(
  id: string,
  createdAt: Date,
  output: ResponseCompactionItem[],
  usage: TurnUsage | null,
): CompactedResponse {
  return {
    id,
    object: 'response.compaction',
    created_at: Math.floor(createdAt.getTime() / 1000),
    output,
    usage: usageOf(usage ?? NO_USAGE),
  };
}

const NO_USAGE = { input_tokens: 0, output_tokens: 0 };

export interface StatelessCompaction {
  /** The items sent (a compaction item among them is already a summary message). */
  items: Item[];
  /** The model whose window sizes the summary (the request's). */
  modelId: string;
  /** The model that writes the summary. */
  summaryModel: Model;
  summaryPrompt?: string;
  env: Record<string, string | undefined>;
  tokenEncoders?: TokenEncoders;
}

/**
 * Summarizes every item sent, storing nothing (`POST /v1/responses/compact` without a stored
 * conversation): the summary and what its model call used. Null when there is nothing to summarize.
 */
export async function compactItems(
  request: StatelessCompaction,
): Promise<{ summary: string; usage: ModelUsage } | null> {
  const config = resolveStrategyConfig({ env: request.env });
  const budget = resolveTokenBudget(
    request.modelId,
    config,
    request.tokenEncoders ? { encoders: request.tokenEncoders } : {},
  );
  const sizes = compactionSizes(budget, config);
  const history: PromptItem[] = request.items.map((item, index) => ({ ...item, seq: index + 1 }));
  const cut = planCompaction(history, { keepTokens: 0, counter: budget.counter });
  if (!cut) return null;
  const made = await summarizeContext(request.summaryModel, null, cut, {
    maxSummaryTokens: sizes.maxSummaryTokens,
    window: budget,
    ...summaryCallWindow(request.modelId, request.summaryModel.id, request.tokenEncoders),
    ...(request.summaryPrompt ? { prompt: request.summaryPrompt } : {}),
  });
  return { summary: made.context.summary, usage: made.usage };
}

/**
 * One page of a conversation's item list with the current compaction item in it: seq n sits
 * at position n and the compaction item at `compactionAt` (its start seq - 0.5, between the
 * summarized items and the first one kept), so both page by the same cursor. `after` is the
 * cursor's position (none: from the start, or from the end in descending order). Returns
 * the positions of the page in order (a non-integer one is the compaction item).
 */
export function itemPage(options: {
  total: number;
  limit: number;
  ascending: boolean;
  after?: number;
  compactionAt?: number | undefined;
}): { positions: number[]; hasMore: boolean } {
  const { total, limit, ascending, compactionAt } = options;
  const seqs: number[] = [];
  let candidates: number[];
  if (ascending) {
    const after = options.after ?? 0;
    for (let seq = Math.floor(after) + 1; seq <= total && seqs.length < limit; seq += 1) seqs.push(seq);
    const bound = (seqs.at(-1) ?? after) + 1;
    const compaction = compactionAt !== undefined && compactionAt > after && compactionAt < bound;
    candidates = (compaction ? [...seqs, compactionAt] : seqs).sort((a, b) => a - b).slice(0, limit);
    const last = candidates.at(-1);
    const hasMore =
      last !== undefined &&
      (last < total || (compactionAt !== undefined && compactionAt > last && compactionAt <= total + 0.5));
    return { positions: candidates, hasMore };
  }
  const before = options.after ?? total + 1;
  for (let seq = Math.min(total, Math.ceil(before) - 1); seq >= 1 && seqs.length < limit; seq -= 1) seqs.push(seq);
  const bound = (seqs.at(-1) ?? before) - 1;
  const compaction = compactionAt !== undefined && compactionAt < before && compactionAt > bound;
  candidates = (compaction ? [...seqs, compactionAt] : seqs).sort((a, b) => b - a).slice(0, limit);
  const last = candidates.at(-1);
  const hasMore = last !== undefined && (last > 1 || (compactionAt !== undefined && compactionAt < last));
  return { positions: candidates, hasMore };
}

import { TailgateError } from '../errors.ts';
import type { PromptItem } from '../items.ts';
import type { ModelUsage } from '../models/model.ts';
import type { DeliveredNotice } from '../inbox/inbox.ts';
import type { PromptShape } from '../prompt-shape.ts';
import type { StoredError, TurnRequest, TurnContext } from './types.ts';
import type { TurnPlan } from './plan.ts';

/** The compact record of what a model saw, stored with a turn. */

/** The error JSON body's inner object, for any thrown value (unknown errors stay generic). */
export function errorRecord(error: unknown): StoredError {
  if (error instanceof TailgateError) {
    return error.details === undefined
      ? { code: error.code, message: error.message }
      : { code: error.code, message: error.message, details: error.details };
  }
  return { code: 'internal_error', message: 'internal error' };
}

/** What the turn stores of the request (for the record; replay does not re-run it). */
export function requestRecord(request: TurnRequest): Record<string, unknown> {
  const { input: _input, ...rest } = request;
  return rest;
}

export interface TurnReceipt {
  model: string;
  strategies: string[];
  /** Seq ranges ("1-40,42") of history items sent whole, compacted, or read and dropped. */
  whole: string;
  compacted: string;
  dropped: string;
  /** Items of the history before the tail that was read: dropped without being read. */
  unread_before: number | null;
  notices: { name: string; stored_as: string; posted_at: string }[];
  context: TurnContext;
  usage?: ModelUsage;
  /** The prompt's item hashes, sizes and synthetic items (lib/prompt-shape.ts). */
  prompt?: PromptShape;
}

/**
 * The compact record of what the model saw: which seqs went in whole, compacted or not at
 * all, and which notices were delivered. Ranges keep it small at any session length.
 */
export function buildReceipt(
  plan: TurnPlan,
  history: PromptItem[],
  prompt: PromptItem[],
  delivered: DeliveredNotice[],
  context: TurnContext,
): TurnReceipt {
  const whole: number[] = [];
  const compacted: number[] = [];
  const seen = new Set<number>();
  for (const item of prompt) {
    if (item.seq === undefined) continue;
    seen.add(item.seq);
    (item.compacted ? compacted : whole).push(item.seq);
  }
  const dropped = history.flatMap((item) => (item.seq !== undefined && !seen.has(item.seq) ? [item.seq] : []));
  const firstRead = history.find((item) => item.seq !== undefined)?.seq;
  return {
    model: plan.model.id,
    strategies: plan.strategies,
    whole: seqRanges(whole),
    compacted: seqRanges(compacted),
    dropped: seqRanges(dropped),
    unread_before: firstRead ?? null,
    notices: delivered.map(noticeRecord),
    context,
  };
}

export function noticeRecord(notice: DeliveredNotice): { name: string; stored_as: string; posted_at: string } {
  return { name: notice.name, stored_as: notice.stored_as, posted_at: notice.posted_at };
}

/** `[1,2,3,5,7,8]` -> `"1-3,5,7-8"`. */
export function seqRanges(seqs: number[]): string {
  // Prompts list their items in seq order: sorted already, but for a synthetic item or two.
  const sorted = seqs.every((seq, index) => index === 0 || seqs[index - 1]! <= seq)
    ? seqs
    : [...seqs].sort((a, b) => a - b);
  const parts: string[] = [];
  let start: number | undefined;
  let previous: number | undefined;
  for (const seq of sorted) {
    if (start !== undefined && previous !== undefined && seq === previous + 1) {
      previous = seq;
      continue;
    }
    if (start !== undefined) parts.push(start === previous ? `${start}` : `${start}-${previous}`);
    start = seq;
    previous = seq;
  }
  if (start !== undefined) parts.push(start === previous ? `${start}` : `${start}-${previous}`);
  return parts.join(',');
}

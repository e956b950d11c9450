import { repeatedSeqs } from '../history.ts';
import type { HistoryAggregates } from './aggregates.ts';
import type { EpochPlan } from './epoch-plan.ts';
import type { TailRequirement } from './strategy.ts';

/**
 * What an epoch strategy needs from a long history: the calls it keeps whole or compacts
 * (every call when nothing changes), plus the newest instances of repeated calls, which it
 * keeps whole wherever they are.
 */
export function epochTailRequirement(plan: EpochPlan | null, aggregates: HistoryAggregates): TailRequirement {
  const toolCalls =
    plan === null ? aggregates.tool_calls : Math.min(aggregates.tool_calls, plan.keepFull + plan.compacted);
  const seqs = [...repeatedSeqs(aggregates)];
  return { toolCalls, seqs, wholeCalls: plan === null ? toolCalls : Math.min(toolCalls, plan.keepFull) };
}

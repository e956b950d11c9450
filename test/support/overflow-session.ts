import type { TailRequirement } from '../../lib/history.ts';
import type { HistoryAggregates } from '../../lib/history.ts';
import type { Model, ModelRequest } from '../../lib/models/model.ts';
import type { OpenTurn } from '../../lib/session/log/types.ts';
import type { OverflowBoundary } from '../../lib/session/records.ts';
import { recordingModel } from './recording-model.ts';
import { SessionLog } from './session-log.ts';

/** What the overflow safety net's tests on long sessions share (test/compaction/overflow-*.test.ts). */

/** A tool output's text: about 1.5 KB, which the strategies compact once a call is old enough. */
export const CODE = 'export const value = compute(input);\n'.repeat(40);

/** An agent answering with a short message; it records every prompt it gets. */
export function answeringModel(prompts: ModelRequest[]): Model {
  return recordingModel(prompts, () => ({
    output: [{ type: 'message', role: 'assistant', content: 'Done; the next step is the tests.' }],
    usage: { input_tokens: 0, output_tokens: 0 },
  }));
}

/** The session log reading every turn's history whole, as before the boundary was a read's start. */
export class WholeHistoryLog extends SessionLog {
  override readContext(
    turn: OpenTurn,
    requirement: TailRequirement | ((aggregates: HistoryAggregates) => TailRequirement),
    _start?: OverflowBoundary | null,
    from?: number,
  ) {
    return super.readContext(turn, requirement, null, from);
  }
}

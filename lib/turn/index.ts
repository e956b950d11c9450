/**
 * The public entry points of a turn (lib/turn/): `runTurn` (lib/turn/pipeline.ts orders its
 * steps), `streamTurn`, `appendItems`, the prompt preview, and the types the routes use.
 */
export { runTurn } from './pipeline.ts';
export { streamTurn } from './stream-turn.ts';
export { appendItems } from './append.ts';
export { claimBackgroundTurn } from './background.ts';
export { MAX_TURN_DELIVERIES, retryDelaySeconds, runBackgroundTurn, runInProcess } from './background-runner.ts';
export {
  cancelOpenTurn,
  listQueue,
  pickUpAfterLeaseClose,
  pickUpFirst,
  takeUnderPolicy,
} from './busy.ts';
export { pickUp } from './pickup.ts';
export { journalEvents, turnAsItStands, turnsAsTheyStand } from './journal.ts';
export { sweepQueues } from './queue-sweep.ts';
export { RunningTurns } from './running.ts';
export type {
  BackgroundTurn,
  TurnSessionLog,
  TurnServices,
  TurnRequest,
  TurnContext,
  TurnResponse,
  TurnEvent,
  TurnOptions,
  TurnObservation,
  CompactionSpend,
  CompactedTurn,
} from './types.ts';
export { resolveStrategyNames, packOptions, sessionStrategyPlan } from './plan.ts';
export { promptCharacters } from './assemble-prompt.ts';
export { errorRecord, seqRanges } from './receipt.ts';
export { countNextPrompt, nextTurnPrompt, previewPrompt } from './preview.ts';

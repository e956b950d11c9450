/**
 * The public entry points of a turn (lib/turn/): `runTurn` (lib/turn/pipeline.ts orders its
 * steps), `streamTurn`, `appendItems`, the prompt preview, and the types the routes use.
 */
export { runTurn } from './turn/pipeline.ts';
export { streamTurn } from './turn/stream-turn.ts';
export { appendItems } from './turn/append.ts';
export { claimBackgroundTurn } from './turn/background.ts';
export { runBackgroundTurn, runInProcess } from './turn/background-runner.ts';
export { pickUp, takeUnderPolicy } from './turn/busy.ts';
export { journalEvents } from './turn/journal.ts';
export type {
  BackgroundTurn,
  TurnSessionLog,
  TurnServices,
  TurnRequest,
  TurnContext,
  TurnResponse,
  TurnEvent,
  TurnOptions,
  TurnOutcome,
} from './turn/types.ts';
export { resolveStrategyNames, packOptions, sessionStrategyPlan } from './turn/plan.ts';
export { promptCharacters } from './turn/assemble-prompt.ts';
export { errorRecord, seqRanges } from './turn/receipt.ts';
export { previewPrompt } from './turn/preview.ts';

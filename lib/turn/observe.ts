import { TailgateError } from '../errors.ts';
import type { TurnEvent, TurnOutcome, TurnRequest, TurnResponse, TurnServices } from './types.ts';

/** What an observed turn learned on its way: its number, its model, when output first came. */
export interface Seen {
  turn?: number;
  model?: string;
  firstOutput?: number;
  replayed?: boolean;
}

/**
 * Runs a turn (`run`, given the events to emit and what to note in `seen`) and tells
 * `services.observeTurn` how it ended: the turn's log line and metrics (functions/turn-log.ts).
 * Without an observer the turn runs as it is. Nothing here reads or writes storage.
 */
export async function observed(
  services: TurnServices,
  sessionId: string,
  request: TurnRequest,
  emit: ((event: TurnEvent) => void) | undefined,
  run: (emit: ((event: TurnEvent) => void) | undefined, seen: Seen) => Promise<TurnResponse>,
): Promise<TurnResponse> {
  const observe = services.observeTurn;
  if (!observe) return run(emit, {});
  const started = Date.now();
  const seen: Seen = {};
  const timed =
    emit &&
    ((event: TurnEvent) => {
      if (event.event === 'output_text.delta' || event.event === 'output_item.done') seen.firstOutput ??= Date.now();
      emit(event);
    });
  const outcome = (status: TurnOutcome['status'], response?: TurnResponse, error?: unknown): TurnOutcome => ({
    session_id: sessionId,
    turn: response?.turn ?? seen.turn ?? null,
    status,
    error_code: error === undefined ? null : error instanceof TailgateError ? error.code : 'internal_error',
    model: seen.model ?? null,
    usage: status === 'completed' ? (response?.usage ?? null) : null,
    duration_ms: Date.now() - started,
    first_output_ms: seen.firstOutput === undefined ? null : seen.firstOutput - started,
    request,
    output: response?.output ?? [],
  });
  let response: TurnResponse;
  try {
    response = await run(timed, seen);
  } catch (error) {
    observe(outcome('failed', undefined, error));
    throw error;
  }
  observe(outcome(seen.replayed ? 'replayed' : 'completed', response));
  return response;
}

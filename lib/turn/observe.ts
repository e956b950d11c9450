import { LeaseHeldError, NotNewestTurnError, TailgateError, TurnNotOpenError } from '../errors.ts';
import type { TurnUsage } from '../ledger/usage.ts';
import { LapsedTurnRefused } from '../session/log/claim.ts';
import { TurnTrace } from './trace.ts';
import type { CompactionSpend, TurnEvent, TurnObservation, TurnRequest, TurnResponse, TurnServices } from './types.ts';

/**
 * What an observed turn learned on its way: its number, its model, when output first came;
 * and its trace, whose steps the pipeline runs in child spans (lib/turn/trace.ts).
 */
export interface Seen {
  turn?: number;
  model?: string;
  firstOutput?: number;
  replayed?: boolean;
  /** What the summary of a compaction the turn made used. */
  compaction?: CompactionSpend;
  /** What the model call of a turn stopped by someone else spent (lib/turn/stopped-spend.ts). */
  stopped?: TurnUsage;
  /** What the turn ran, when not the request observed: a background turn's stored request. */
  ran?: TurnRequest;
  trace: TurnTrace;
}

/**
 * Runs a turn (`run`, given the events to emit and what to note in `seen`) in its span, ends
 * the span with how the turn ended, then tells `services.observeTurn`: the turn's log line and
 * metrics (functions/turn-log.ts). Output is timed for a turn whose model streamed (`emit`): one
 * streamed to a client, or a background turn's, whose events go to its journal. A replay of a
 * stored failure is `replayed`, with the error it answers. Nothing here reads or writes storage.
 */
export async function observed(
  services: TurnServices,
  sessionId: string,
  request: TurnRequest,
  emit: ((event: TurnEvent) => void) | undefined,
  run: (emit: ((event: TurnEvent) => void) | undefined, seen: Seen) => Promise<TurnResponse>,
): Promise<TurnResponse> {
  const started = Date.now();
  const seen: Seen = { trace: new TurnTrace(services.tracer, sessionId) };
  const told = (ended: TurnObservation, error?: unknown) => tell(services, seen, ended, error);
  const timed =
    emit &&
    ((event: TurnEvent) => {
      if (event.event !== 'turn.started' && event.event !== 'turn.completed' && event.event !== 'error')
        seen.firstOutput ??= Date.now();
      emit(event);
    });
  const outcome = (status: TurnObservation['status'], response?: TurnResponse, error?: unknown) =>
    observation(sessionId, request, seen, started, status, response, error);
  let response: TurnResponse;
  try {
    response = await run(timed, seen);
  } catch (error) {
    told(outcome(seen.replayed ? 'replayed' : 'failed', undefined, error), error);
    throw error;
  }
  told(outcome(seen.replayed ? 'replayed' : 'completed', response));
  return response;
}

/**
 * A background turn's claim, which runs no turn here (lib/turn/background.ts): told when it is
 * refused (a spent budget, a busy session), as the failed turn it would have been, and as
 * `replayed` when `told` says so (a keyed retry of a turn its key claimed already, told once, as
 * other replays, with its turn and the error of the failure it answers again); its runner tells
 * how the turn it claimed ended. An input queued behind a busy session (lib/turn/busy.ts, `since`
 * when its request started) is told as `queued` once it is, with no turn yet (its turn is told
 * when it runs), as `replayed` when its key had queued it already, or as failed with the error
 * that kept it out.
 */
export async function observedClaim<T>(
  services: TurnServices,
  sessionId: string,
  request: TurnRequest,
  claim: () => Promise<T>,
  told?: {
    since?: number;
    status: (value: T) => { status: 'queued' | 'replayed'; turn?: number; error_code?: string } | undefined;
  },
): Promise<T> {
  const started = told?.since ?? Date.now();
  const seen = (): Seen => ({ trace: new TurnTrace(services.tracer, sessionId) });
  let value: T;
  try {
    value = await claim();
  } catch (error) {
    const refused = seen();
    tell(services, refused, observation(sessionId, request, refused, started, 'failed', undefined, error), error);
    throw error;
  }
  const outcome = told?.status(value);
  if (outcome) {
    const accepted: Seen = { ...seen(), ...(outcome.turn !== undefined ? { turn: outcome.turn } : {}) };
    const ended = observation(sessionId, request, accepted, started, outcome.status);
    tell(services, accepted, { ...ended, error_code: outcome.error_code ?? null });
  }
  return value;
}

/**
 * Ends the turn's span with how it ended, and tells `services.observeTurn`. Three errors are of
 * attempts that ran no turn, whose span ends untold: a claim refused for not following
 * `afterTurn` (NotNewestTurnError: the facade takes the request in a branch, whose turn is told;
 * its span ends without an error), one whose `onLapsed` refused to close an expired turn
 * (LapsedTurnRefused: the request starts again, and its turn is told; so too), and a background
 * turn's runner that found its lease another runner's (LeaseHeldError: the runner that runs the
 * turn tells it) or its turn closed already (TurnNotOpenError, which only such a runner meets
 * here: a message delivered again after the turn ended, whose run told it, or a turn closed
 * before any runner came).
 */
function tell(services: TurnServices, seen: Seen, ended: TurnObservation, error?: unknown): void {
  if (error instanceof NotNewestTurnError || error instanceof LapsedTurnRefused) {
    seen.trace.end({ ...ended, error_code: null });
    return;
  }
  seen.trace.end(ended);
  if (error instanceof LeaseHeldError || error instanceof TurnNotOpenError) return;
  services.observeTurn?.(ended);
}

function observation(
  sessionId: string,
  request: TurnRequest,
  seen: Seen,
  started: number,
  status: TurnObservation['status'],
  response?: TurnResponse,
  error?: unknown,
): TurnObservation {
  return {
    session_id: sessionId,
    turn: response?.turn ?? seen.turn ?? null,
    status,
    error_code: error === undefined ? null : error instanceof TailgateError ? error.code : 'internal_error',
    model: seen.model ?? null,
    usage: status === 'completed' ? (response?.usage ?? null) : (seen.stopped ?? null),
    compaction: seen.compaction ?? null,
    duration_ms: Date.now() - started,
    first_output_ms: seen.firstOutput === undefined ? null : seen.firstOutput - started,
    request: seen.ran ?? request,
    output: response?.output ?? [],
  };
}

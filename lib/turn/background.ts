import type { ClaimOptions } from '../session/log/claim.ts';
import { closedState, type TurnState } from '../session/log/turns.ts';
import { runTurn } from './pipeline.ts';
import { journalTurn } from './journal.ts';
import { checkRequest, inputItems, requestHash } from './plan.ts';
import { errorRecord, requestRecord } from './receipt.ts';
import type { TurnRequest, TurnServices } from './types.ts';

/**
 * Background turns (`POST .../turns` with `background: true`): the request claims the turn
 * (its record, create-only, so the input is durable and the turn numbered) and answers at
 * once; a runner then takes the claimed turn over by the random `writer` its record carries
 * and runs it to completion with no client connected: a Cloudflare Queues consumer on Workers
 * (functions/worker.ts), the process itself on Node and Deno. docs/STORAGE.md, "Background
 * turns", says what happens when a runner dies.
 */

/** What a runner needs to take a claimed background turn over (the queue message). */
export interface BackgroundTurn {
  session_id: string;
  turn: number;
  writer: string;
}

/**
 * Claims a background turn: everything a bad request could fail on first (a 400 stores
 * nothing), then its record, marked `background` in its stored settings. Returns the turn to
 * hand to a runner, or (a repeated Idempotency-Key whose turn is closed) that turn's state.
 */
export async function claimBackgroundTurn(
  services: TurnServices,
  sessionId: string,
  request: TurnRequest,
  options: { idempotencyKey?: string; afterTurn?: number } = {},
): Promise<{ turn: number; status: TurnState; run?: BackgroundTurn }> {
  checkRequest(services, request);
  const input = await services.sessions.storeAttachments(sessionId, inputItems(request));
  return claimInput(services, sessionId, {
    input,
    request: requestRecord(request),
    ...(options.afterTurn !== undefined ? { afterTurn: options.afterTurn } : {}),
    ...(options.idempotencyKey !== undefined
      ? { idempotencyKey: options.idempotencyKey, requestHash: requestHash(input, request) }
      : {}),
  });
}

/**
 * The claim of a background turn, unchecked (a queued input was checked when it was queued;
 * what no longer holds fails its turn, the input stored).
 */
export async function claimInput(
  services: TurnServices,
  sessionId: string,
  claimed: Pick<ClaimOptions, 'input' | 'idempotencyKey' | 'keyHash' | 'requestHash' | 'afterTurn' | 'check'> & {
    request: Record<string, unknown>;
  },
): Promise<{ turn: number; status: TurnState; run?: BackgroundTurn }> {
  const writer = crypto.randomUUID();
  const claim = services.sessions.claimTurn(sessionId, {
    ...claimed,
    request: { ...claimed.request, background: true },
    writer,
  });
  for (;;) {
    const attempt = await claim.next();
    if (attempt.kind === 'replay')
      return { turn: attempt.turn, status: closedState(attempt.status, attempt.error?.code) };
    if (await attempt.landed) {
      const { turn } = attempt.turn;
      return { turn, status: 'queued', run: { session_id: sessionId, turn, writer } };
    }
  }
}

/** Hands a claimed background turn to its runner: the queue on Workers, else this process. */
export async function startRun(services: TurnServices, run: BackgroundTurn): Promise<void> {
  if (services.startBackground) return services.startBackground(run);
  services.background(runBackgroundTurn(services, run));
}

/**
 * Runs a claimed background turn to its end. Settles 'done' once the turn is closed, by
 * itself or by someone else (its outcome is in its completion), and 'retry' when a storage
 * failure left it open, so a queue delivers it again and the next runner takes it over.
 */
export async function runBackgroundTurn(services: TurnServices, run: BackgroundTurn): Promise<'done' | 'retry'> {
  // Its events are journaled, so a client follows it (GET .../turns/{turn}/events).
  const journal = journalTurn(services, run.session_id);
  const background = { background: { turn: run.turn, writer: run.writer } };
  try {
    const response = await runTurn(services, run.session_id, { input: [] }, background, journal.emit);
    journal.emit({ event: 'turn.completed', data: response });
    return 'done';
  } catch (error) {
    const stored = errorRecord(error);
    journal.emit({ event: 'error', data: { error: stored }, cause: error });
    if (stored.code !== 'storage_error' && stored.code !== 'internal_error') return 'done';
    services.log(`tailgate: background turn ${run.turn} of session ${run.session_id} stopped`, error);
    return 'retry';
  } finally {
    journal.close();
  }
}

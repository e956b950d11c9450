import type { Context, ErrorHandler } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { ZodError } from 'zod';
import { InvalidRequestError, ReplayedError, TailgateError, TURN_CANCELLED } from '../lib/errors.ts';
import { clientError, type ErrorCode } from '../lib/error-codes.ts';
import { logToConsole } from '../lib/loggable.ts';
import { interruptedBy } from '../lib/session/log/lease.ts';
import { settleBusy } from '../lib/session/log/busy-lease.ts';
import { answeredIssue } from '../lib/validation-issue.ts';

/**
 * The one map from lib/ error codes to HTTP statuses (docs/API.md, "Conventions"). lib/ knows no
 * status; everything it throws carries an `ErrorCode` and lands here. The table is
 * exhaustive, so a code without a status does not compile. Only real bugs are 500s.
 */
export const STATUS_BY_CODE: Record<ErrorCode, ContentfulStatusCode> = {
  invalid_request: 400,
  unknown_strategy: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  session_exists: 409,
  name_taken: 409,
  inbox_full: 409,
  fork_refused: 409,
  delete_refused: 409,
  turn_in_progress: 409,
  aborted: 409,
  lease_expired: 409,
  turn_cancelled: 409,
  turn_not_open: 409,
  queued_input_taken: 409,
  budget_exhausted: 402,
  idempotency_key_reused: 422,
  payload_too_large: 413,
  headers_too_large: 431,
  expectation_failed: 417,
  overloaded: 503,
  rate_limited: 429,
  context_too_large: 413,
  model_error: 502,
  model_timeout: 504,
  not_configured: 503,
  storage_error: 503,
  storage_unsupported: 503,
  corrupt_object: 500,
  internal_error: 500,
};

export interface ErrorBody {
  error: { code: string; message: string; details?: unknown };
}

/** The status and JSON body for any thrown value; unknown errors become a generic 500. */
export function errorBody(
  error: unknown,
  log: (message: string, error: unknown) => void = logToConsole,
): { status: ContentfulStatusCode; body: ErrorBody } {
  if (error instanceof TailgateError) {
    const status = STATUS_BY_CODE[error.code];
    // Server-side failures are logged (with keys and backend text the client never sees);
    // a missing setting is the operator's, and says so. A replayed model failure was logged when
    // its call failed: its replay has the turn's log line ('replayed') alone.
    const replayedModelFailure =
      error instanceof ReplayedError && (error.code === 'model_error' || error.code === 'model_timeout');
    if (status >= 500 && error.code !== 'not_configured' && !replayedModelFailure)
      log(`tailgate: ${error.code}`, error);
    return { status, body: { error: clientError(error) } };
  }
  if (error instanceof HTTPException) {
    // Hono's own client errors: malformed JSON from the validator, oversized bodies.
    if (error.status === 413)
      return {
        status: 413,
        body: { error: { code: 'payload_too_large', message: error.message || 'request body too large' } },
      };
    if (error.status >= 400 && error.status < 500) {
      return { status: 400, body: { error: { code: 'invalid_request', message: error.message || 'invalid request' } } };
    }
  }
  log('tailgate: unexpected error', error);
  return { status: 500, body: { error: { code: 'internal_error', message: 'internal error' } } };
}

/**
 * Whether `error` is a conflict the same request meets again, which the official clients would
 * retry (they retry every 409 they are not told not to): a delete of a response or turn another
 * came after (not one of a turn still running: that passes once it ended), a response that
 * cannot branch, a `store: false` response off a conversation due a compaction (until a stored
 * turn makes it). A busy session's `turn_in_progress` is not one: its retry passes once the turn ends.
 */
function lastingConflict(error: { code: string | null; details?: unknown }): boolean {
  if (error.code === 'delete_refused') return (error.details as { running?: unknown } | undefined)?.running !== true;
  return error.code === 'conversation_branching_unsupported' || error.code === 'compaction_due';
}

/**
 * Whether `error` answers a turn a cancel closed (`POST .../turns/{turn}/cancel`): its client is
 * not to send it again. Not one an `interrupt` closed (`details.interrupted`): a response answered
 * at its end is then taken out, and its client's retry stores its input once (lib/turn/dead-turn.ts).
 */
function cancelled(error: { code: string | null; details?: unknown }): boolean {
  return error.code === TURN_CANCELLED && !interruptedBy(error);
}

/**
 * The headers of `thrown`'s answer, whose body says `error`: an `aborted` one says
 * `x-should-retry: false` (the header the official OpenAI clients obey), so a client does not
 * retry the turn an `abort` notice stopped, and so do a cancelled turn's 409 (cancelled), a
 * conflict a retry meets again (lastingConflict), a missing setting's 503 (`not_configured`: it
 * stays missing until the operator sets it) and a failed turn's answer replayed under its
 * Idempotency-Key (a retry under that key gets the same answer); a model failure whose provider
 * said when to come back (`details.retry_after_seconds`) says `Retry-After`, when it happened,
 * not in its replay (that wait is past, and the key's retry cannot pass); a busy 409 says
 * `Retry-After` and `retry-after-ms` (busyWaitMs, counted from `now`); a 405 says the methods
 * its path takes in `Allow` (functions/allowed-methods.ts).
 */
export function errorHeaders(
  error: { code: string | null; details?: unknown },
  thrown: unknown,
  now = Date.now(),
): Record<string, string> {
  if (
    error.code === 'aborted' ||
    error.code === 'not_configured' ||
    thrown instanceof ReplayedError ||
    lastingConflict(error) ||
    cancelled(error)
  )
    return { 'x-should-retry': 'false' };
  if (error.code === 'method_not_allowed')
    return { allow: ((error.details as { allow?: string[] } | undefined)?.allow ?? []).join(', ') };
  if (thrown instanceof TailgateError && thrown.code === 'turn_in_progress') {
    const wait = busyWaitMs((thrown.details as { lease_expires_at?: unknown } | undefined)?.lease_expires_at, now);
    return { 'retry-after': String(Math.max(1, Math.ceil(wait / 1000))), 'retry-after-ms': String(wait) };
  }
  const retryAfter = (error.details as { retry_after_seconds?: unknown } | undefined)?.retry_after_seconds;
  return error.code === 'model_error' && typeof retryAfter === 'number' ? { 'retry-after': String(retryAfter) } : {};
}

/** The request's time, by its services' clock (the system's before they are set). */
export function requestNow(c: Context): number {
  return ((c.var as { services?: { clock: () => Date } }).services?.clock() ?? new Date()).getTime();
}

/**
 * The ms a busy 409 (`turn_in_progress`) tells its client to wait (docs/API.md, "Busy
 * sessions"): until the holder's `lease_expires_at`, when a retry is no longer refused for a
 * holder that died. A live holder renewed its lease long before (every third of it:
 * lib/turn/renewal.ts), so the retry then meets a lease that ends later, never one about to.
 * At least 1 ms; 1 s for a 409 naming no lease.
 */
function busyWaitMs(leaseExpiresAt: unknown, now: number): number {
  const left = typeof leaseExpiresAt === 'string' ? Date.parse(leaseExpiresAt) - now : Number.NaN;
  return Number.isNaN(left) ? 1000 : Math.max(1, Math.ceil(left));
}

/** Hono's onError: the single error JSON shape from the HTTP API; server-side failures go to `log`. */
export function createErrorHandler(log: (message: string, error: unknown) => void = logToConsole): ErrorHandler {
  return async (error, c) => {
    // A busy 409 names its holder's renewed lease (lib/session/log/busy-lease.ts).
    await settleBusy(error);
    const { status, body } = errorBody(error, log);
    return c.json(body, status, errorHeaders(body.error, error, requestNow(c)));
  };
}

/**
 * Turns a zod failure into `invalid_request` naming the failing field, e.g.
 * `body.input: required` or `body.colour: unknown field` (the issue as answeredIssue reads it).
 */
export function validationError(error: ZodError, target: string, value?: unknown): InvalidRequestError {
  const base = target === 'json' ? 'body' : target;
  const answer = answeredIssue(error, value);
  if (!answer) return new InvalidRequestError(`invalid ${base}`, { field: base });
  const { issues } = answer;
  const field = answer.path.map(String).join('.');
  if (answer.unknownField) return new InvalidRequestError(`${base}.${field}: unknown field`, { field, issues });
  return new InvalidRequestError(`${field ? `${base}.${field}` : base}: ${answer.message}`, {
    field: field || base,
    issues,
  });
}

/** The defaultHook of every OpenAPIHono router: a failed validation throws to onError. */
export function validationHook(
  result: { success: true } | { success: false; error: ZodError; target: string; data?: unknown },
  _c: Context,
): void {
  if (!result.success) throw validationError(result.error, result.target, result.data);
}

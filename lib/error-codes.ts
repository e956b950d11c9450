import { bracketedMessage } from './field-path.ts';

/**
 * The codes of the API's error JSON (docs/API.md, "Conventions") and what a client sees of an error (clientError);
 * lib/errors.ts holds the error classes thrown with them.
 *
 * Every error code of the API's error JSON. The union is closed: functions/error-handler.ts maps each one to an HTTP
 * status in an exhaustive table, so a new code cannot ship without a status. lib/ knows no HTTP status.
 */
export const ERROR_CODES = [
  'invalid_request',
  'unknown_strategy',
  'unauthorized',
  'forbidden',
  'not_found',
  'method_not_allowed',
  'session_exists',
  'name_taken',
  'inbox_full',
  'fork_refused',
  'delete_refused',
  'turn_in_progress',
  'aborted',
  'lease_expired',
  'turn_cancelled',
  'turn_not_open',
  'queued_input_taken',
  'budget_exhausted',
  'idempotency_key_reused',
  'payload_too_large',
  'headers_too_large',
  'expectation_failed',
  'overloaded',
  'rate_limited',
  'context_too_large',
  'model_error',
  'model_timeout',
  'not_configured',
  'storage_error',
  'storage_unsupported',
  'corrupt_object',
  'internal_error',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

const KNOWN_CODES: ReadonlySet<string> = new Set(ERROR_CODES);

/**
 * Codes that older stored turns may hold and that are no longer thrown, with the code each became: `turn_closed` (a
 * completion found its turn closed) and `duplicate_request` (a concurrent request claimed the same idempotency key)
 * were conflicts, never server faults.
 */
const RENAMED_CODES: Readonly<Record<string, ErrorCode>> = {
  turn_closed: 'turn_not_open',
  duplicate_request: 'turn_in_progress',
};

export function isErrorCode(code: string): code is ErrorCode {
  return KNOWN_CODES.has(code);
}

/**
 * The code of an error read back from storage (a replayed turn's): one this version does not know is `internal_error`.
 *
 * @example storedErrorCode('turn_closed') // 'turn_not_open'
 */
export function storedErrorCode(code: string): ErrorCode {
  if (isErrorCode(code)) return code;
  return RENAMED_CODES[code] ?? 'internal_error';
}

/**
 * Codes whose message never reaches a client: it may carry object keys, backend or provider text. Their details
 * are dropped too, except a model failure's (the model id and status).
 */
const CLIENT_MESSAGES: Partial<Record<string, string>> = {
  corrupt_object: 'a stored object is invalid',
  storage_error: 'storage failed',
  internal_error: 'internal error',
  model_error: 'the model call failed',
};
const CLIENT_DETAILS_KEPT: ReadonlySet<string> = new Set(['model_error']);

/**
 * What a client may see of an error: its code, message (its field in brackets: bracketedMessage) and details; a
 * server-side failure (a corrupt object, storage, internal, a provider's) gets a generic message, its text the log's.
 *
 * @example clientError({ code: 'storage_error', message: 'S3 get sessions/a/x failed: ECONNRESET' })
 * // { code: 'storage_error', message: 'storage failed' }
 */
export function clientError<Code extends string>(error: {
  code: Code;
  message: string;
  details?: unknown;
}): { code: Code; message: string; details?: unknown } {
  const generic = CLIENT_MESSAGES[error.code];
  const message = generic ?? bracketedMessage(error.message, error.details);
  const keepDetails = generic === undefined || CLIENT_DETAILS_KEPT.has(error.code);
  return error.details === undefined || !keepDetails
    ? { code: error.code, message }
    : { code: error.code, message, details: error.details };
}

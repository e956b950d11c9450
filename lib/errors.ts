/**
 * Every error code of the API's error JSON. The union is closed: functions/error-handler.ts
 * maps each one to an HTTP status in an exhaustive table, so a new code cannot ship without
 * a status. lib/ knows no HTTP status.
 */
export const ERROR_CODES = [
  'invalid_request',
  'unknown_strategy',
  'unauthorized',
  'forbidden',
  'not_found',
  'session_exists',
  'name_taken',
  'turn_in_progress',
  'aborted',
  'lease_expired',
  'turn_cancelled',
  'turn_not_open',
  'idempotency_key_reused',
  'payload_too_large',
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
 * Codes that older stored turns may hold and that are no longer thrown, with the code each
 * became: `turn_closed` (a completion found its turn closed) and `duplicate_request` (a
 * concurrent request claimed the same idempotency key) were conflicts, never server faults.
 */
const RENAMED_CODES: Readonly<Record<string, ErrorCode>> = {
  turn_closed: 'turn_not_open',
  duplicate_request: 'turn_in_progress',
};

export function isErrorCode(code: string): code is ErrorCode {
  return KNOWN_CODES.has(code);
}

/**
 * The code of an error read back from storage (a replayed turn's stored failure). A code
 * this version does not know is an `internal_error`, never a status it cannot name.
 *
 * @example storedErrorCode('turn_closed') // 'turn_not_open'
 */
export function storedErrorCode(code: string): ErrorCode {
  if (isErrorCode(code)) return code;
  return RENAMED_CODES[code] ?? 'internal_error';
}

/**
 * Codes whose message never reaches a client: it may carry object keys, backend or provider
 * text. Their details are dropped too, except a model failure's (the model id and status).
 */
const CLIENT_MESSAGES: Partial<Record<string, string>> = {
  corrupt_object: 'a stored object is invalid',
  storage_error: 'storage failed',
  internal_error: 'internal error',
  model_error: 'the model call failed',
};
const CLIENT_DETAILS_KEPT: ReadonlySet<string> = new Set(['model_error']);

/**
 * The one error base of lib/. `code` is the snake_case code of the API's error JSON.
 * lib/ knows no HTTP status: functions/ maps codes to statuses in one table.
 */
export class TailgateError extends Error {
  readonly code: ErrorCode;
  readonly details: unknown;

  constructor(code: ErrorCode, message: string, details?: unknown) {
    super(message);
    this.name = 'TailgateError';
    this.code = code;
    this.details = details;
  }
}

/** Thrown for any input a client sent that does not validate. */
export class InvalidRequestError extends TailgateError {
  constructor(message: string, details?: unknown) {
    super('invalid_request', message, details);
    this.name = 'InvalidRequestError';
  }
}

/** Thrown when a session, item, turn or notice does not exist. */
export class NotFoundError extends TailgateError {
  constructor(message: string, details?: unknown) {
    super('not_found', message, details);
    this.name = 'NotFoundError';
  }
}

/**
 * An object read back from storage is corrupt or not ours. The message clients see is
 * generic; `key` and `reason` are for the log only (object keys are not the client's).
 */
export class CorruptObjectError extends TailgateError {
  readonly key: string;
  readonly reason: string;
  constructor(key: string, reason: string) {
    super('corrupt_object', 'a stored object is invalid');
    this.name = 'CorruptObjectError';
    this.key = key;
    this.reason = reason;
  }
}

/**
 * A storage backend failed (network, 5xx, throttling) after its own retries. `message` and
 * `details` may name keys and carry backend text: they are for the log, and the error
 * handler answers clients with a generic message (see `clientError`).
 */
export class StorageError extends TailgateError {
  constructor(message: string, details?: unknown) {
    super('storage_error', message, details);
    this.name = 'StorageError';
  }
}

/**
 * What a client may see of an error: its code, message and details, except for server-side
 * failures whose text is the log's (a corrupt object, a storage failure, an internal error,
 * the text of a model provider's failure), which get a generic message.
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
  const message = generic ?? error.message;
  const keepDetails = generic === undefined || CLIENT_DETAILS_KEPT.has(error.code);
  return error.details === undefined || !keepDetails
    ? { code: error.code, message }
    : { code: error.code, message, details: error.details };
}

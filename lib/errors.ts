/**
 * The one error base of lib/. `code` is the snake_case code of API.md's error JSON.
 * lib/ knows no HTTP status: functions/ maps codes to statuses in one table.
 */
export class TailgateError extends Error {
  readonly code: string;
  readonly details: unknown;

  constructor(code: string, message: string, details?: unknown) {
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

/** An object read back from storage is corrupt or not ours. Names the key. */
export class CorruptObjectError extends TailgateError {
  readonly key: string;
  constructor(key: string, reason: string) {
    super('corrupt_object', `stored object ${key} is invalid: ${reason}`, { key });
    this.name = 'CorruptObjectError';
    this.key = key;
  }
}

/** A storage backend failed (network, 5xx, throttling) after its own retries. */
export class StorageError extends TailgateError {
  constructor(message: string, details?: unknown) {
    super('storage_error', message, details);
    this.name = 'StorageError';
  }
}

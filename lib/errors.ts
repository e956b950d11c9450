import { answeredDetails } from './field-path.ts';
import { type ErrorCode, storedErrorCode } from './error-codes.ts';

/**
 * The error classes of lib/ (the model providers' are in lib/models/errors.ts); lib/error-codes.ts holds the codes
 * they are thrown with and what a client sees of an error.
 */

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
 * A storage backend failed (network, 5xx, throttling) after its own retries. `message` and `details` may name keys and
 * carry backend text: they are for the log, and the error handler answers clients with a generic message (clientError).
 */
export class StorageError extends TailgateError {
  constructor(message: string, details?: unknown) {
    super('storage_error', message, details);
    this.name = 'StorageError';
  }
}

/** A deployment setting is missing or invalid (the service answers 503). */
export class NotConfiguredError extends TailgateError {
  constructor(message: string, details?: unknown) {
    super('not_configured', message, details);
    this.name = 'NotConfiguredError';
  }
}

/** A conditional-write precondition the store was seen to ignore. */
export type MissingPrecondition = 'If-None-Match' | 'If-Match';

/**
 * The store does not honour the conditional writes the session log commits with, so using it would silently lose
 * acknowledged writes. `missing` names what it ignored; the message says what was seen and which stores conform.
 */
export class StorageUnsupportedError extends TailgateError {
  constructor(message: string, missing: MissingPrecondition[]) {
    super('storage_unsupported', message, { missing });
    this.name = 'StorageUnsupportedError';
  }

  /** `details.missing`, read from there: no field of its own, so a log line shows it once (lib/loggable.ts). */
  get missing(): MissingPrecondition[] {
    return (this.details as { missing: MissingPrecondition[] }).missing;
  }
}

/**
 * The request bodies this process holds already fill MAX_BUFFERED_BODY_BYTES: try again
 * shortly (503 with Retry-After).
 */
export class OverloadedError extends TailgateError {
  constructor(budget: number) {
    super('overloaded', 'too many request bodies are being received; retry shortly', { limit: budget });
    this.name = 'OverloadedError';
  }
}

/** Too many turns a minute for a session or a token (functions/rate-limit.ts): 429, nothing stored. */
export class RateLimitedError extends TailgateError {
  constructor(per: 'session' | 'token', limit: number | null, retryAfterSeconds: number) {
    const details = { per, limit, retry_after_seconds: retryAfterSeconds };
    super('rate_limited', `too many turns per minute for this ${per}; retry after ${retryAfterSeconds} s`, details);
    this.name = 'RateLimitedError';
  }
}

/** A body, item, notice or field is larger than its configured limit (413). */
export class PayloadTooLargeError extends TailgateError {
  constructor(message: string, details?: unknown) {
    super('payload_too_large', message, details);
    this.name = 'PayloadTooLargeError';
  }
}

/** A strategy list named a strategy that is not registered. `details.known` lists the names. */
export class UnknownStrategyError extends TailgateError {
  readonly strategy: string;
  readonly known: string[];

  constructor(strategy: string, known: string[]) {
    super('unknown_strategy', `unknown strategy "${strategy}"; known strategies: ${known.join(', ')}`, {
      strategy,
      known,
    });
    this.name = 'UnknownStrategyError';
    this.strategy = strategy;
    this.known = known;
  }
}

/** A session with this id already exists (create is create-only). */
export class SessionExistsError extends TailgateError {
  constructor(id: string) {
    super('session_exists', `session ${id} already exists`, { id });
    this.name = 'SessionExistsError';
  }
}

/**
 * A fork point that cannot be forked at (packed, too deep, or an open turn): the message says which,
 * `details` names the session (`id`) and the point (`turn` or `seq`).
 */
export class ForkRefusedError extends TailgateError {
  constructor(message: string, details?: unknown) {
    super('fork_refused', message, details);
    this.name = 'ForkRefusedError';
  }
}

/** A turn that cannot be deleted (not the newest, running, the record before it packed): the message says which. */
export class DeleteRefusedError extends TailgateError {
  constructor(message: string, details?: unknown) {
    super('delete_refused', message, details);
    this.name = 'DeleteRefusedError';
  }
}

/** A pending notice already has this name (409 `name_taken`). */
export class NameTakenError extends TailgateError {
  constructor(name: string) {
    super('name_taken', `a pending notice is already named ${name}`, { name });
    this.name = 'NameTakenError';
  }
}

/** The inbox holds as many pending notices as it takes (409 `inbox_full`). */
export class InboxFullError extends TailgateError {
  constructor(limit: number) {
    super('inbox_full', `the inbox holds its limit of ${limit} pending notices`, { limit });
    this.name = 'InboxFullError';
  }
}

/** Another model turn on this session is open and its lease has not expired. */
export class TurnInProgressError extends TailgateError {
  /** The running turn is the one this request's Idempotency-Key was used for (its retry). */
  ownKey = false;
  /** With `ownKey`: that turn runs in the background (its record says `background`). */
  ownBackground = false;
  /** This request's Idempotency-Key holds an input still queued with the same request: its enqueue answers it. */
  queuedKey = false;

  constructor(sessionId: string, turn: number, leaseExpiresAt?: string) {
    super('turn_in_progress', `turn ${turn} of session ${sessionId} is in progress`, {
      session_id: sessionId,
      turn,
      ...(leaseExpiresAt ? { lease_expires_at: leaseExpiresAt } : {}),
    });
    this.name = 'TurnInProgressError';
  }
}

/** A background turn's lease is another runner's (it renews it, or took it over): the turn runs there. */
export class LeaseHeldError extends TurnInProgressError {
  constructor(sessionId: string, turn: number, leaseExpiresAt?: string) {
    super(sessionId, turn, leaseExpiresAt);
    this.name = 'LeaseHeldError';
  }
}

/**
 * A session's or a scoped token's budget is spent: its turns are refused before anything is
 * stored (lib/ledger/budget.ts). `details.budget` says whose.
 */
export class BudgetExhaustedError extends TailgateError {
  constructor(limit: string, spent: number, value: number, holder: 'session' | 'token' = 'session') {
    const remedy =
      holder === 'session'
        ? "a PATCH of the session's budget raises it"
        : "a token's budget is signed into it: go on with a token minted anew";
    super('budget_exhausted', `the ${holder}'s budget is spent: ${limit} is ${value}, spent ${spent}; ${remedy}`, {
      budget: holder,
      limit,
      spent,
      value,
    });
    this.name = 'BudgetExhaustedError';
  }
}

/** The stored errors of turns closed by someone other than their owner. */
export const LEASE_EXPIRED = 'lease_expired';
export const TURN_CANCELLED = 'turn_cancelled';
export const SESSION_DELETED = 'session_deleted';

/**
 * The error a turn whose lease ran out is closed with (stored in its completion, so a retry under its Idempotency-Key
 * replays it): it names the turn, as the other 409s of a turn do, and says how to take it again (docs/API.md "Turns").
 */
export function leaseExpired(sessionId: string, turn: number): { code: string; message: string; details: object } {
  return {
    code: LEASE_EXPIRED,
    message:
      `turn ${turn} did not complete before its lease expired; its output was not stored. While it is the ` +
      `session's newest turn, POST /v1/sessions/${sessionId}/turns with "input": [] under a new ` +
      'Idempotency-Key (or none) takes it again',
    details: { session_id: sessionId, turn },
  };
}

/**
 * The error a cancel closes a turn with (stored in its completion: its receipt's error), as its owner answers it
 * (TurnClosedError): an `interrupt`'s says so (`interrupted`, its message "was interrupted").
 */
export function turnCancelled(
  sessionId: string,
  turn: number,
  interrupted = false,
): { code: string; message: string; details: { session_id: string; turn: number; interrupted?: true } } {
  return {
    code: TURN_CANCELLED,
    message: interrupted ? `turn ${turn} was interrupted` : `turn ${turn} was cancelled; its output was not stored`,
    details: { session_id: sessionId, turn, ...(interrupted ? { interrupted: true as const } : {}) },
  };
}

/**
 * The turn was closed by someone else, nothing stored: `code` and `details` are its closer's stored error's, a cancel's
 * (`details.interrupted`: an `interrupt`'s, lib/session/log/lease.ts cancelTurn) or else a lapsed lease's.
 */
export class TurnClosedError extends TailgateError {
  constructor(sessionId: string, turn: number, code: string, details?: unknown) {
    const cancelled = code === TURN_CANCELLED;
    const interrupted = cancelled && (details as { interrupted?: unknown } | undefined)?.interrupted === true;
    super(
      cancelled ? TURN_CANCELLED : LEASE_EXPIRED,
      cancelled ? turnCancelled(sessionId, turn, interrupted).message : leaseExpired(sessionId, turn).message,
      { session_id: sessionId, turn, ...(interrupted ? { interrupted: true } : {}) },
    );
    this.name = 'TurnClosedError';
  }
}

/** How a closed turn ended, as a refusal says it: `completed`, `was cancelled`, `failed (lease_expired)`. */
type TurnEnd = { status: string; error?: { code: string; details?: unknown } | undefined };

function endedAs({ status, error }: TurnEnd): string {
  if (status === 'aborted') return 'was aborted';
  if (error?.code !== TURN_CANCELLED) return error ? `${status} (${error.code})` : status;
  return (error.details as { interrupted?: unknown } | undefined)?.interrupted === true
    ? 'was interrupted'
    : 'was cancelled';
}

/**
 * A cancel named a turn that is not open (404 when it never existed); `ended`, its completion
 * when the closer read it, says how it ended.
 */
export class TurnNotOpenError extends TailgateError {
  constructor(sessionId: string, turn: number, ended?: TurnEnd) {
    const how = ended ? `: it ${endedAs(ended)}` : '';
    const message = `turn ${turn} of session ${sessionId} is not open${how}`;
    super('turn_not_open', message, { session_id: sessionId, turn });
    this.name = 'TurnNotOpenError';
  }
}

/**
 * A turn claimed to follow turn `expected` found a newer turn stored (`newest`): taking it would branch the
 * conversation. Judged after the Idempotency-Key replay, so a retry of the turn that became the newest gets its stored
 * answer. Only the OpenAI-compatible routes ask for it, and answer it in their own shape (409
 * conversation_branching_unsupported).
 */
export class NotNewestTurnError extends Error {
  /** The session's newest turn. */
  readonly newest: number;

  constructor(sessionId: string, expected: number, newest: number) {
    super(`turn ${expected} of session ${sessionId} is not its newest (turn ${newest} is)`);
    this.name = 'NotNewestTurnError';
    this.newest = newest;
  }
}

/** An Idempotency-Key used before with a different request (422): for turn `turn` (0: unknown), or a queued input. */
export class IdempotencyKeyReusedError extends TailgateError {
  readonly turn: number;
  constructor(turn: number, queuedTurn?: string) {
    const details = turn > 0 ? { turn } : queuedTurn ? { queued_turn: queuedTurn } : undefined;
    const what = turn > 0 ? `for turn ${turn} ` : queuedTurn ? `for queued input ${queuedTurn} ` : '';
    super('idempotency_key_reused', `the Idempotency-Key was used ${what}with a different request`, details);
    this.name = 'IdempotencyKeyReusedError';
    this.turn = turn;
  }
}

/** The turn was ended by an `abort` notice (409). */
export class AbortedError extends TailgateError {
  constructor(reason: string, details: { reason: string; notice: string; stored_as: string; turn: number }) {
    super('aborted', `the turn was aborted: ${reason}`, details);
    this.name = 'AbortedError';
  }
}

/** A replayed turn that had failed: the stored error, rethrown with its code. */
export class ReplayedError extends TailgateError {
  constructor(error: { code: string; message: string; details?: unknown }) {
    super(storedErrorCode(error.code), error.message, answeredDetails(error.details, error.message));
    this.name = 'ReplayedError';
  }
}

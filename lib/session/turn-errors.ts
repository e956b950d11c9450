import { TailgateError } from '../errors.ts';

/** The same Idempotency-Key was used before with a different request (422). */
export class IdempotencyKeyReusedError extends TailgateError {
  constructor(turn: number) {
    super('idempotency_key_reused', `the Idempotency-Key was used for turn ${turn} with a different request`, { turn });
    this.name = 'IdempotencyKeyReusedError';
  }
}

/** The turn was closed by someone else (its lease expired, or it was cancelled): nothing was stored. */
export class TurnClosedError extends TailgateError {
  constructor(sessionId: string, turn: number, code: 'lease_expired' | 'turn_cancelled') {
    super(
      code,
      code === 'turn_cancelled'
        ? `turn ${turn} was cancelled; its output was not stored`
        : `turn ${turn} outlived its lease and was closed as failed; its output was not stored`,
      { session_id: sessionId, turn },
    );
    this.name = 'TurnClosedError';
  }
}

/** A cancel named a turn that is not open (404 when it never existed). */
export class TurnNotOpenError extends TailgateError {
  constructor(sessionId: string, turn: number) {
    super('turn_not_open', `turn ${turn} of session ${sessionId} is not open`, { session_id: sessionId, turn });
    this.name = 'TurnNotOpenError';
  }
}

/** The stored errors of turns closed by someone other than their owner. */
export const LEASE_EXPIRED = 'lease_expired';
export const TURN_CANCELLED = 'turn_cancelled';
export const SESSION_DELETED = 'session_deleted';

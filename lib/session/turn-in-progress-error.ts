import { TailgateError } from '../errors.ts';

/** Another model turn on this session is open and its lease has not expired. */
export class TurnInProgressError extends TailgateError {
  constructor(sessionId: string, turn: number, leaseExpiresAt?: string) {
    super('turn_in_progress', `turn ${turn} of session ${sessionId} is in progress`, {
      session_id: sessionId,
      turn,
      ...(leaseExpiresAt ? { lease_expires_at: leaseExpiresAt } : {}),
    });
    this.name = 'TurnInProgressError';
  }
}

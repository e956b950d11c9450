import { TailgateError } from '../errors.ts';

/**
 * completeTurn found the turn already closed: its lease expired and a newer request closed it
 * as failed (or it was completed twice). The outputs were not stored.
 */
export class TurnClosedError extends TailgateError {
  constructor(sessionId: string, turn: number) {
    super('turn_not_open', `turn ${turn} of session ${sessionId} was already closed`, { session_id: sessionId, turn });
    this.name = 'TurnClosedError';
  }
}

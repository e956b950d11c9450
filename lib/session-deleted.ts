import { NotFoundError } from './errors.ts';

/**
 * The session was deleted while work on it ran (a turn, a compaction, an import, an export): a 404
 * as any missing session, but the work had started (a turn's model may have been called).
 */
export class SessionDeletedError extends NotFoundError {
  /** `during`: what ran (a turn's number: `turn <n>`). */
  constructor(id: string, during: string | number) {
    super(`session ${id} was deleted during ${typeof during === 'number' ? `turn ${during}` : during}`, { id });
  }
}

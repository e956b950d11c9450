import { TailgateError } from '../errors.ts';

/** A session with this id already exists (create is create-only). */
export class SessionExistsError extends TailgateError {
  constructor(id: string) {
    super('session_exists', `session ${id} already exists`, { id });
    this.name = 'SessionExistsError';
  }
}

import { TailgateError } from '../errors.ts';

/** A pending notice already has this name (docs/API.md: 409 `name_taken`). */
export class NameTakenError extends TailgateError {
  constructor(name: string) {
    super('name_taken', `a pending notice is already named ${name}`, { name });
    this.name = 'NameTakenError';
  }
}

/** A notice's content is larger than the configured limit (docs/API.md: 413 `payload_too_large`). */
export class PayloadTooLargeError extends TailgateError {
  constructor(message: string, details?: unknown) {
    super('payload_too_large', message, details);
    this.name = 'PayloadTooLargeError';
  }
}

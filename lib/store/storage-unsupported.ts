import { TailgateError } from '../errors.ts';

/** A conditional-write precondition the store was seen to ignore. */
export type MissingPrecondition = 'If-None-Match' | 'If-Match';

/**
 * The store does not honour the conditional writes the session log commits with, so using
 * it would silently lose acknowledged writes. `missing` names what it ignored; the message
 * says what was seen and which stores conform.
 */
export class StorageUnsupportedError extends TailgateError {
  readonly missing: MissingPrecondition[];

  constructor(message: string, missing: MissingPrecondition[]) {
    super('storage_unsupported', message, { missing });
    this.name = 'StorageUnsupportedError';
    this.missing = missing;
  }
}

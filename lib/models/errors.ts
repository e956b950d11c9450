import { TailgateError } from '../errors.ts';

/** The errors of model providers (lib/errors.ts has every other error of lib/ and the codes). */

/** The provider failed or answered something invalid (502). */
export class ModelError extends TailgateError {
  constructor(message: string, details?: unknown) {
    super('model_error', message, details);
    this.name = 'ModelError';
  }
}

/** The provider did not answer in time (504). */
export class ModelTimeoutError extends TailgateError {
  constructor(message: string, details?: unknown) {
    super('model_timeout', message, details);
    this.name = 'ModelTimeoutError';
  }
}

/** A `model` id that names no known provider (400). */
export class UnknownModelError extends TailgateError {
  constructor(id: string, known: string[]) {
    super('invalid_request', `unknown model "${id}"; known providers: ${known.join(', ')}`, { field: 'model', known });
    this.name = 'UnknownModelError';
  }
}

/**
 * A known provider that cannot be used as configured: a required setting (an API key, a base
 * URL, the Workers AI binding) is missing or a model setting is malformed: 503
 * `not_configured` (`details.field = "model"`, `details.setting`), checked before a turn
 * stores anything, never a crash.
 */
export class ModelConfigurationError extends TailgateError {
  /** The setting the model needs (missing or malformed). */
  readonly setting: string;
  constructor(message: string, details: { model: string; setting: string }) {
    super('not_configured', message, { field: 'model', ...details });
    this.setting = details.setting;
    this.name = 'ModelConfigurationError';
  }
}

import { TailgateError } from '../errors.ts';

/**
 * A known provider that cannot be used as configured: a required setting (an API key, a base
 * URL, the Workers AI binding) is missing or a model setting is malformed. It answers the
 * request that named the model (400, `details.field = "model"`), never a crash.
 */
export class ModelConfigurationError extends TailgateError {
  constructor(message: string, details: { model: string; setting: string }) {
    super('invalid_request', message, { field: 'model', ...details });
    this.name = 'ModelConfigurationError';
  }
}

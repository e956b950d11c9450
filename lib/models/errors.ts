import type { APICallError } from 'ai';
import { TailgateError } from '../errors.ts';

/** The errors of model providers (lib/errors.ts has the other error classes of lib/, lib/error-codes.ts the codes). */

/**
 * The provider failed or answered something invalid (502): its details name the model (docs/API.md),
 * with whatever else tells the failure.
 */
export class ModelError extends TailgateError {
  constructor(message: string, details: { model: string; [detail: string]: unknown }) {
    super('model_error', message, details);
    this.name = 'ModelError';
  }
}

/**
 * The provider refused the prompt as longer than the model's window, though tailgate's count
 * fitted it (413 `context_too_large`, `details: {model, status}`): the window tailgate assumed
 * (`context_limit`) is larger than the model's, or its token count fell short.
 */
export class ModelContextTooLargeError extends TailgateError {
  constructor(model: string, status: number) {
    super(
      'context_too_large',
      `model ${model} refused the prompt as longer than its context window; set strategy_config.context_limit ` +
        "to the model's window (or lower) so the prompt is fitted before the call",
      { model, status },
    );
    this.name = 'ModelContextTooLargeError';
  }
}

/**
 * What a provider says when the prompt is over the model's window: OpenAI's code, Anthropic's
 * texts (the prompt alone, or with the output room asked for: `max_tokens`), and the
 * OpenAI-compatible servers' "maximum context length".
 */
const CONTEXT_OVERFLOW = /context_length_exceeded|prompt is too long|exceed context limit|maximum context length/i;
/** The statuses whose `Retry-After` says when the provider takes calls again. */
const BUSY_STATUSES: ReadonlySet<number> = new Set([429, 503, 529]);

/**
 * A provider's failed answer as tailgate's error: a prompt over the window is
 * `ModelContextTooLargeError`; anything else `ModelError` with the model, the provider's HTTP
 * status (none when the answer failed inside a stream that had begun: its 200 says nothing) and,
 * when the provider was busy and said when to come back, `retry_after_seconds`.
 */
export function providerFailure(model: string, message: string, apiError: APICallError | undefined): TailgateError {
  const status = apiError?.statusCode !== undefined && apiError.statusCode >= 400 ? apiError.statusCode : undefined;
  if (status === 400 && CONTEXT_OVERFLOW.test(apiError?.responseBody ?? '')) {
    return new ModelContextTooLargeError(model, status);
  }
  const retryAfter =
    status !== undefined && BUSY_STATUSES.has(status) ? retryAfterSeconds(apiError?.responseHeaders) : undefined;
  return new ModelError(message, {
    model,
    ...(status !== undefined ? { status } : {}),
    ...(retryAfter !== undefined ? { retry_after_seconds: retryAfter } : {}),
  });
}

/** Whole seconds from `retry-after-ms` (OpenAI) or `retry-after` (seconds or an HTTP date). */
function retryAfterSeconds(headers: Record<string, string> | undefined): number | undefined {
  const milliseconds = headers?.['retry-after-ms'];
  const value = headers?.['retry-after']?.trim();
  let seconds = Number.NaN;
  if (milliseconds !== undefined && /^\d+(\.\d+)?$/.test(milliseconds)) seconds = Number(milliseconds) / 1000;
  else if (value) seconds = /^\d+$/.test(value) ? Number(value) : (Date.parse(value) - Date.now()) / 1000;
  return Number.isFinite(seconds) ? Math.max(0, Math.ceil(seconds)) : undefined;
}

/** The provider did not answer in time (504). */
export class ModelTimeoutError extends TailgateError {
  constructor(message: string, details?: unknown) {
    super('model_timeout', message, details);
    this.name = 'ModelTimeoutError';
  }
}

/** A `model` id that names no known provider (400), the message starting with its field as every refusal's does. */
export class UnknownModelError extends TailgateError {
  constructor(id: string, known: string[]) {
    const colon = id.indexOf(':');
    const name = colon > 0 && known.includes(id.slice(0, colon)) ? id.slice(colon + 1) : undefined;
    // What to change: the form of a model id, or the model name a known provider lacks.
    const hint =
      name === undefined
        ? 'write echo or <provider>:<model>'
        : name === ''
          ? `"${id}" names no model after its provider`
          : 'a model name has no whitespace and at most 256 characters';
    super('invalid_request', `model: unknown model "${id}"; known providers: ${known.join(', ')}; ${hint}`, {
      field: 'model',
      known,
    });
    this.name = 'UnknownModelError';
  }
}

/**
 * A known provider that cannot be used as configured: a required setting (an API key, a base
 * URL, the Workers AI binding) is missing or a model setting is malformed: 503
 * `not_configured` (`details.field = "model"`, `details.setting`), checked before a turn
 * stores anything, never a crash. Its message starts with its field (`model: `), as the other
 * refusals of a model do (UnknownModelError).
 */
export class ModelConfigurationError extends TailgateError {
  /** The setting the model needs (missing or malformed). */
  readonly setting: string;
  constructor(message: string, details: { model: string; setting: string }) {
    super('not_configured', `model: ${message}`, { field: 'model', ...details });
    this.setting = details.setting;
    this.name = 'ModelConfigurationError';
  }
}

import { LEASE_EXPIRED } from '../errors.ts';
import { clientError } from '../error-codes.ts';

/**
 * An error only the OpenAI-compatible API has (its own code, e.g. model_not_found), answered
 * in OpenAI's shape `{error: {message, type, param, code}}` by functions/routes/openai/errors.ts.
 * `param` names the request field (`input[0].role`), as OpenAI's errors do.
 */
export class OpenAIApiError extends Error {
  readonly status: 400 | 401 | 403 | 404 | 409 | 413 | 429 | 500 | 502 | 503 | 504;
  readonly code: string;
  readonly param: string | null;
  readonly details: unknown;

  constructor(
    status: OpenAIApiError['status'],
    code: string,
    message: string,
    param: string | null = null,
    details?: unknown,
  ) {
    super(message);
    this.name = 'OpenAIApiError';
    this.status = status;
    this.code = code;
    this.param = param;
    this.details = details;
  }
}

/**
 * OpenAI's code for a tailgate error code that names what one of OpenAI's does: a prompt over
 * the model's window is OpenAI's `context_length_exceeded`, whether answered as a 400 or as the
 * `error` of a failed (background) response.
 */
export function openaiErrorCode<Code extends string>(code: Code): Code | 'context_length_exceeded' {
  return code === 'context_too_large' ? 'context_length_exceeded' : code;
}

/**
 * What a client of the OpenAI-compatible API sees of a tailgate error (a failed response's
 * `error`, a 4xx's body): `clientError`'s code and message under OpenAI's code
 * (`openaiErrorCode`). A turn closed as its lease ran out keeps its code, with a message that
 * gives no native route to take it again: how a facade client goes on after a server that died
 * mid-response is docs/OPENAI.md's ("A server killed mid-response").
 */
export function openaiFailure<Code extends string>(error: {
  code: Code;
  message: string;
  details?: unknown;
}): { code: Code | 'context_length_exceeded'; message: string; details?: unknown } {
  const told = clientError(error);
  const message =
    told.code === LEASE_EXPIRED
      ? 'the response did not complete before its lease expired (the process running it stopped, or no runner ' +
        'started it in time); its output was not stored'
      : told.message;
  return { ...told, code: openaiErrorCode(told.code), message };
}

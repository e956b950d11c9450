import type { Context, ErrorHandler } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { bracketedField } from '../../../lib/field-path.ts';
import { OpenAIApiError, openaiErrorCode, openaiFailure } from '../../../lib/openai/errors.ts';
import { errorBody, errorHeaders, requestNow } from '../../error-handler.ts';
import { settleBusy } from '../../../lib/session/log/busy-lease.ts';

/**
 * Errors of the OpenAI-compatible API in OpenAI's shape, `{error: {message, type, param,
 * code}}`, with the statuses the rest of the API uses (functions/error-handler.ts), so the
 * official clients raise their typed errors (BadRequestError, NotFoundError, ...).
 */

export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null; details?: unknown };
}

/**
 * The paths answered in OpenAI's error shape: everything under /v1/ but tailgate's own
 * families (sessions, tokens), so a client of any OpenAI API (`/v1/models`, `/v1/embeddings`)
 * gets an error its SDK reads.
 */
export const OPENAI_PATH = /^\/v1\/(?!(sessions|tokens)(\/|$))/;

function errorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  // A spent budget, as OpenAI names an exhausted quota.
  if (status === 402) return 'insufficient_quota';
  if (status === 429) return 'rate_limit_error';
  return status >= 500 ? 'server_error' : 'invalid_request_error';
}

/** `input.0.role` -> `input[0].role` (OpenAI's way of naming a field). */
function paramOf(details: unknown): string | null {
  const field = (details as { field?: unknown } | undefined)?.field;
  if (typeof field !== 'string' || field === '' || field === 'body') return null;
  return (bracketedField(details) ?? field).replace(/^body\./, '');
}

/**
 * `message`, which names its field (clientError wrote it in brackets), starting with `param`
 * itself: `body.input[0].role: ...` -> `input[0].role: ...`; an unknown field, as one tailgate
 * does not support (`on_busy`: as the native turn route's busy policy, which these routes lack).
 */
function messageOf(message: string, param: string | null): string {
  if (!param) return message;
  // The native turn route's busy policy, which these routes do not have.
  if (param === 'on_busy' && / unknown field$/.test(message))
    return (
      'on_busy: these routes have no busy policy (a response to a conversation whose turn runs is 409 ' +
      'turn_in_progress; a chat completion is answered); queue an input with POST /v1/sessions/{id}/turns and on_busy'
    );
  if (/ unknown field$/.test(message)) return `${param}: this field is not supported by tailgate`;
  const location = ['body.', 'query.', 'param.'].find((prefix) => message.startsWith(`${prefix}${param}: `));
  return location === undefined ? message : message.slice(location.length);
}

/** The status and OpenAI-shaped body of any thrown value (tailgate's codes are kept). */
export function openaiErrorBody(
  error: unknown,
  log: (message: string, error: unknown) => void,
): { status: ContentfulStatusCode; body: OpenAIErrorBody } {
  if (error instanceof OpenAIApiError) {
    return {
      status: error.status,
      body: {
        error: {
          message: error.message,
          type: errorType(error.status),
          param: error.param,
          code: error.code,
          ...(error.details !== undefined ? { details: error.details } : {}),
        },
      },
    };
  }
  const { status, body } = errorBody(error, log);
  const { code, message, details } = openaiFailure(body.error);
  // OpenAI's answer to a prompt that does not fit the model's window.
  if (openaiErrorCode(code) === 'context_length_exceeded') {
    return {
      status: 400,
      body: {
        error: { message, type: 'invalid_request_error', param: 'input', code: openaiErrorCode(code), details },
      },
    };
  }
  const param = paramOf(details);
  return {
    status,
    body: {
      error: {
        message: messageOf(message, param),
        type: errorType(status),
        param,
        code,
        // What clientError kept: a failed model call's model and provider status, a missing setting's name.
        ...(details !== undefined ? { details } : {}),
      },
    },
  };
}

/**
 * The app's error handler, answering in OpenAI's shape on the OpenAI-compatible paths and
 * with `fallback` (tailgate's shape) everywhere else.
 */
export function withOpenAIErrors(fallback: ErrorHandler, log: (message: string, error: unknown) => void): ErrorHandler {
  return async (error, c: Context) => {
    if (!OPENAI_PATH.test(c.req.path)) return fallback(error, c);
    await settleBusy(error);
    const { status, body } = openaiErrorBody(error, log);
    return c.json(body, status, errorHeaders(body.error, error, requestNow(c)));
  };
}

/** 404 for an unknown path under the OpenAI-compatible API, in its shape. */
export function openaiNotFound(c: Context): Response {
  return c.json(
    {
      error: {
        message: `no route for ${c.req.method} ${c.req.path}`,
        type: 'invalid_request_error',
        param: null,
        code: 'not_found',
      },
    },
    404,
  );
}

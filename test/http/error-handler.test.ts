import { HTTPException } from 'hono/http-exception';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { errorBody, STATUS_BY_CODE, validationError } from '../../functions/error-handler.ts';
import { constantTimeEqual } from '../../functions/auth.ts';
import { CorruptObjectError, TailgateError } from '../../lib/errors.ts';

describe('errorBody', () => {
  it.each(Object.entries(STATUS_BY_CODE))('maps %s to %i with the error shape', (code, status) => {
    const result = errorBody(new TailgateError(code, 'why', { a: 1 }), () => {});
    expect(result.status).toBe(status);
    expect(result.body).toEqual({ error: { code, message: 'why', details: { a: 1 } } });
  });

  it.each([
    ['invalid_request', 400],
    ['unknown_strategy', 400],
    ['unauthorized', 401],
    ['not_found', 404],
    ['session_exists', 409],
    ['name_taken', 409],
    ['turn_in_progress', 409],
    ['aborted', 409],
    ['payload_too_large', 413],
    ['model_error', 502],
    ['model_timeout', 504],
    ['not_configured', 503],
  ])('API.md: %s is %i', (code, status) => {
    expect(STATUS_BY_CODE[code]).toBe(status);
  });

  it('hides unknown errors behind a generic 500 and logs them', () => {
    const logged: unknown[] = [];
    const result = errorBody(new Error('secret internals'), (_message, error) => logged.push(error));
    expect(result).toEqual({ status: 500, body: { error: { code: 'internal_error', message: 'internal error' } } });
    expect(logged).toHaveLength(1);
  });

  it('logs a corrupt object (500) and keeps its key in the details', () => {
    const logged: unknown[] = [];
    const result = errorBody(new CorruptObjectError('sessions/a/session.json', 'bad'), (_message, error) => logged.push(error));
    expect(result.status).toBe(500);
    expect(result.body.error.details).toEqual({ key: 'sessions/a/session.json' });
    expect(logged).toHaveLength(1);
  });

  it('maps hono client errors (malformed JSON) to 400 invalid_request', () => {
    const result = errorBody(new HTTPException(400, { message: 'Malformed JSON in request body' }), () => {});
    expect(result.status).toBe(400);
    expect(result.body.error.code).toBe('invalid_request');
  });
});

describe('validationError', () => {
  const schema = z.object({ name: z.string(), nested: z.object({ count: z.number() }).strict() }).strict();

  it.each([
    [{ name: 1, nested: { count: 1 } }, 'body.name'],
    [{ name: 'a', nested: { count: 'x' } }, 'body.nested.count'],
    [{ name: 'a', nested: { count: 1 }, extra: true }, 'body.extra: unknown field'],
    [{ name: 'a', nested: { count: 1, deeper: 1 } }, 'body.nested.deeper: unknown field'],
  ])('names the field of %j', (value, expected) => {
    const parsed = schema.safeParse(value);
    expect(parsed.success).toBe(false);
    if (!parsed.success) expect(validationError(parsed.error, 'json').message).toContain(expected);
  });
});

describe('constantTimeEqual', () => {
  it.each([
    ['a', 'a', true],
    ['a', 'b', false],
    ['token', 'token ', false],
    ['', '', true],
    ['long-token-value', 'long-token-valuE', false],
  ])('%j vs %j is %s', (left, right, expected) => {
    expect(constantTimeEqual(left, right)).toBe(expected);
  });
});

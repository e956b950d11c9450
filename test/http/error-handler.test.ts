import { HTTPException } from 'hono/http-exception';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { errorBody, STATUS_BY_CODE, validationError } from '../../functions/error-handler.ts';
import { constantTimeEqual } from '../../functions/auth.ts';
import { CorruptObjectError, StorageError, TailgateError, ReplayedError } from '../../lib/errors.ts';
import { ERROR_CODES } from '../../lib/error-codes.ts';
import { eventMessage } from '../../functions/turn-event-stream.ts';
import { createApp } from '../../functions/app.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { responseCreateSchema } from '../../lib/openai/schemas.ts';
import { turnRequestSchema } from '../../lib/turn/wire.ts';

describe('errorBody', () => {
  const generic = new Set(['corrupt_object', 'storage_error', 'internal_error', 'model_error']);
  it.each(ERROR_CODES.filter((code) => !generic.has(code)).map((code) => [code, STATUS_BY_CODE[code]] as const))(
    'maps %s to %i with the error shape',
    (code, status) => {
      const result = errorBody(new TailgateError(code, 'why', { a: 1 }), () => {});
      expect(result.status).toBe(status);
      expect(result.body).toEqual({ error: { code, message: 'why', details: { a: 1 } } });
    },
  );

  it('has a status for every code, and a 5xx only for server-side failures', () => {
    expect(Object.keys(STATUS_BY_CODE).sort()).toEqual([...ERROR_CODES].sort());
    const fiveHundreds = ERROR_CODES.filter((code) => STATUS_BY_CODE[code] === 500);
    expect(fiveHundreds.sort()).toEqual(['corrupt_object', 'internal_error']);
  });

  it.each([
    ['invalid_request', 400],
    ['unknown_strategy', 400],
    ['unauthorized', 401],
    ['not_found', 404],
    ['session_exists', 409],
    ['name_taken', 409],
    ['inbox_full', 409],
    ['turn_in_progress', 409],
    ['aborted', 409],
    ['forbidden', 403],
    ['lease_expired', 409],
    ['turn_cancelled', 409],
    ['turn_not_open', 409],
    ['idempotency_key_reused', 422],
    ['payload_too_large', 413],
    ['context_too_large', 413],
    ['model_error', 502],
    ['model_timeout', 504],
    ['not_configured', 503],
    ['storage_error', 503],
    ['storage_unsupported', 503],
    ['corrupt_object', 500],
    ['internal_error', 500],
  ] as const)('the API: %s is %i', (code, status) => {
    expect(STATUS_BY_CODE[code]).toBe(status);
  });

  it('hides unknown errors behind a generic 500 and logs them', () => {
    const logged: unknown[] = [];
    const result = errorBody(new Error('secret internals'), (_message, error) => logged.push(error));
    expect(result).toEqual({ status: 500, body: { error: { code: 'internal_error', message: 'internal error' } } });
    expect(logged).toHaveLength(1);
  });

  it('logs a corrupt object (500) with its key and reason, and tells the client neither', () => {
    const logged: unknown[] = [];
    const result = errorBody(new CorruptObjectError('sessions/a/session.json', 'bad footer'), (_message, error) =>
      logged.push(error),
    );
    expect(result).toEqual({
      status: 500,
      body: { error: { code: 'corrupt_object', message: 'a stored object is invalid' } },
    });
    expect(logged).toEqual([expect.objectContaining({ key: 'sessions/a/session.json', reason: 'bad footer' })]);
  });

  it('answers a storage failure with a generic 503 and logs the backend text', () => {
    const logged: unknown[] = [];
    const failure = new StorageError('S3 get sessions/a/turn/1 failed: socket hang up', {
      operation: 'get',
      key: 'sessions/a/turn/1',
    });
    const result = errorBody(failure, (_message, error) => logged.push(error));
    expect(result).toEqual({ status: 503, body: { error: { code: 'storage_error', message: 'storage failed' } } });
    expect(JSON.stringify(result.body)).not.toContain('sessions/');
    expect(logged).toEqual([failure]);
  });

  it.each([
    ['turn_closed', 'turn_not_open', 409],
    ['duplicate_request', 'turn_in_progress', 409],
    ['lease_expired', 'lease_expired', 409],
    ['model_timeout', 'model_timeout', 504],
    ['from_the_future', 'internal_error', 500],
  ] as const)('maps a stored %s replayed from older data to %s (%i)', (stored, code, status) => {
    const result = errorBody(new ReplayedError({ code: stored, message: 'the original turn failed' }), () => {});
    expect(result.status).toBe(status);
    expect(result.body.error.code).toBe(code);
  });

  it('logs no replayed model failure (its call was logged when it failed), but a replayed unknown code', () => {
    const logged: string[] = [];
    const log = (message: string) => logged.push(message);
    for (const code of ['model_timeout', 'model_error'])
      expect(errorBody(new ReplayedError({ code, message: 'the original turn failed' }), log).status).toBeGreaterThan(
        500,
      );
    expect(logged).toEqual([]);
    errorBody(new ReplayedError({ code: 'from_the_future', message: 'the original turn failed' }), log);
    errorBody(new TailgateError('model_timeout', 'model m did not answer within 5000 ms'), log);
    expect(logged).toEqual(['tailgate: internal_error', 'tailgate: model_timeout']);
  });

  it('maps hono client errors (malformed JSON) to 400 invalid_request', () => {
    const result = errorBody(new HTTPException(400, { message: 'Malformed JSON in request body' }), () => {});
    expect(result.status).toBe(400);
    expect(result.body.error.code).toBe('invalid_request');
  });
});

describe('server-side failures through the app', () => {
  const logged: unknown[] = [];
  const store = new FaultyStore(new MemoryStore());
  const app = createApp({
    store: () => store,
    readEnvironment: () => ({ API_TOKEN: 'token' }),
    log: (_message, details) => logged.push(details),
  });
  const get = (path: string) => app.request(path, { headers: { authorization: 'Bearer token' } });

  it('a corrupt stored object is a 500 that names no key; the key and reason go to the log', async () => {
    await store.put(sessionConfigKey('', 'broken'), '{not json');
    const response = await get('/v1/sessions/broken');
    expect(response.status).toBe(500);
    expect(await response.json()).toEqual({ error: { code: 'corrupt_object', message: 'a stored object is invalid' } });
    expect(logged.at(-1)).toMatchObject({
      key: sessionConfigKey('', 'broken'),
      reason: expect.stringContaining('not UTF-8 JSON'),
    });
  });

  it('a storage failure is a 503 saying only "storage failed"; the backend text goes to the log', async () => {
    store.failWhen(({ key }) => key.includes('/flaky/'), {
      error: ({ key }) => new StorageError(`S3 get ${key} failed: connect ECONNREFUSED 10.0.0.7:9000`, { key }),
    });
    const response = await get('/v1/sessions/flaky');
    expect(response.status).toBe(503);
    expect(await response.json()).toEqual({ error: { code: 'storage_error', message: 'storage failed' } });
    expect(String((logged.at(-1) as Error).message)).toContain('ECONNREFUSED');
  });
});

describe('eventMessage', () => {
  it('sends an error event with what a client may see of the error, not keys or backend text', () => {
    const error = {
      code: 'storage_error',
      message: 'R2 put sessions/a/turn/1.done failed: internal',
      details: { key: 'sessions/a/turn/1.done' },
    };
    const message = eventMessage({ event: 'error', data: { error }, cause: new Error('x') });
    expect(message).toEqual({ event: 'error', data: '{"error":{"code":"storage_error","message":"storage failed"}}' });
  });

  it("sends a model error with a generic message and its details, not the provider's text", () => {
    const error = {
      code: 'model_error',
      message: 'model openai:x failed: Incorrect API key provided: sk-****abcd',
      details: { model: 'openai:x', status: 401 },
    };
    const { data } = eventMessage({ event: 'error', data: { error }, cause: new Error('x') });
    expect(data).toBe(
      JSON.stringify({
        error: { code: 'model_error', message: 'the model call failed', details: { model: 'openai:x', status: 401 } },
      }),
    );
  });

  it('keeps a client error as it is', () => {
    const error = { code: 'aborted', message: 'the turn was aborted: budget', details: { reason: 'budget' } };
    expect(eventMessage({ event: 'error', data: { error }, cause: new Error('x') }).data).toBe(
      JSON.stringify({ error }),
    );
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

  it.each([
    [{}, 'body.input: required'],
    [{ input: 5 }, 'body.input: Invalid input: expected string or array, received number'],
  ])('says what a union takes when no branch got past its root: %j', (value, expected) => {
    const union = z.object({ input: z.union([z.string(), z.array(z.string())]) }).strict();
    const parsed = union.safeParse(value);
    expect(parsed.success).toBe(false);
    if (!parsed.success) expect(validationError(parsed.error, 'json').message).toBe(expected);
  });

  it("answers the branch that took the value's type when it refused the value itself: a list over its limit", () => {
    const union = z.object({ input: z.union([z.string().min(1), z.array(z.string()).min(1).max(2)]) }).strict();
    const parsed = union.safeParse({ input: ['a', 'b', 'c'] });
    expect(parsed.success).toBe(false);
    if (parsed.success) return;
    const error = validationError(parsed.error, 'json');
    expect(error.message).toBe('body.input: Too big: expected array to have <=2 items');
    expect(error.details).toMatchObject({ field: 'input', issues: [{ code: 'too_big', path: ['input'] }] });
    const input = Array.from({ length: 10_001 }, () => ({ type: 'message', role: 'user', content: 'x' }));
    const response = responseCreateSchema.safeParse({ model: 'echo', input });
    expect(response.success).toBe(false);
    if (!response.success)
      expect(validationError(response.error, 'json').message).toBe(
        'body.input: Too big: expected array to have <=10000 items',
      );
  });

  it('names the values when every branch refused the same field, and keeps no branch beside the answer', () => {
    const item = (type: string) => z.object({ type: z.literal(type), id: z.string() }).strict();
    const union = z.object({ items: z.array(z.union([item('a'), item('b')])) }).strict();
    const parsed = union.safeParse({ items: [{ type: 'c', id: 'x' }] });
    expect(parsed.success).toBe(false);
    if (parsed.success) return;
    const error = validationError(parsed.error, 'json');
    expect(error.message).toBe('body.items.0.type: Invalid input: expected one of "a", "b"');
    expect(error.details).toEqual({
      field: 'items.0.type',
      issues: [{ code: 'invalid_value', values: ['a', 'b'], path: ['items', 0, 'type'], message: expect.any(String) }],
    });
  });

  it("names a field the branch's object does not take before a field missing beside it", () => {
    const part = z.object({ type: z.literal('image'), url: z.string() }).strict();
    const union = z.object({ content: z.union([z.string(), z.array(part)]) }).strict();
    const parsed = union.safeParse({ content: [{ type: 'image', file_id: 'f' }] });
    expect(parsed.success).toBe(false);
    if (!parsed.success)
      expect(validationError(parsed.error, 'json').message).toBe('body.content.0.file_id: unknown field');
  });
});

describe('validationError of a missing field', () => {
  // A field the request lacks reads `required`, not the type zod expected of what it did not get.
  it.each([
    [{ name: 'a' }, 'body.nested: required', ['nested']],
    [{ name: 'a', nested: {} }, 'body.nested.count: required', ['nested', 'count']],
    [{ nested: { count: 1 } }, 'body.name: required', ['name']],
  ])('%j', (value, expected, path) => {
    const schema = z.object({ name: z.string(), nested: z.object({ count: z.number() }).strict() }).strict();
    const parsed = schema.safeParse(value);
    expect(parsed.success).toBe(false);
    if (parsed.success) return;
    const error = validationError(parsed.error, 'json');
    expect(error.message).toBe(expected);
    expect(error.details).toMatchObject({ issues: [{ path, message: 'required' }] });
  });

  it('names a turn without input as required, and a query parameter the same way', () => {
    const parsed = turnRequestSchema.safeParse({});
    expect(parsed.success).toBe(false);
    if (!parsed.success) expect(validationError(parsed.error, 'json').message).toBe('body.input: required');
    const query = z.object({ limit: z.string() }).safeParse({});
    expect(query.success).toBe(false);
    if (!query.success) expect(validationError(query.error, 'query').message).toBe('query.limit: required');
  });

  it('keeps the type a present field of the wrong type was expected to have', () => {
    const parsed = turnRequestSchema.safeParse({ input: 5 });
    expect(parsed.success).toBe(false);
    if (!parsed.success) expect(validationError(parsed.error, 'json').message).toContain('received number');
  });
});

describe('validationError of an input item', () => {
  // The kind an item's type (or, without one, its role) names is the one answered, not another kind's fields.
  it.each([
    [
      [
        { role: 'user', content: 'x' },
        { type: 'function_call_output', call_id: 'c1' },
      ],
      'body.input.1.output: required',
    ],
    [[{ type: 'function_call', call_id: 'c1', name: 'f' }], 'body.input.0.arguments: required'],
    [[{ type: 'function_call_output', call_id: 'c1', output: 'x', extra: 1 }], 'body.input.0.extra: unknown field'],
    [[{ role: 'bot', content: 'hi' }], 'body.input.0.role: Invalid option'],
    [[{ type: 'message', role: 'user', content: 'x', status: 'done' }], 'body.input.0.status: Invalid option'],
  ])('names the field the item of %j lacks', (input, expected) => {
    const parsed = responseCreateSchema.safeParse({ model: 'echo', input });
    expect(parsed.success).toBe(false);
    if (!parsed.success) expect(validationError(parsed.error, 'json').message).toContain(expected);
  });
});

describe('validationError of a native turn item whose type names no kind', () => {
  // The items of POST .../turns are a discriminated union on `type`: an item without one (an
  // OpenAI client's `{role, content}`) or with another is answered with the types the route
  // takes, in the words docs/API.md gives, and no branch's bookkeeping beside the issue.
  it.each([[[{ role: 'user', content: 'x' }]], [[{ type: 'reasoning', summary: [] }]]])('%j', (input) => {
    const parsed = turnRequestSchema.safeParse({ input });
    expect(parsed.success).toBe(false);
    if (parsed.success) return;
    const error = validationError(parsed.error, 'json');
    expect(error.message).toBe(
      'body.input.0.type: Invalid input: expected one of "message", "function_call", "function_call_output"',
    );
    expect(error.details).toEqual({
      field: 'input.0.type',
      issues: [
        {
          code: 'invalid_value',
          values: ['message', 'function_call', 'function_call_output'],
          path: ['input', 0, 'type'],
          message: 'Invalid input: expected one of "message", "function_call", "function_call_output"',
        },
      ],
    });
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

import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { type FakeReply, fakeProviderForFile } from '../support/fake-providers/fake-provider-server.ts';
import { createClient, TOKEN } from './http-suite.ts';

// What a client is answered when the provider refuses a turn's call: a prompt over the model's
// window is 413 `context_too_large` (OpenAI's `context_length_exceeded` on the facade), and a
// provider still busy after the retries says when to come back (`Retry-After`).

const fake = fakeProviderForFile();

const store = new MemoryStore();
const app = createApp({ store: () => store, readEnvironment: (c) => c.env ?? {}, log: () => undefined });
const environment = () => ({
  API_TOKEN: TOKEN,
  OPENAI_COMPATIBLE_BASE_URL: fake.provider.baseURL,
  ANTHROPIC_API_KEY: 'test-key',
  ANTHROPIC_BASE_URL: fake.provider.baseURL,
  MODEL_MAX_RETRIES: '0',
});
const api = createClient({
  fetch: async (path, init) => app.request(path, init, environment()),
  fetchWithEnv: async (overrides, path, init) => app.request(path, init, { ...environment(), ...overrides }),
  store,
  keyPrefix: '',
  logged: [],
});

/** The providers' own answers to a prompt over the window (from their docs). */
const overflow = {
  'openai-compatible:fake-model': {
    error: {
      message:
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens.",
      type: 'invalid_request_error',
      param: 'messages',
      code: 'context_length_exceeded',
    },
  },
  'anthropic:claude-sonnet-4-5': {
    type: 'error',
    error: { type: 'invalid_request_error', message: 'prompt is too long: 208310 tokens > 200000 maximum' },
  },
  // The prompt fits, but not with the output room the call asks for (max_tokens).
  'anthropic:claude-opus-4-1': {
    type: 'error',
    error: {
      type: 'invalid_request_error',
      message:
        'input length and `max_tokens` exceed context limit: 188059 + 20000 > 200000, ' +
        'decrease input length or `max_tokens` and try again',
    },
  },
};

describe('a provider refusing the prompt as over its window', () => {
  it.each(Object.entries(overflow))('%s: 413 context_too_large naming the model', async (model, body) => {
    fake.next = { status: 400, json: body };
    const id = await api.session({ model });
    const turn = await api.post(`/v1/sessions/${id}/turns`, { input: 'Hello' });
    expect(turn.status, JSON.stringify(turn.body)).toBe(413);
    expect(turn.body.error).toMatchObject({ code: 'context_too_large', details: { model, status: 400 } });
    expect(turn.body.error.message).toContain('context_limit');
  });

  it('answers the facade as OpenAI does (400 context_length_exceeded)', async () => {
    fake.next = { status: 400, json: overflow['openai-compatible:fake-model'] };
    const response = await api.post('/v1/responses', { model: 'openai-compatible:fake-model', input: 'Hello' });
    expect(response.status, JSON.stringify(response.body)).toBe(400);
    expect(response.body.error).toMatchObject({ code: 'context_length_exceeded', type: 'invalid_request_error' });
  });

  it.each([
    'Invalid value for temperature',
    // Names the window, but refuses a parameter, not the prompt.
    "Invalid 'max_output_tokens': integer above maximum value. Expected a value <= 128000 (the model's " +
      'context window), but got 300000 instead.',
  ])('another 400 stays a 502 model_error: %s', async (message) => {
    fake.next = { status: 400, json: { error: { message, type: 'invalid_request_error' } } };
    const id = await api.session({ model: 'openai-compatible:fake-model' });
    const turn = await api.post(`/v1/sessions/${id}/turns`, { input: 'Hello' });
    expect(turn.status).toBe(502);
    expect(turn.body.error).toMatchObject({ code: 'model_error', details: { status: 400 } });
  });
});

describe('a provider still busy after the retries', () => {
  it.each([
    ['retry-after in seconds', { 'retry-after': '7' }, 429, 7],
    ['retry-after-ms', { 'retry-after-ms': '2500' }, 429, 3],
    ['an overloaded provider', { 'retry-after': '12' }, 529, 12],
  ])('%s: 502 model_error with Retry-After', async (_, headers, status, seconds) => {
    fake.next = { status, headers, json: { error: { message: 'Rate limit reached', type: 'rate_limit_error' } } };
    const id = await api.session({ model: 'openai-compatible:fake-model' });
    const turn = await api.post(`/v1/sessions/${id}/turns`, { input: 'Hello' });
    expect(turn.status).toBe(502);
    expect(turn.headers.get('retry-after')).toBe(String(seconds));
    expect(turn.body.error).toMatchObject({ code: 'model_error', details: { status, retry_after_seconds: seconds } });
    const response = await api.post('/v1/responses', { model: 'openai-compatible:fake-model', input: 'Hello' });
    expect(response.status).toBe(502);
    expect(response.headers.get('retry-after')).toBe(String(seconds));
  });

  it('a provider error without a retry-after says none', async () => {
    fake.next = { status: 500, json: { error: { message: 'boom', type: 'server_error' } } };
    const id = await api.session({ model: 'openai-compatible:fake-model' });
    const turn = await api.post(`/v1/sessions/${id}/turns`, { input: 'Hello' });
    expect(turn.status).toBe(502);
    expect(turn.headers.get('retry-after')).toBeNull();
    expect(turn.body.error.details).toEqual({ model: 'openai-compatible:fake-model', status: 500 });
  });
});

describe('a failed turn replayed under its Idempotency-Key', () => {
  // The replay answers the stored failure again, whenever it comes: the provider's wait is long
  // past, and a retry under the same key can only get the same answer. (A failed response of
  // the OpenAI-compatible routes is taken out of its conversation: its retry calls the model again.)
  const busy: FakeReply = {
    status: 429,
    headers: { 'retry-after': '7' },
    json: { error: { message: 'Rate limit reached', type: 'rate_limit_error' } },
  };

  it('says no Retry-After and x-should-retry: false', async () => {
    fake.next = busy;
    const id = await api.session({ model: 'openai-compatible:fake-model' });
    const headers = { 'idempotency-key': `replay-${id}` };
    const first = await api.post(`/v1/sessions/${id}/turns`, { input: 'Hello' }, headers);
    expect(first.status).toBe(502);
    expect(first.headers.get('retry-after')).toBe('7');
    const calls = fake.provider.requests.length;
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: 'Hello' }, headers);
    expect(fake.provider.requests.length).toBe(calls);
    expect(again.status).toBe(502);
    expect(again.body.error).toEqual(first.body.error);
    expect(again.headers.get('retry-after')).toBeNull();
    expect(again.headers.get('x-should-retry')).toBe('false');
  });
});

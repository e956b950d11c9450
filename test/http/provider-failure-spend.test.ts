import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import {
  type FakeProvider,
  type FakeReply,
  fixture,
  startFakeProvider,
} from '../support/fake-providers/fake-provider-server.ts';
import { freePort } from '../support/server-process.ts';
import { createClient, SIGNING_KEY, TOKEN } from './http-suite.ts';

// A turn whose model call failed is charged an estimate (its prompt's tokens, the output it
// streamed) only when the provider may have run the model: the request was in flight when the
// call timed out, or the provider accepted it (a 2xx) and the answer broke off. A request the
// provider refused with an error status, or that never reached it, bills nothing, also when the
// call then timed out waiting to retry it. Against a fake provider speaking Chat Completions.

/** What the fake provider answers next (each test sets it). */
let next: FakeReply = { status: 500, json: {} };
let provider: FakeProvider;
beforeAll(async () => {
  provider = await startFakeProvider(() => next);
});
afterAll(async () => {
  await provider?.close();
});

/** The first events of a Chat Completions stream: `count` of them, then the connection ends. */
const firstEvents = (count: number) =>
  `${fixture('openai-chat-text.sse').split('\n\n').slice(0, count).join('\n\n')}\n\n`;

/**
 * The deadline of a call whose request is refused and retried: under the SDK's first back-off
 * (2 s, or the `retry-after-ms` the refusals below send), so the call times out before its retry,
 * and long enough that the refusal is seen before it on a loaded machine.
 */
const BEFORE_RETRY_MS = 1900;

/** A turn on the fake provider (or `baseURL`), streamed or not, with one retry and a deadline of `deadlineMs`. */
async function failedTurn(stream: boolean, deadlineMs: number, baseURL = provider.baseURL) {
  const { api, harness, auth, drain } = await world(baseURL, deadlineMs);
  const id = await api.session();
  const response = await harness.fetch(`/v1/sessions/${id}/turns`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ input: 'Hello there', stream }),
  });
  const answer = await response.text();
  await drain();
  const [receipt] = (await api.get(`/v1/sessions/${id}/turns`)).body.turns;
  expect(receipt.status).toBe('failed');
  return {
    status: response.status,
    answer,
    receipt,
    spent: (await api.get('/v1/tokens/current', auth)).body.usage,
    session: (await api.get(`/v1/sessions/${id}`)).body.usage,
  };
}

/** The app on `baseURL`, with a token whose spend is read, and the work it does after its answers. */
async function world(baseURL: string, deadlineMs: number) {
  const tasks: Promise<unknown>[] = [];
  const harness = appHarness(
    new MemoryStore(),
    {
      API_TOKEN: TOKEN,
      TOKEN_SIGNING_KEY: SIGNING_KEY,
      OPENAI_COMPATIBLE_BASE_URL: baseURL,
      DEFAULT_MODEL: 'openai-compatible:fake-model',
      MODEL_MAX_RETRIES: '1',
      MODEL_TIMEOUT_MS: String(deadlineMs),
    },
    { afterResponse: (task: Promise<unknown>) => void tasks.push(task) },
  );
  const api = createClient(harness);
  const minted = await api.post('/v1/tokens', {
    scopes: ['session:turn', 'session:read'],
    budget: { max_total_tokens: 1_000_000 },
  });
  expect(minted.status, JSON.stringify(minted.body)).toBe(201);
  const auth = { authorization: `Bearer ${minted.body.token as string}` };
  const drain = async () => {
    while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
  };
  return { api, harness, auth, drain };
}

type Turn = Awaited<ReturnType<typeof failedTurn>>;

function chargedNothing({ receipt, spent, session }: Turn) {
  expect(spent).toMatchObject({ turns: 0, total_tokens: 0 });
  expect(session).toMatchObject({ turns: 0, total_tokens: 0 });
  expect(receipt.usage).toBeNull();
  expect(receipt.usage_estimated).toBeUndefined();
}

function chargedEstimate({ receipt, spent, session }: Turn, output: 'none' | 'some') {
  expect(receipt.usage_estimated).toBe(true);
  expect(receipt.usage.input_tokens).toBeGreaterThan(0);
  if (output === 'none') expect(receipt.usage.output_tokens).toBe(0);
  else expect(receipt.usage.output_tokens).toBeGreaterThan(0);
  const { input_tokens, output_tokens } = receipt.usage;
  expect(spent).toMatchObject({ turns: 0, input_tokens, output_tokens });
  expect(session).toMatchObject({ turns: 0, input_tokens, output_tokens });
}

/** What a refusal says of its retry: not before the call's deadline. */
const later = { 'retry-after-ms': '30000' };

describe.each([false, true])('a turn (stream: %s) whose call never reached the model charges nothing', (stream) => {
  it('a refused connection, timed out before its retry', async () => {
    const turn = await failedTurn(stream, BEFORE_RETRY_MS, `http://127.0.0.1:${await freePort()}/v1`);
    if (!stream) expect(turn.status, turn.answer).toBe(504);
    expect(turn.answer).toContain('model_timeout');
    chargedNothing(turn);
  });

  it('a 429, timed out before its retry', async () => {
    next = { status: 429, headers: later, json: { error: { message: 'Rate limit reached', type: 'requests' } } };
    const turn = await failedTurn(stream, BEFORE_RETRY_MS);
    expect(turn.answer).toContain('model_timeout');
    chargedNothing(turn);
  });

  it('a 401', async () => {
    next = { status: 401, json: { error: { message: 'Incorrect API key', type: 'invalid_request_error' } } };
    const turn = await failedTurn(stream, BEFORE_RETRY_MS);
    expect(turn.answer).toContain('model_error');
    chargedNothing(turn);
  });

  it('a 500, timed out before its retry', async () => {
    next = { status: 500, headers: later, json: { error: { message: 'The server had an error', type: 'server' } } };
    const turn = await failedTurn(stream, BEFORE_RETRY_MS);
    chargedNothing(turn);
  });
});

describe('a turn whose call the provider may have run charges its estimate', () => {
  it.each([false, true])('no answer by the deadline (stream: %s)', async (stream) => {
    next = { hang: true };
    const turn = await failedTurn(stream, 500);
    expect(turn.answer).toContain('model_timeout');
    chargedEstimate(turn, 'none');
  });

  it('a stream accepted, cut before any output', async () => {
    next = { sse: firstEvents(1) };
    const turn = await failedTurn(true, 500);
    expect(turn.answer).toContain('model_error');
    chargedEstimate(turn, 'none');
  });

  it('a stream cut after output', async () => {
    next = { sse: firstEvents(2) };
    const turn = await failedTurn(true, 500);
    expect(turn.answer).toContain('model_error');
    chargedEstimate(turn, 'some');
  });
});

// A call that stores nothing (`store: false`) is charged to its token by the same rule.
describe('a store: false response whose call failed', () => {
  async function spentBy(reply: FakeReply | 'refused') {
    if (reply !== 'refused') next = reply;
    const baseURL = reply === 'refused' ? `http://127.0.0.1:${await freePort()}/v1` : provider.baseURL;
    const { api, auth, drain } = await world(baseURL, reply === 'refused' ? BEFORE_RETRY_MS : 500);
    const body = { model: 'openai-compatible:fake-model', input: 'Hello there', store: false };
    const failed = await api.post('/v1/responses', body, auth);
    expect(failed.status, JSON.stringify(failed.body)).toBe(504);
    await drain();
    return (await api.get('/v1/tokens/current', auth)).body.usage;
  }

  it('a refused connection, timed out before its retry: nothing', async () => {
    expect(await spentBy('refused')).toMatchObject({ turns: 0, total_tokens: 0 });
  });

  it('no answer by the deadline: its estimate', async () => {
    const usage = await spentBy({ hang: true });
    expect(usage).toMatchObject({ turns: 0, output_tokens: 0 });
    expect(usage.input_tokens).toBeGreaterThan(0);
  });
});

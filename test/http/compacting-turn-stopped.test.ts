import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import {
  type FakeProvider,
  type FakeReply,
  startFakeProvider,
} from '../support/fake-providers/fake-provider-server.ts';
import { createClient, SIGNING_KEY, TOKEN } from './http-suite.ts';

// A compacting turn stopped by someone else while its summary call is made (its request in flight,
// or refused and waiting to retry) is answered as docs/API.md says of a stopped turn, whatever its
// summary call failed with: cancelled, 409 `turn_cancelled` and a receipt `cancelled` with error
// `turn_cancelled` (its `compaction_usage` the summary's estimate only when the provider may have
// run it); its session deleted, 404 `not_found`. Against a fake provider speaking Chat Completions.

let next: FakeReply = { status: 500, json: {} };
let provider: FakeProvider;
beforeAll(async () => {
  provider = await startFakeProvider(() => next);
});
afterAll(async () => {
  await provider?.close();
});

const inFlight: FakeReply = { hang: true };
const waitingToRetry: FakeReply = {
  status: 429,
  headers: { 'retry-after-ms': '30000' },
  json: { error: { message: 'Slow down' } },
};

// A window whose trigger and kept share are a few tokens: the turn summarizes all but its input.
const compacting = {
  input: 'Hello there',
  strategies: ['compact'],
  strategy_config: { context_limit: 100_000, compact_trigger_ratio: 0.0001, compact_keep_ratio: 0.0001 },
};

/** A session of three messages (appended: no model call) and a compacting turn of it whose summary call was made. */
async function summarizing(reply: FakeReply, stream = false) {
  next = reply;
  provider.requests.length = 0;
  const tasks: Promise<unknown>[] = [];
  let answers = 0;
  const waiting: (() => void)[] = [];
  const harness = appHarness(
    new MemoryStore(),
    {
      API_TOKEN: TOKEN,
      TOKEN_SIGNING_KEY: SIGNING_KEY,
      OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
      DEFAULT_MODEL: 'openai-compatible:fake-model',
      MODEL_MAX_RETRIES: '1',
      MODEL_TIMEOUT_MS: '600000',
      TURN_LEASE_MS: '600000',
    },
    {
      afterResponse: (task: Promise<unknown>) => void tasks.push(task),
      modelEnvironment: {
        fetch: async (input, init) => {
          const response = await fetch(input, init);
          answers++;
          // After the call's own continuation of this fetch has run (a refusal: waiting to retry).
          setImmediate(() => {
            for (const wake of waiting.splice(0)) wake();
          });
          return response;
        },
      },
    },
  );
  const api = createClient(harness);
  const minted = await api.post('/v1/tokens', {
    scopes: ['session:turn', 'session:read'],
    budget: { max_total_tokens: 1_000_000 },
  });
  expect(minted.status, JSON.stringify(minted.body)).toBe(201);
  const auth = { authorization: `Bearer ${minted.body.token as string}` };
  const id = await api.session();
  const items = ['plan the trip', 'to Paris', 'in May'].map((content) => ({ type: 'message', role: 'user', content }));
  expect((await api.post(`/v1/sessions/${id}/items`, { items })).status).toBe(201);
  const pending = harness.fetch(`/v1/sessions/${id}/turns`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ ...compacting, stream }),
  });
  if (reply === inFlight) await expect.poll(() => provider.requests.length).toBeGreaterThan(0);
  else while (answers < 1) await new Promise<void>((wake) => waiting.push(wake));
  const drain = async () => {
    while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
  };
  const answer = async () => {
    const response = await pending;
    const text = await response.text();
    await drain();
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    return { status: response.status, code: (JSON.parse(text) as { error: { code: string } }).error.code };
  };
  return { api, auth, id, answer };
}

describe.each([
  ['in flight', inFlight],
  ['waiting to retry a 429', waitingToRetry],
])('a compacting turn whose summary call is %s', (state, reply) => {
  it('cancelled: 409 turn_cancelled, its receipt cancelled', async () => {
    const { api, auth, id, answer } = await summarizing(reply);
    expect((await api.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
    expect(await answer()).toEqual({ status: 409, code: 'turn_cancelled' });
    const [receipt] = (await api.get(`/v1/sessions/${id}/turns`)).body.turns;
    expect(receipt).toMatchObject({ status: 'cancelled', usage: null, error: { code: 'turn_cancelled' } });
    const spent = (await api.get('/v1/tokens/current', auth)).body.usage;
    if (state === 'in flight') {
      expect(receipt.compaction_usage.input_tokens).toBeGreaterThan(0);
      expect(spent.input_tokens).toBe(receipt.compaction_usage.input_tokens);
    } else {
      expect(receipt.compaction_usage).toBeUndefined();
      expect(spent).toMatchObject({ turns: 0, total_tokens: 0 });
    }
    // The summary call was the only one the turn made.
    expect(provider.requests).toHaveLength(1);
  });

  // Its stream has no event before its model call: an ordinary error response, as before a first event.
  it('streamed, cancelled: 409 turn_cancelled, its receipt cancelled', async () => {
    const { api, id, answer } = await summarizing(reply, true);
    expect((await api.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
    expect(await answer()).toEqual({ status: 409, code: 'turn_cancelled' });
    const [receipt] = (await api.get(`/v1/sessions/${id}/turns`)).body.turns;
    expect(receipt).toMatchObject({ status: 'cancelled', usage: null, error: { code: 'turn_cancelled' } });
    expect(receipt.compaction_usage === undefined).toBe(state !== 'in flight');
  });

  it('its session deleted: 404 not_found', async () => {
    const { api, auth, id, answer } = await summarizing(reply);
    expect((await api.delete(`/v1/sessions/${id}`)).status).toBe(204);
    expect(await answer()).toEqual({ status: 404, code: 'not_found' });
    expect((await api.get(`/v1/sessions/${id}`)).status).toBe(404);
    // Its token is charged the summary's estimate, as no turn, only when the provider may have run it.
    const spent = (await api.get('/v1/tokens/current', auth)).body.usage;
    expect(spent.turns).toBe(0);
    if (state === 'in flight') expect(spent.input_tokens).toBeGreaterThan(0);
    else expect(spent.total_tokens).toBe(0);
    expect(provider.requests).toHaveLength(1);
  });
});

import { describe, expect, it } from 'vitest';
import { type FakeReply, fakeProviderForFile } from '../support/fake-providers/fake-provider-server.ts';
import { spendWorld } from './spend-world.ts';

// A compacting turn stopped by someone else while its summary call is made (its request in flight,
// or refused and waiting to retry) is answered as docs/API.md says of a stopped turn, whatever its
// summary call failed with: cancelled, 409 `turn_cancelled` and a receipt `cancelled` with error
// `turn_cancelled` (its `compaction_usage` the summary's estimate only when the provider may have
// run it); its session deleted, 404 `not_found`. Against a fake provider speaking Chat Completions.

const fake = fakeProviderForFile();

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
  fake.next = reply;
  fake.provider.requests.length = 0;
  const { api, harness, auth, drain, answered } = await spendWorld(fake.provider.baseURL, {
    MODEL_MAX_RETRIES: '1',
    MODEL_TIMEOUT_MS: '600000',
    TURN_LEASE_MS: '600000',
  });
  const id = await api.session();
  const items = ['plan the trip', 'to Paris', 'in May'].map((content) => ({ type: 'message', role: 'user', content }));
  expect((await api.post(`/v1/sessions/${id}/items`, { items })).status).toBe(201);
  const pending = harness.fetch(`/v1/sessions/${id}/turns`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ ...compacting, stream }),
  });
  if (reply === inFlight) await expect.poll(() => fake.provider.requests.length).toBeGreaterThan(0);
  else await answered(1);
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
    expect(fake.provider.requests).toHaveLength(1);
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
    expect(fake.provider.requests).toHaveLength(1);
  });
});

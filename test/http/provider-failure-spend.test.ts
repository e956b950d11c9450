import { describe, expect, it } from 'vitest';
import { type FakeReply, fakeProviderForFile, fixture } from '../support/fake-providers/fake-provider-server.ts';
import { spendWorld as world } from './spend-world.ts';

// A turn whose model call failed is charged an estimate (its prompt's tokens, the output it
// streamed) only when the provider may have run the model: the request was in flight when the
// call timed out, or the provider accepted it (a 2xx) and the answer broke off. A request the
// provider refused with an error status, or that never reached it, bills nothing. Against a fake
// provider speaking Chat Completions. No test races a deadline against a refusal: a refusal is
// answered with no retry (the call that times out waiting to retry one is marked by the same
// rule: test/models/provider-reach.test.ts).

const fake = fakeProviderForFile();

/** The first events of a Chat Completions stream: `count` of them, then the connection ends. */
const firstEvents = (count: number) =>
  `${fixture('openai-chat-text.sse').split('\n\n').slice(0, count).join('\n\n')}\n\n`;

/** The discard port: below 1024, so no test's server can bind it, and nothing listens on it. */
const CLOSED_PORT_URL = 'http://127.0.0.1:9/v1';
/** No retry, and a deadline no test reaches: the refusal is the call's failure. */
const NO_RETRY = { MODEL_MAX_RETRIES: '0', MODEL_TIMEOUT_MS: '600000' };
/**
 * A deadline that falls while the request hangs unanswered; long enough that the request was sent
 * before it on a loaded machine (the call builds it at once).
 */
const HANGING = { MODEL_MAX_RETRIES: '0', MODEL_TIMEOUT_MS: '5000' };

/** A turn on the fake provider (or `baseURL`), streamed or not, with the model settings `models`. */
async function failedTurn(stream: boolean, models: Record<string, string>, baseURL = fake.provider.baseURL) {
  const { api, harness, auth, drain } = await world(baseURL, models);
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

type Turn = Awaited<ReturnType<typeof failedTurn>>;

function chargedNothing({ receipt, spent, session }: Pick<Turn, 'receipt' | 'spent' | 'session'>) {
  expect(spent).toMatchObject({ turns: 0, total_tokens: 0 });
  expect(session).toMatchObject({ turns: 0, total_tokens: 0 });
  expect(receipt.usage).toBeNull();
  expect(receipt.usage_estimated).toBeUndefined();
}

function chargedEstimate(
  { receipt, spent, session }: Pick<Turn, 'receipt' | 'spent' | 'session'>,
  output: 'none' | 'some',
) {
  expect(receipt.usage_estimated).toBe(true);
  expect(receipt.usage.input_tokens).toBeGreaterThan(0);
  if (output === 'none') expect(receipt.usage.output_tokens).toBe(0);
  else expect(receipt.usage.output_tokens).toBeGreaterThan(0);
  const { input_tokens, output_tokens } = receipt.usage;
  expect(spent).toMatchObject({ turns: 0, input_tokens, output_tokens });
  expect(session).toMatchObject({ turns: 0, input_tokens, output_tokens });
}

describe.each([false, true])('a turn (stream: %s) whose call never reached the model charges nothing', (stream) => {
  it('a refused connection', async () => {
    const turn = await failedTurn(stream, NO_RETRY, CLOSED_PORT_URL);
    expect(turn.answer).toContain('model_error');
    chargedNothing(turn);
  });

  it.each([
    [429, { error: { message: 'Rate limit reached', type: 'requests' } }],
    [401, { error: { message: 'Incorrect API key', type: 'invalid_request_error' } }],
    [500, { error: { message: 'The server had an error', type: 'server' } }],
  ])('a %s', async (status, json) => {
    fake.next = { status, json };
    const turn = await failedTurn(stream, NO_RETRY);
    expect(turn.answer).toContain('model_error');
    chargedNothing(turn);
  });
});

describe('a turn whose call the provider may have run charges its estimate', () => {
  it.each([false, true])('no answer by the deadline (stream: %s)', async (stream) => {
    fake.next = { hang: true };
    const turn = await failedTurn(stream, HANGING);
    expect(turn.answer).toContain('model_timeout');
    chargedEstimate(turn, 'none');
  });

  it('a stream accepted, cut before any output', async () => {
    fake.next = { sse: firstEvents(1) };
    const turn = await failedTurn(true, NO_RETRY);
    expect(turn.answer).toContain('model_error');
    chargedEstimate(turn, 'none');
  });

  it('a stream cut after output', async () => {
    fake.next = { sse: firstEvents(2) };
    const turn = await failedTurn(true, NO_RETRY);
    expect(turn.answer).toContain('model_error');
    chargedEstimate(turn, 'some');
  });
});

/**
 * Cancels turn 1 of session `id` of a spend world (`spend`) once its model call reached the fake
 * provider (`answers` answers made, or the first request sent) and its claim landed: the call
 * starts beside the claim's write.
 */
async function cancelWhileCalling(spend: Awaited<ReturnType<typeof world>>, id: string, answers: number) {
  if (answers > 0) await spend.answered(answers);
  else await expect.poll(() => fake.provider.requests.length).toBeGreaterThan(0);
  const { api } = spend;
  await expect.poll(async () => (await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('in_progress');
  const cancel = await api.post(`/v1/sessions/${id}/turns/1/cancel`);
  expect(cancel.status, JSON.stringify(cancel.body)).toBe(200);
}

// A turn stopped by someone else (here a cancel, which reaches a turn of the same process at
// once) charges what its call spent by the same rule: nothing for a call refused and waiting to
// retry (`retry-after-ms` far past the test), its estimate for one in flight.
describe.each([false, true])('a turn (stream: %s) cancelled while its call', (stream) => {
  async function cancelled(reply: FakeReply, answers: number) {
    fake.next = reply;
    const found = await world(fake.provider.baseURL, {
      MODEL_MAX_RETRIES: '1',
      MODEL_TIMEOUT_MS: '600000',
      TURN_LEASE_MS: '600000',
    });
    const { api, harness, auth, drain } = found;
    const id = await api.session();
    const pending = harness.fetch(`/v1/sessions/${id}/turns`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'Hello there', stream }),
    });
    await cancelWhileCalling(found, id, answers);
    await (await pending).text();
    await drain();
    const [receipt] = (await api.get(`/v1/sessions/${id}/turns`)).body.turns;
    expect(receipt.status).toBe('cancelled');
    return {
      receipt,
      spent: (await api.get('/v1/tokens/current', auth)).body.usage,
      session: (await api.get(`/v1/sessions/${id}`)).body.usage,
    };
  }

  it('waits to retry a 429: nothing', async () => {
    const later = { 'retry-after-ms': '30000' };
    const turn = await cancelled({ status: 429, headers: later, json: { error: { message: 'Slow down' } } }, 1);
    chargedNothing(turn);
  });

  it('is in flight: its estimate', async () => {
    fake.provider.requests.length = 0;
    const turn = await cancelled({ hang: true }, 0);
    chargedEstimate(turn, 'none');
  });
});

// A call that stores nothing (`store: false`) is charged to its token by the same rule.
describe('a store: false response whose call failed', () => {
  async function spentBy(reply: FakeReply | 'refused') {
    if (reply !== 'refused') fake.next = reply;
    const baseURL = reply === 'refused' ? CLOSED_PORT_URL : fake.provider.baseURL;
    const { api, auth, drain } = await world(baseURL, reply === 'refused' ? NO_RETRY : HANGING);
    const body = { model: 'openai-compatible:fake-model', input: 'Hello there', store: false };
    const failed = await api.post('/v1/responses', body, auth);
    expect(failed.status, JSON.stringify(failed.body)).toBe(reply === 'refused' ? 502 : 504);
    await drain();
    return (await api.get('/v1/tokens/current', auth)).body.usage;
  }

  it('a refused connection: nothing', async () => {
    expect(await spentBy('refused')).toMatchObject({ turns: 0, total_tokens: 0 });
  });

  it('no answer by the deadline: its estimate', async () => {
    const usage = await spentBy({ hang: true });
    expect(usage).toMatchObject({ turns: 0, output_tokens: 0 });
    expect(usage.input_tokens).toBeGreaterThan(0);
  });
});

// A compaction's summary call is charged by the same rule, as the summary's usage
// (`compaction_usage`, as no turn): nothing for a summary request the provider refused (with no
// retry), or one stopped while it waits to retry a refusal; its estimate for one in flight.
describe("a compaction's summary call", () => {
  /** A world whose session holds three messages to summarize (appended: no model call). */
  async function withHistory(models: Record<string, string>) {
    const found = await world(fake.provider.baseURL, models);
    const id = await found.api.session();
    const items = ['plan the trip', 'to Paris', 'in May'].map((content) => ({
      type: 'message',
      role: 'user',
      content,
    }));
    expect((await found.api.post(`/v1/sessions/${id}/items`, { items })).status).toBe(201);
    const spent = async () => ({
      spent: (await found.api.get('/v1/tokens/current', found.auth)).body.usage,
      session: (await found.api.get(`/v1/sessions/${id}`)).body.usage,
    });
    return { ...found, id, spent };
  }

  it('refused, with no retry, by a manual compaction: nothing', async () => {
    fake.next = { status: 429, json: { error: { message: 'Rate limit reached', type: 'requests' } } };
    const { api, auth, drain, id, spent } = await withHistory(NO_RETRY);
    const failed = await api.post(`/v1/sessions/${id}/compact`, { keep_tokens: 0 }, auth);
    expect(failed.status, JSON.stringify(failed.body)).toBe(502);
    expect(failed.body.error.code).toBe('model_error');
    await drain();
    const { spent: token, session } = await spent();
    expect(token).toMatchObject({ turns: 0, total_tokens: 0 });
    expect(session).toMatchObject({ turns: 0, total_tokens: 0 });
  });

  // A window whose trigger and kept share are a few tokens: the turn summarizes all but its input.
  const compacting = {
    input: 'Hello there',
    strategies: ['compact'],
    strategy_config: { context_limit: 100_000, compact_trigger_ratio: 0.0001, compact_keep_ratio: 0.0001 },
  };

  /** A compacting turn cancelled while its summary call is made (the provider answering `reply`). */
  async function cancelledSummary(reply: FakeReply, answers: number) {
    fake.next = reply;
    fake.provider.requests.length = 0;
    const found = await withHistory({ MODEL_MAX_RETRIES: '1', MODEL_TIMEOUT_MS: '600000', TURN_LEASE_MS: '600000' });
    const { api, harness, auth, drain, id, spent } = found;
    const pending = harness.fetch(`/v1/sessions/${id}/turns`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify(compacting),
    });
    await cancelWhileCalling(found, id, answers);
    await (await pending).text();
    await drain();
    const [receipt] = (await api.get(`/v1/sessions/${id}/turns`)).body.turns;
    expect(receipt.status).toBe('cancelled');
    expect(receipt.usage).toBeNull();
    // The summary call was the only one the turn made.
    expect(fake.provider.requests).toHaveLength(1);
    return { receipt, ...(await spent()) };
  }

  it('stopped while it waits to retry a 429 (its turn cancelled): nothing', async () => {
    const later = { 'retry-after-ms': '30000' };
    const turn = await cancelledSummary({ status: 429, headers: later, json: { error: { message: 'Slow down' } } }, 1);
    expect(turn.receipt.compaction_usage).toBeUndefined();
    expect(turn.spent).toMatchObject({ turns: 0, total_tokens: 0 });
    expect(turn.session).toMatchObject({ turns: 0, total_tokens: 0 });
  });

  it('stopped in flight (its turn cancelled): its estimate', async () => {
    const turn = await cancelledSummary({ hang: true }, 0);
    const { input_tokens, output_tokens } = turn.receipt.compaction_usage;
    expect(input_tokens).toBeGreaterThan(0);
    expect(output_tokens).toBe(0);
    expect(turn.spent).toMatchObject({ turns: 0, input_tokens, output_tokens });
    expect(turn.session).toMatchObject({ turns: 0, input_tokens, output_tokens });
  });
});

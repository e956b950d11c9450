import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import {
  fixture,
  startFakeProvider,
  type FakeProvider,
  type RecordedRequest,
} from '../support/fake-providers/fake-provider-server.ts';
import { createClient, TOKEN, type HttpHarness } from './http-suite.ts';

// The usage ledger through the whole app: fake providers report every token kind in their own
// wire format (Anthropic's cache_read_input_tokens and cache_creation_input_tokens, OpenAI's
// prompt_tokens_details.cached_tokens and completion_tokens_details.reasoning_tokens); each
// arrives in the turn's receipt with its cost, in the session's totals and listing row, and in
// the OpenAI-compatible routes' usage. Budgets refuse a turn before any model call.

/** Anthropic's answer with prompt-cache usage: 95 uncached input tokens, 1,800 read, 200 written. */
function anthropicReply(request: RecordedRequest) {
  const cacheUsage = { cache_read_input_tokens: 1800, cache_creation_input_tokens: 200 };
  if (!request.body?.stream) {
    const json = JSON.parse(fixture('anthropic-message-text.json'));
    return { json: { ...json, usage: { input_tokens: 95, output_tokens: 503, ...cacheUsage } } };
  }
  const sse = fixture('anthropic-message-text.sse').replace(
    '"usage": {"input_tokens": 25, "output_tokens": 1}',
    `"usage": ${JSON.stringify({ input_tokens: 95, output_tokens: 1, ...cacheUsage })}`,
  );
  return { sse: sse.replace('"usage": {"output_tokens": 15}', '"usage": {"output_tokens": 503}') };
}

/** OpenAI's answer with 1,000 prompt tokens (600 cached) and 300 completion tokens (120 reasoning). */
function openaiReply(request: RecordedRequest) {
  const usage = {
    prompt_tokens: 1000,
    completion_tokens: 300,
    total_tokens: 1300,
    prompt_tokens_details: { cached_tokens: 600, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 120, audio_tokens: 0 },
  };
  const json = JSON.parse(fixture('openai-chat-text.json'));
  if (!request.body?.stream) return { json: { ...json, usage } };
  const lines = fixture('openai-chat-text.sse').split('\n\n');
  const withUsage = lines.map((event) => {
    if (!event.startsWith('data: {') || !event.includes('"choices":[]')) return event;
    return `data: ${JSON.stringify({ ...JSON.parse(event.slice(6)), usage })}`;
  });
  return { sse: withUsage.join('\n\n') };
}

let anthropic: FakeProvider;
let openai: FakeProvider;

beforeAll(async () => {
  anthropic = await startFakeProvider(anthropicReply);
  openai = await startFakeProvider(openaiReply);
});

afterAll(async () => {
  await anthropic?.close();
  await openai?.close();
});

const store = new MemoryStore();
const logged: string[] = [];
const app = createApp({
  store: () => store,
  readEnvironment: (c) => c.env ?? {},
  log: (message) => logged.push(message),
});
const environment = () => ({
  API_TOKEN: TOKEN,
  ANTHROPIC_API_KEY: 'test-key',
  ANTHROPIC_BASE_URL: anthropic.baseURL,
  OPENAI_API_KEY: 'test-key',
  OPENAI_BASE_URL: openai.baseURL,
  MODEL_MAX_RETRIES: '0',
  // Adds a price for the fake Anthropic model; openai:gpt-4.1-mini keeps its default.
  MODEL_PRICES: JSON.stringify({ 'anthropic:fake': { input: 3, cached_input: 0.3, cache_write: 3.75, output: 15 } }),
});
const harness: HttpHarness = {
  fetch: async (path, init) => app.request(path, init, environment()),
  fetchWithEnv: async (overrides, path, init) => app.request(path, init, { ...environment(), ...overrides }),
  store,
  keyPrefix: '',
  logged,
};
const api = createClient(harness);

// 95 x 3 + 1,800 x 0.3 + 200 x 3.75 + 503 x 15 USD per million tokens.
const ANTHROPIC_TURN = {
  input_tokens: 2095,
  cached_input_tokens: 1800,
  cache_write_tokens: 200,
  output_tokens: 503,
  reasoning_tokens: 0,
  cost_usd: 0.00912,
};
// 400 x 0.4 + 600 x 0.1 + 300 x 1.6 USD per million tokens (the default price of openai:gpt-4.1-mini).
const OPENAI_TURN = {
  input_tokens: 1000,
  cached_input_tokens: 600,
  cache_write_tokens: 0,
  output_tokens: 300,
  reasoning_tokens: 120,
  cost_usd: 0.0007,
};

describe('the usage ledger', () => {
  it("carries Anthropic's cache reads and writes into the receipt, the totals and the listing", async () => {
    const id = await api.session({ model: 'anthropic:fake' });
    const plain = await api.post(`/v1/sessions/${id}/turns`, { input: 'hello' });
    expect(plain.status, JSON.stringify(plain.body)).toBe(200);
    expect(plain.body.usage).toEqual(ANTHROPIC_TURN);
    const streamed = await api.post(`/v1/sessions/${id}/turns`, { input: 'again', stream: true });
    expect(streamed.status).toBe(200);
    const turns = await api.get(`/v1/sessions/${id}/turns`);
    expect(turns.body.turns.map((turn: any) => turn.usage)).toEqual([ANTHROPIC_TURN, ANTHROPIC_TURN]);
    const session = await api.get(`/v1/sessions/${id}`);
    expect(session.body.usage).toEqual({
      turns: 2,
      input_tokens: 4190,
      cached_input_tokens: 3600,
      cache_write_tokens: 400,
      output_tokens: 1006,
      reasoning_tokens: 0,
      total_tokens: 5196,
      cost_usd: 0.01824,
      priced_cost_usd: 0.01824,
      unpriced_turns: 0,
      cache_read_share: 3600 / 4190,
    });
    // The listing row is written in the background after each turn.
    await vi.waitFor(
      async () => {
        const listing = await api.get('/v1/sessions?limit=100');
        expect(listing.body.sessions.find((row: any) => row.id === id).usage).toEqual(session.body.usage);
      },
      { timeout: 15_000 },
    );
  });

  it('a model without a price costs null, never 0, and the total says it is unknown', async () => {
    const id = await api.session({ model: 'anthropic:unpriced' });
    const turn = await api.post(`/v1/sessions/${id}/turns`, { input: 'hello' });
    expect(turn.body.usage).toEqual({ ...ANTHROPIC_TURN, cost_usd: null });
    const session = await api.get(`/v1/sessions/${id}`);
    expect(session.body.usage).toMatchObject({ turns: 1, cost_usd: null, priced_cost_usd: 0, unpriced_turns: 1 });
  });

  it("maps OpenAI's cached and reasoning tokens onto the Responses and Chat Completions usage", async () => {
    const response = await api.post('/v1/responses', { model: 'openai:gpt-4.1-mini', input: 'hello' });
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    expect(response.body.usage).toEqual({
      input_tokens: 1000,
      input_tokens_details: { cached_tokens: 600, cache_write_tokens: 0 },
      output_tokens: 300,
      output_tokens_details: { reasoning_tokens: 120 },
      total_tokens: 1300,
    });
    const sessionId = /^resp_(.+)_\d+_\d+_\d+_g[0-9a-f]{21}$/.exec(response.body.id)![1]!;
    const turns = await api.get(`/v1/sessions/${sessionId}/turns`);
    expect(turns.body.turns[0].usage).toEqual(OPENAI_TURN);
    const chat = await api.post('/v1/chat/completions', {
      model: 'openai:gpt-4.1-mini',
      messages: [{ role: 'user', content: 'hello' }],
    });
    expect(chat.status, JSON.stringify(chat.body)).toBe(200);
    expect(chat.body.usage).toEqual({
      prompt_tokens: 1000,
      completion_tokens: 300,
      total_tokens: 1300,
      prompt_tokens_details: { cached_tokens: 600 },
      completion_tokens_details: { reasoning_tokens: 120 },
    });
  });
});

describe("compactions' summaries", () => {
  // The summary model is the session's (no SUMMARY_MODEL): the fake Anthropic answers every call alike.
  const SUMMARY = ANTHROPIC_TURN;
  const times = (n: number) => ({
    turns: 2,
    input_tokens: n * 2095,
    output_tokens: n * 503,
    cost_usd: Math.round(n * 0.00912 * 1e5) / 1e5,
    unpriced_turns: 0,
  });

  it('a manual compaction answers its usage and adds it to the totals, as no turn; a budget counts it', async () => {
    const id = await api.session({ model: 'anthropic:fake', budget: { max_total_tokens: 3 * 2598 } });
    for (const input of ['one', 'two'])
      expect((await api.post(`/v1/sessions/${id}/turns`, { input })).status).toBe(200);
    const compacted = await api.post(`/v1/sessions/${id}/compact`, { keep_tokens: 0 });
    expect(compacted.status, JSON.stringify(compacted.body)).toBe(200);
    expect(compacted.body).toMatchObject({ compacted: true, usage: SUMMARY });
    expect((await api.get(`/v1/sessions/${id}`)).body.usage).toMatchObject(times(3));
    // Two turns and the summary spent the session's tokens: the next turn is refused.
    const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'three' });
    expect(refused.status).toBe(402);
    expect(refused.body.error).toMatchObject({ code: 'budget_exhausted', details: { limit: 'max_total_tokens' } });
    // Nothing to summarize: no model call, no usage.
    const empty = await api.post(`/v1/sessions/${await api.session({ model: 'anthropic:fake' })}/compact`, {});
    expect(empty.body).toMatchObject({ compacted: false, usage: null });
  });

  it("the listing row takes a manual compaction's usage, as the session's totals do", async () => {
    const id = await api.session({ model: 'anthropic:fake' });
    for (const input of ['one', 'two'])
      expect((await api.post(`/v1/sessions/${id}/turns`, { input })).status).toBe(200);
    const row = async () => (await api.get('/v1/sessions?limit=100')).body.sessions.find((row: any) => row.id === id);
    const before = (await api.get(`/v1/sessions/${id}`)).body.usage;
    await vi.waitFor(async () => expect((await row()).usage).toEqual(before), { timeout: 15_000 });
    expect((await api.post(`/v1/sessions/${id}/compact`, { keep_tokens: 0 })).body.compacted).toBe(true);
    const after = (await api.get(`/v1/sessions/${id}`)).body.usage;
    expect(after).toMatchObject(times(3));
    // Written again in the background after the compaction, as after a turn.
    await vi.waitFor(async () => expect((await row()).usage).toEqual(after), { timeout: 15_000 });
  });

  it("a compacting turn answers its summary's usage apart, in its receipt too; the totals take both", async () => {
    const id = await api.session({ model: 'anthropic:fake' });
    for (const input of ['one', 'two'])
      expect((await api.post(`/v1/sessions/${id}/turns`, { input })).status).toBe(200);
    // A window whose trigger and kept share are a few tokens: the turn summarizes all but its input.
    const turn = await api.post(`/v1/sessions/${id}/turns`, {
      input: 'three',
      strategies: ['compact'],
      strategy_config: { context_limit: 100_000, compact_trigger_ratio: 0.0001, compact_keep_ratio: 0.0001 },
    });
    expect(turn.status, JSON.stringify(turn.body)).toBe(200);
    expect(turn.body.context.compaction).toBeDefined();
    expect(turn.body).toMatchObject({ usage: ANTHROPIC_TURN, compaction_usage: SUMMARY });
    expect((await api.get(`/v1/sessions/${id}`)).body.usage).toMatchObject({ ...times(4), turns: 3 });
    const receipt = await api.get(`/v1/sessions/${id}/turns/3`);
    expect(receipt.body).toMatchObject({ usage: ANTHROPIC_TURN, compaction_usage: SUMMARY });
    const plain = await api.get(`/v1/sessions/${id}/turns/2`);
    expect(plain.body.compaction_usage).toBeUndefined();
  });

  it("POST /v1/responses/compact answers the summary's usage in OpenAI's shape", async () => {
    const compacted = await api.post('/v1/responses/compact', { model: 'anthropic:fake', input: 'hello there' });
    expect(compacted.status, JSON.stringify(compacted.body)).toBe(200);
    expect(compacted.body.usage).toEqual({
      input_tokens: 2095,
      input_tokens_details: { cached_tokens: 1800, cache_write_tokens: 200 },
      output_tokens: 503,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 2598,
    });
  });
});

describe('budgets', () => {
  it('a spent budget is 402 budget_exhausted: nothing stored, no model called; PATCH lifts it', async () => {
    const id = await api.session({ model: 'anthropic:fake', budget: { max_turns: 1 } });
    expect((await api.get(`/v1/sessions/${id}`)).body.budget).toEqual({ max_turns: 1 });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'one' })).status).toBe(200);
    const calls = anthropic.requests.length;
    const before = (await api.get(`/v1/sessions/${id}`)).body.counts;
    const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'two' });
    expect(refused.status).toBe(402);
    expect(refused.body.error).toMatchObject({
      code: 'budget_exhausted',
      details: { limit: 'max_turns', spent: 1, value: 1 },
    });
    expect(anthropic.requests.length).toBe(calls);
    expect((await api.get(`/v1/sessions/${id}`)).body.counts).toEqual(before);
    // A streamed turn is refused the same way, before its first event.
    const streamed = await api.post(`/v1/sessions/${id}/turns`, { input: 'two', stream: true });
    expect(streamed.status).toBe(402);
    const patched = await api.patch(`/v1/sessions/${id}`, { budget: { max_total_tokens: 1_000_000 } });
    expect(patched.body.budget).toEqual({ max_total_tokens: 1_000_000 });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'two' })).status).toBe(200);
    expect((await api.patch(`/v1/sessions/${id}`, { budget: null })).body.budget).toBeNull();
  });

  it('limits cost and total tokens by what the completed turns spent', async () => {
    const costly = await api.session({ model: 'anthropic:fake', budget: { max_cost_usd: 0.015 } });
    expect((await api.post(`/v1/sessions/${costly}/turns`, { input: 'one' })).status).toBe(200);
    // 0.00912 USD spent, under 0.015: the turn that crosses the limit still runs.
    expect((await api.post(`/v1/sessions/${costly}/turns`, { input: 'two' })).status).toBe(200);
    const refused = await api.post(`/v1/sessions/${costly}/turns`, { input: 'three' });
    expect(refused.body.error).toMatchObject({
      code: 'budget_exhausted',
      details: { limit: 'max_cost_usd', spent: 0.01824, value: 0.015 },
    });
    const wordy = await api.session({ model: 'anthropic:fake', budget: { max_total_tokens: 2598 } });
    expect((await api.post(`/v1/sessions/${wordy}/turns`, { input: 'one' })).status).toBe(200);
    const tokens = await api.post(`/v1/sessions/${wordy}/turns`, { input: 'two' });
    expect(tokens.body.error).toMatchObject({ details: { limit: 'max_total_tokens', spent: 2598, value: 2598 } });
  });

  it('a bad budget is a 400 naming the field', async () => {
    const created = await api.post('/v1/sessions', { budget: { max_turns: -1 } });
    expect(created.status).toBe(400);
    expect(created.body.error.details.field).toBe('budget.max_turns');
    const unknown = await api.post('/v1/sessions', { budget: { max_dollars: 1 } });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.message).toContain('max_dollars');
  });

  it('POST /v1/responses/compact over a spent budget is 402 and stores nothing of its input', async () => {
    const first = await api.post('/v1/responses', { model: 'openai:gpt-4.1-mini', input: 'hello' });
    const sessionId = /^resp_(.+)_\d+_\d+_\d+_g[0-9a-f]{21}$/.exec(first.body.id)![1]!;
    await api.patch(`/v1/sessions/${sessionId}`, { budget: { max_turns: 1 } });
    const before = (await api.get(`/v1/sessions/${sessionId}`)).body.counts;
    const calls = openai.requests.length;
    const refused = await api.post('/v1/responses/compact', {
      model: 'openai:gpt-4.1-mini',
      previous_response_id: first.body.id,
      input: 'not stored',
    });
    expect(refused.status).toBe(402);
    expect(refused.body.error).toMatchObject({ code: 'budget_exhausted', details: { limit: 'max_turns' } });
    expect((await api.get(`/v1/sessions/${sessionId}`)).body.counts).toEqual(before);
    expect(openai.requests.length).toBe(calls);
  });

  it("the OpenAI-compatible routes answer a spent budget in OpenAI's error shape", async () => {
    const first = await api.post('/v1/responses', { model: 'openai:gpt-4.1-mini', input: 'hello' });
    const sessionId = /^resp_(.+)_\d+_\d+_\d+_g[0-9a-f]{21}$/.exec(first.body.id)![1]!;
    await api.patch(`/v1/sessions/${sessionId}`, { budget: { max_turns: 1 } });
    const calls = openai.requests.length;
    const refused = await api.post('/v1/responses', {
      model: 'openai:gpt-4.1-mini',
      input: 'again',
      previous_response_id: first.body.id,
    });
    expect(refused.status).toBe(402);
    expect(refused.body.error).toMatchObject({
      type: 'insufficient_quota',
      code: 'budget_exhausted',
      details: { limit: 'max_turns', spent: 1, value: 1 },
    });
    expect(openai.requests.length).toBe(calls);
  });
});

import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { createClient, parseSse, SIGNING_KEY, TOKEN } from './http-suite.ts';

// An OpenAI-compatible backend that answers without usage (a server that ignores
// stream_options.include_usage, or leaves `usage` out of its completion) still ran the model and
// bills for it. Counting such a turn as 0 tokens and $0 would let a session's max_cost_usd never
// stop it: the turn is charged the estimate a call that reported nothing is charged (its
// prompt's tokens, its output), marked usage_estimated.

let provider: FakeProvider;

beforeAll(async () => {
  provider = await startFakeProvider((request) => {
    const { usage: _usage, ...json } = JSON.parse(fixture('openai-chat-text.json'));
    if (!request.body?.stream) return { json };
    const sse = fixture('openai-chat-text.sse')
      .split('\n\n')
      .filter((event) => !event.includes('"choices":[]'))
      .join('\n\n');
    return { sse };
  });
});

afterAll(async () => {
  await provider?.close();
});

const tasks: Promise<unknown>[] = [];
const drain = async () => {
  while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
};
const api = () =>
  createClient(
    appHarness(
      new MemoryStore(),
      {
        API_TOKEN: TOKEN,
        TOKEN_SIGNING_KEY: SIGNING_KEY,
        OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
        MODEL_MAX_RETRIES: '0',
        MODEL_PRICES: JSON.stringify({ 'openai-compatible:local': { input: 1000, output: 1000 } }),
      },
      { afterResponse: (task: Promise<unknown>) => void tasks.push(task) },
    ),
  );

describe('a provider that reports no usage', () => {
  it.each([false, true])(
    'streamed %s: the turn is charged an estimate, and a budget stops the loop',
    async (stream) => {
      const client = api();
      const id = await client.session({ model: 'openai-compatible:local', budget: { max_cost_usd: 0.01 } });
      const taken = await client.post(`/v1/sessions/${id}/turns`, { input: 'hello '.repeat(20), stream });
      expect(taken.status).toBe(200);
      const [receipt] = (await client.get(`/v1/sessions/${id}/turns`)).body.turns;
      expect(receipt.usage_estimated).toBe(true);
      expect(receipt.usage.input_tokens).toBeGreaterThan(0);
      expect(receipt.usage.output_tokens).toBeGreaterThan(0);
      expect(receipt.usage.cost_usd).toBeGreaterThan(0);
      const session = (await client.get(`/v1/sessions/${id}`)).body.usage;
      expect(session).toMatchObject({ turns: 1, cost_usd: receipt.usage.cost_usd });
      const next = await client.post(`/v1/sessions/${id}/turns`, { input: 'again' });
      expect(next.status).toBe(402);
    },
  );

  it.each([false, true])('streamed %s: a chat completion charges its token the estimate', async (stream) => {
    const client = api();
    const minted = await client.post('/v1/tokens', { scopes: ['session:turn'], budget: { max_cost_usd: 0.01 } });
    expect(minted.status, JSON.stringify(minted.body)).toBe(201);
    const auth = { authorization: `Bearer ${minted.body.token as string}` };
    const body = {
      model: 'openai-compatible:local',
      messages: [{ role: 'user', content: 'hello '.repeat(20) }],
      stream,
      ...(stream ? { stream_options: { include_usage: true } } : {}),
    };
    const answered = await client.post('/v1/chat/completions', body, auth);
    expect(answered.status).toBe(200);
    await drain();
    const spent = (await client.get('/v1/tokens/current', auth)).body.usage;
    expect(spent.turns).toBe(1);
    expect(spent.input_tokens).toBeGreaterThan(0);
    expect(spent.cost_usd).toBeGreaterThan(0);
    // The answer's usage is what its token was charged.
    const usage = stream
      ? parseSse(answered.body as string).find((frame) => frame.data.usage)?.data.usage
      : answered.body.usage;
    expect(usage).toMatchObject({ prompt_tokens: spent.input_tokens, completion_tokens: spent.output_tokens });
    expect((await client.post('/v1/chat/completions', body, auth)).status).toBe(402);
  });

  it("a compaction's summary is charged an estimate too", async () => {
    const client = api();
    const id = await client.session({ model: 'openai-compatible:local' });
    for (const input of ['one '.repeat(50), 'two '.repeat(50)])
      expect((await client.post(`/v1/sessions/${id}/turns`, { input })).status).toBe(200);
    const before = (await client.get(`/v1/sessions/${id}`)).body.usage;
    const compacted = await client.post(`/v1/sessions/${id}/compact`, { keep_tokens: 0 });
    expect(compacted.status, JSON.stringify(compacted.body)).toBe(200);
    expect(compacted.body.usage.input_tokens).toBeGreaterThan(0);
    expect(compacted.body.usage.output_tokens).toBeGreaterThan(0);
    const after = (await client.get(`/v1/sessions/${id}`)).body.usage;
    expect(after.cost_usd).toBeCloseTo(before.cost_usd + compacted.body.usage.cost_usd, 9);
  });

  it('leaves no mark of the missing usage in what it stores or answers', async () => {
    const store = new MemoryStore();
    const client = createClient(
      appHarness(store, {
        API_TOKEN: TOKEN,
        TOKEN_SIGNING_KEY: SIGNING_KEY,
        OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
        MODEL_MAX_RETRIES: '0',
      }),
    );
    const model = 'openai-compatible:local';
    const id = await client.session({ model });
    const answers = [
      await client.post(`/v1/sessions/${id}/turns`, { input: 'one '.repeat(50) }),
      await client.post(`/v1/sessions/${id}/turns`, { input: 'two '.repeat(50), stream: true }),
      await client.post(`/v1/sessions/${id}/compact`, { keep_tokens: 0 }),
      await client.get(`/v1/sessions/${id}/turns`),
      await client.get(`/v1/sessions/${id}`),
      await client.post('/v1/chat/completions', { model, messages: [{ role: 'user', content: 'hi' }] }),
      await client.post('/v1/responses', { model, input: 'hi' }),
      await client.post('/v1/responses', { model, input: 'hi', store: false }),
      await client.post('/v1/responses/compact', { model, input: 'three '.repeat(50) }),
    ];
    for (const answer of answers) {
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
      expect(JSON.stringify(answer.body)).not.toContain('unreported');
    }
    const keys = (await store.list('')).objects.map((object) => object.key);
    let estimated = 0;
    for (const key of keys) {
      const body = (await store.get(key))!.body;
      const gzipped = body[0] === 0x1f && body[1] === 0x8b;
      const text = new TextDecoder().decode(gzipped ? gunzipSync(body) : body);
      expect(text, key).not.toContain('unreported');
      if (text.includes('usage_estimated')) estimated += 1;
    }
    // The records read are those that hold the estimates.
    expect(estimated).toBeGreaterThan(0);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { sessionPrefix } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { createClient, TOKEN, type HttpHarness } from '../http/http-suite.ts';

// Compaction through the app: the manual route, the 413, the synthetic summary in the
// prompt preview, and a summary written by a provider (a fake OpenAI-compatible server).
let provider: FakeProvider;

beforeAll(async () => {
  provider = await startFakeProvider(() => ({ json: JSON.parse(fixture('openai-chat-text.json')) }));
});

afterAll(async () => {
  await provider?.close();
});

const store = new MemoryStore();
const logged: string[] = [];
const app = createApp({
  store: () => store,
  readEnvironment: (c) => c.env ?? {},
  log: (message) => logged.push(message),
});
const environment = () => ({ API_TOKEN: TOKEN, OPENAI_COMPATIBLE_BASE_URL: provider.baseURL, MODEL_MAX_RETRIES: '0' });
const harness: HttpHarness = {
  fetch: async (path, init) => app.request(path, init, environment()),
  fetchWithEnv: async (overrides, path, init) => app.request(path, init, { ...environment(), ...overrides }),
  store,
  keyPrefix: '',
  logged,
};
const api = createClient(harness);
const budget = { context_limit: 1000, response_reserve: 200 };

describe('POST /v1/sessions/:id/compact', () => {
  it('summarizes with echo, moves the context start, and paging still reaches every item', async () => {
    const id = await api.session({ model: 'echo', strategies: 'compact,inbox', strategy_config: budget });
    for (let index = 0; index < 4; index++)
      expect((await api.post(`/v1/sessions/${id}/turns`, { input: `turn ${index}` })).status).toBe(200);
    const compacted = await api.post(`/v1/sessions/${id}/compact`, { keep_tokens: 0 });
    expect(compacted.status, JSON.stringify(compacted.body)).toBe(200);
    expect(compacted.body).toMatchObject({
      session_id: id,
      compacted: true,
      context: { start_seq: 9, summarized: { first_seq: 1, last_seq: 8 }, interrupted: [], model: 'echo' },
    });
    expect(compacted.body.context.summary).toBe(
      'echo: #1 user: turn 0\n#2 assistant: echo: turn 0\n#3 user: turn 1\n#4 assistant: echo: turn 1\n#5 user: ' +
        'turn 2\n#6 assistant: echo: turn 2\n#7 user: turn 3\n#8 assistant: echo: turn 3',
    );

    const preview = await api.get(`/v1/sessions/${id}/prompt`);
    expect(preview.body.items).toEqual([
      {
        type: 'message',
        role: 'user',
        content: expect.stringContaining('echo: #1 user: turn 0'),
        synthetic: 'summary',
      },
    ]);
    expect(preview.body.context.context_start_seq).toBe(9);

    const turn = await api.post(`/v1/sessions/${id}/turns`, { input: 'after' });
    expect(turn.body.context).toMatchObject({ context_start_seq: 9, items_in_prompt: 2 });
    const page = await api.get(`/v1/sessions/${id}/items?limit=1000`);
    expect(page.body.items.map((item: { seq: number }) => item.seq)).toEqual([10, 9, 8, 7, 6, 5, 4, 3, 2, 1]);

    // Nothing older than the kept part: nothing to do. A body is optional.
    const again = await api.post(`/v1/sessions/${id}/compact`);
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body).toMatchObject({ compacted: false, context: { start_seq: 9 } });
  });

  it('without compact in the strategies, the turn after names the context start, as its preview', async () => {
    const id = await api.session({ model: 'echo' });
    for (let index = 0; index < 2; index++)
      expect((await api.post(`/v1/sessions/${id}/turns`, { input: `turn ${index}` })).status).toBe(200);
    const compacted = await api.post(`/v1/sessions/${id}/compact`, { keep_tokens: 0 });
    expect(compacted.body).toMatchObject({ compacted: true, context: { start_seq: 5 } });
    const preview = await api.get(`/v1/sessions/${id}/prompt`);
    expect(preview.body.context.context_start_seq).toBe(5);
    const turn = await api.post(`/v1/sessions/${id}/turns`, { input: 'after' });
    expect(turn.body.context.context_start_seq).toBe(5);
    const receipt = await api.get(`/v1/sessions/${id}/turns/${turn.body.turn}`);
    expect(receipt.body.receipt.context_start_seq).toBe(5);
  });

  it.each([[{ keep_tokens: -1 }], [{ unknown: true }], [{ model: 'nope:model' }]])(
    'refuses %o with 400',
    async (body) => {
      const id = await api.session({ model: 'echo' });
      const response = await api.post(`/v1/sessions/${id}/compact`, body);
      expect(response.status).toBe(400);
      expect(response.body.error.code).toBe('invalid_request');
    },
  );

  it('stores nothing when keep_tokens keeps the whole context: no summary of an empty range', async () => {
    const id = await api.session({ model: 'echo' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'only turn' })).status).toBe(200);
    const kept = await api.post(`/v1/sessions/${id}/compact`, { keep_tokens: 100_000 });
    expect(kept.status, JSON.stringify(kept.body)).toBe(200);
    expect(kept.body).toEqual({ session_id: id, compacted: false, context: null, usage: null });
    const keys = (await store.list(sessionPrefix('', id), { limit: 1000 })).objects.map((object) => object.key);
    expect(keys.length).toBeGreaterThan(0);
    expect(keys.filter((key) => key.startsWith(`${sessionPrefix('', id)}context/`))).toEqual([]);
  });

  it('answers 404 for a missing session', async () => {
    expect((await api.post('/v1/sessions/missing-session/compact', {})).status).toBe(404);
  });

  it('writes the summary with a provider model when asked to', async () => {
    const id = await api.session({ model: 'echo', strategies: 'none' });
    await api.post(`/v1/sessions/${id}/turns`, { input: 'hello' });
    const before = provider.requests.length;
    const compacted = await api.post(`/v1/sessions/${id}/compact`, {
      keep_tokens: 0,
      model: 'openai-compatible:fake-model',
      prompt: 'Summarize tersely.',
    });
    expect(compacted.status, JSON.stringify(compacted.body)).toBe(200);
    expect(compacted.body.context).toMatchObject({
      summary: 'Hello! How can I assist you today?',
      model: 'openai-compatible:fake-model',
    });
    const sent = provider.requests[before]!.body;
    expect(sent.messages[0]).toMatchObject({ role: 'system', content: 'Summarize tersely.' });
    expect(sent.messages[1].content).toContain('#1 user: hello');
    expect(sent.tools).toBeUndefined();
  });

  it('is in the OpenAPI document with the summary synthetic value', async () => {
    const document = (await api.get('/openapi.json')).body;
    expect(document.paths['/v1/sessions/{id}/compact'].post).toBeDefined();
    expect(JSON.stringify(document.components.schemas.Item)).toContain('summary');
  });
});

describe('context_too_large', () => {
  it('is a 413 naming the item, with the input stored and the turn closed', async () => {
    const id = await api.session({ model: 'echo', strategies: 'compact', strategy_config: budget });
    const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'z'.repeat(4000) });
    expect(refused.status).toBe(413);
    expect(refused.body.error).toMatchObject({
      code: 'context_too_large',
      details: { item: { seq: 1, index: 0 }, prompt_limit: 800 },
    });
    const page = await api.get(`/v1/sessions/${id}/items`);
    expect(page.body.items).toHaveLength(1);
    // The turn was closed (no turn_in_progress). Now the big message is older than the input,
    // so the next turn compacts it into the summary and goes ahead.
    const next = await api.post(`/v1/sessions/${id}/turns`, { input: 'next' });
    expect(next.status, JSON.stringify(next.body)).toBe(200);
    expect(next.body.context.compaction).toMatchObject({ start_seq: 2, summarized: { first_seq: 1, last_seq: 1 } });
    expect(next.body.context.prompt_tokens).toBeLessThanOrEqual(800);
  });
});

import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { queuedRuns } from '../support/queued-runs.ts';
import { startStrictOpenAI, type StrictProvider } from '../support/fake-providers/strict-providers.ts';
import { createClient, facadeClient, parseSse } from './http-suite.ts';

// An openai: model takes at most 128 tools, as OpenAI's own API (the fake refuses more as it
// does). A turn offering more is refused with a 400 before any model call (a compaction's
// summary neither), before a stream starts and before a background turn is queued: nothing
// of it is stored, and the session goes on.

let openai: StrictProvider;

beforeAll(async () => {
  openai = await startStrictOpenAI((n, index) => `call_${n}${'ab'[index]}`);
});

afterAll(async () => {
  await openai?.close();
});

const harness = () =>
  appHarness(new MemoryStore(), {
    API_TOKEN: 'test-token',
    OPENAI_API_KEY: 'sk-test',
    OPENAI_BASE_URL: openai.baseURL,
    MODEL_MAX_RETRIES: '0',
  });

const GPT = 'openai:gpt-4.1-mini';
const tool = (name: string) => ({ type: 'function' as const, name, parameters: { type: 'object', properties: {} } });
const tooMany = Array.from({ length: 129 }, (_, index) => tool(`tool_${index}`));
const refusal = { code: 'invalid_request', details: { field: 'tools' } };

/** What a session has stored: its turns and items. */
async function stored(api: ReturnType<typeof createClient>, id: string) {
  const turns = (await api.get(`/v1/sessions/${id}/turns?limit=100`)).body.turns;
  const items = (await api.get(`/v1/sessions/${id}/items?limit=100`)).body.items;
  return { turns, items };
}

describe('a turn offering an openai: model more than 128 tools', () => {
  it('is refused before the summary of a turn that compacts first, and the session compacts after', async () => {
    const api = createClient(harness());
    const strategy_config = {
      context_limit: 16000,
      response_reserve: 500,
      compact_trigger_ratio: 0.03,
      compact_keep_ratio: 0.01,
    };
    const id = await api.session({ model: GPT, tools: [tool('get_weather')], strategies: ['compact'] });
    for (const step of [1, 2, 3]) {
      const taken = await api.post(`/v1/sessions/${id}/turns`, { input: `Step ${step}: ${'details '.repeat(150)}` });
      expect(taken.status, JSON.stringify(taken.body)).toBe(200);
    }
    const before = await stored(api, id);
    const sent = openai.requests.length;
    const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'Go on.', tools: tooMany, strategy_config });
    expect(refused.status, JSON.stringify(refused.body)).toBe(400);
    expect(refused.body.error).toMatchObject(refusal);
    expect(openai.requests.length).toBe(sent);
    expect(await stored(api, id)).toEqual(before);
    // The same turn with the session's tools compacts: the refused one would have.
    const compacted = await api.post(`/v1/sessions/${id}/turns`, { input: 'Go on.', strategy_config });
    expect(compacted.status, JSON.stringify(compacted.body)).toBe(200);
    expect(compacted.body.compaction_usage).toBeDefined();
  });

  it('streamed, is a 400 before the stream starts', async () => {
    const api = createClient(harness());
    const id = await api.session({ model: GPT, tools: tooMany });
    const sent = openai.requests.length;
    const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'Weather?', stream: true });
    expect(refused.status, String(refused.body)).toBe(400);
    expect(refused.body.error).toMatchObject(refusal);
    expect(openai.requests.length).toBe(sent);
    expect(await stored(api, id)).toEqual({ turns: [], items: [] });
    const answered = await api.post(`/v1/sessions/${id}/turns`, { input: 'Weather.', tools: [tool('get_weather')] });
    expect(answered.status, JSON.stringify(answered.body)).toBe(200);
  });

  it('in the background, is a 400 and not queued', async () => {
    const api = createClient(harness());
    const id = await api.session({ model: GPT });
    const sent = openai.requests.length;
    const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'Weather?', tools: tooMany, background: true });
    expect(refused.status, JSON.stringify(refused.body)).toBe(400);
    expect(refused.body.error).toMatchObject(refusal);
    expect(openai.requests.length).toBe(sent);
    expect(await stored(api, id)).toEqual({ turns: [], items: [] });
    const answered = await api.post(`/v1/sessions/${id}/turns`, { input: 'Weather.' });
    expect(answered.status, JSON.stringify(answered.body)).toBe(200);
  });

  it("in the background, runs on the request's own model, which takes the session's tools", async () => {
    const api = createClient(harness());
    const id = await api.session({ model: GPT, tools: tooMany });
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'Hello.', model: 'echo', background: true });
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    const events = parseSse((await api.get(`/v1/sessions/${id}/turns/1/events`)).body);
    expect(events.at(-1), JSON.stringify(events.at(-1))).toMatchObject({ event: 'turn.completed' });
  });

  it('through the facade, streamed, is a 400 the openai client throws (responses and chat completions)', async () => {
    const client = facadeClient(harness());
    const sent = openai.requests.length;
    const tools = tooMany.map((offered) => ({ ...offered, strict: false }));
    for (const store of [true, false]) {
      const response = await client.responses
        .create({ model: GPT, stream: true, store, tools, input: 'Weather?' })
        .catch((error: unknown) => error);
      expect(response, `store: ${store}`).toBeInstanceOf(OpenAI.BadRequestError);
      expect(response).toMatchObject({ status: 400, param: 'tools' });
    }
    const chat = await client.chat.completions
      .create({
        model: GPT,
        stream: true,
        messages: [{ role: 'user', content: 'Weather?' }],
        tools: tooMany.map(({ name, parameters }) => ({ type: 'function' as const, function: { name, parameters } })),
      })
      .catch((error: unknown) => error);
    expect(chat).toBeInstanceOf(OpenAI.BadRequestError);
    expect(chat).toMatchObject({ status: 400, param: 'tools' });
    expect(openai.requests.length).toBe(sent);
  });
});

describe('a keyed request an openai: model took before its tools went over 128', () => {
  it('queued behind a busy turn, its retry under the key is the same 202, not a 400', async () => {
    const environment = {
      API_TOKEN: 'test-token',
      OPENAI_API_KEY: 'sk-test',
      OPENAI_BASE_URL: openai.baseURL,
      MODEL_MAX_RETRIES: '0',
    };
    const store = new MemoryStore();
    const { options, drain } = queuedRuns({ store: () => store, readEnvironment: (c) => c.env ?? {} }, environment);
    const api = createClient(appHarness(store, environment, options));
    const id = await api.session({ model: GPT, tools: [tool('get_weather')], on_busy: 'enqueue' });
    // Its runner has not come: the background turn holds the session.
    const holder = await api.post(`/v1/sessions/${id}/turns`, { input: 'Hold.', model: 'echo', background: true });
    expect(holder.status, JSON.stringify(holder.body)).toBe(202);
    const key = { 'idempotency-key': `queued-${id}` };
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'Weather?' }, key);
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    await drain();
    const patched = await api.patch(`/v1/sessions/${id}`, { tools: tooMany });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: 'Weather?' }, key);
    expect(again.status, JSON.stringify(again.body)).toBe(202);
    expect(again.body).toEqual(queued.body);
  });
});

describe('a response offering an openai: model more than 128 tools, on a stored conversation', () => {
  it("is refused with the conversation's instructions as they were", async () => {
    const app = harness();
    const client = facadeClient(app);
    const api = createClient(app);
    const first = await client.responses.create({ model: GPT, instructions: 'Be brief.', input: 'Hello.' });
    const tools = tooMany.map((offered) => ({ ...offered, strict: false }));
    const refused = await client.responses
      .create({ model: GPT, previous_response_id: first.id, instructions: 'Be long.', tools, input: 'Weather?' })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused).toMatchObject({ status: 400, param: 'tools' });
    const conversation = (await api.get(`/v1/sessions/${first.conversation!.id}`)).body;
    expect(conversation.instructions).toBe('Be brief.');
  });
});

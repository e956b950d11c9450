import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SessionLog } from '../support/session-log.ts';
import type { NewSession } from '../../lib/session/fields.ts';
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

const harness = (store = new MemoryStore()) =>
  appHarness(store, {
    API_TOKEN: 'test-token',
    OPENAI_API_KEY: 'sk-test',
    OPENAI_BASE_URL: openai.baseURL,
    MODEL_MAX_RETRIES: '0',
  });

const GPT = 'openai:gpt-4.1-mini';
const tool = (name: string) => ({ type: 'function' as const, name, parameters: { type: 'object', properties: {} } });
const tooMany = Array.from({ length: 129 }, (_, index) => tool(`tool_${index}`));
const refusal = { code: 'invalid_request', details: { field: 'tools' } };

/** A session its create now refuses (an openai: model, more than 128 tools), as stored before it did. */
async function storedBefore(store: MemoryStore, fields: NewSession): Promise<string> {
  return (await new SessionLog(store).create(fields)).id;
}

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
    const store = new MemoryStore();
    const api = createClient(harness(store));
    const id = await storedBefore(store, { id: 'streamed', model: GPT, tools: tooMany });
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
    const store = new MemoryStore();
    const api = createClient(harness(store));
    const id = await storedBefore(store, { id: 'background', model: GPT, tools: tooMany });
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

describe("a keyed request an openai: model took before the session's tools went over 128", () => {
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
    const id = await api.session({ tools: [tool('get_weather')], on_busy: 'enqueue' });
    // Its runner has not come: the background turn holds the session.
    const holder = await api.post(`/v1/sessions/${id}/turns`, { input: 'Hold.', model: 'echo', background: true });
    expect(holder.status, JSON.stringify(holder.body)).toBe(202);
    const key = { 'idempotency-key': `queued-${id}` };
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'Weather?', model: GPT }, key);
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    await drain();
    const patched = await api.patch(`/v1/sessions/${id}`, { tools: tooMany });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: 'Weather?', model: GPT }, key);
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

describe('a session whose openai: model would be offered more than 128 tools', () => {
  const modelRefusal = { code: 'invalid_request', details: { field: 'model' } };

  it('is refused at its create and its import, nothing stored', async () => {
    const api = createClient(harness());
    const created = await api.post('/v1/sessions', { id: 'over-limit', model: GPT, tools: tooMany });
    expect(created.status, JSON.stringify(created.body.error)).toBe(400);
    expect(created.body.error).toMatchObject(refusal);
    expect(created.body.error.message).toBe(`model ${GPT} takes at most 128 tools, offered 129`);
    expect((await api.get('/v1/sessions/over-limit')).status).toBe(404);
    // The same tools on a model that takes them are a session, whose export to GPT is refused.
    const id = await api.session({ tools: tooMany });
    const exported = await api.get(`/v1/sessions/${id}/export`);
    const [header, ...rest] = (exported.body as string).split('\n');
    const renamed = [JSON.stringify({ ...JSON.parse(header!), id: `${id}-gpt`, model: GPT }), ...rest].join('\n');
    const imported = await api.post('/v1/sessions/import', renamed, { 'content-type': 'application/x-ndjson' });
    expect(imported.status, JSON.stringify(imported.body.error)).toBe(400);
    // Named in the header line, as the import names any field of it.
    expect(imported.body.error).toMatchObject({ code: 'invalid_request', details: { field: 'line 1.tools' } });
    expect((await api.get(`/v1/sessions/${id}-gpt`)).status).toBe(404);
  });

  it('is refused at a PATCH of its model or its tools, naming the field sent, the session as it was', async () => {
    const api = createClient(harness());
    const many = await api.session({ tools: tooMany });
    const toGpt = await api.patch(`/v1/sessions/${many}`, { model: GPT });
    expect(toGpt.status, JSON.stringify(toGpt.body.error)).toBe(400);
    expect(toGpt.body.error).toMatchObject(modelRefusal);
    const few = await api.session({ model: GPT, tools: [tool('get_weather')] });
    const more = await api.patch(`/v1/sessions/${few}`, { tools: tooMany });
    expect(more.status, JSON.stringify(more.body.error)).toBe(400);
    expect(more.body.error).toMatchObject(refusal);
    expect((await api.get(`/v1/sessions/${many}`)).body).toMatchObject({ model: null });
    expect((await api.get(`/v1/sessions/${few}`)).body.tools).toHaveLength(1);
    // Both at once, within the limit, and a PATCH of neither, are taken.
    const both = await api.patch(`/v1/sessions/${many}`, { model: GPT, tools: tooMany.slice(0, 128) });
    expect(both.status, JSON.stringify(both.body.error)).toBe(200);
    const named = await api.patch(`/v1/sessions/${few}`, { metadata: { name: 'few' } });
    expect(named.status, JSON.stringify(named.body.error)).toBe(200);
  });

  it("is refused at a fork setting a model that takes fewer than the parent's tools", async () => {
    const api = createClient(harness());
    const id = await api.session({ tools: tooMany });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'Hello.' })).status).toBe(200);
    const fork = await api.post(`/v1/sessions/${id}/fork`, { at_turn: 1, id: `${id}-gpt`, model: GPT });
    expect(fork.status, JSON.stringify(fork.body.error)).toBe(400);
    expect(fork.body.error).toMatchObject(modelRefusal);
    expect((await api.get(`/v1/sessions/${id}-gpt`)).status).toBe(404);
  });
});

describe('a count or a preview of a prompt offering an openai: model more than 128 tools', () => {
  it('counted (responses/input_tokens), is the 400 the response is refused with, stored or not', async () => {
    const app = harness();
    const api = createClient(app);
    const first = await facadeClient(app).responses.create({ model: GPT, input: 'Hello.' });
    const tools = tooMany.map((offered) => ({ ...offered, strict: false }));
    const sent = openai.requests.length;
    for (const asked of [
      { store: false },
      { previous_response_id: first.id },
      { conversation: first.conversation!.id },
    ]) {
      const body = { model: GPT, tools, input: 'Weather?', ...asked };
      const created = await api.post('/v1/responses', body);
      expect(created.status, JSON.stringify(created.body)).toBe(400);
      const { store: _store, ...countable } = body as typeof body & { store?: boolean };
      const counted = await api.post('/v1/responses/input_tokens', countable);
      expect(counted.status, JSON.stringify(asked)).toBe(400);
      expect(counted.body).toEqual(created.body);
    }
    expect(openai.requests.length).toBe(sent);
  });

  it("previewed, shows the prompt with the turn's refusal, after a spent budget's", async () => {
    const store = new MemoryStore();
    const api = createClient(harness(store));
    const id = await storedBefore(store, { id: 'previewed', model: GPT, tools: tooMany });
    const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'Weather?' });
    expect(refused.status, JSON.stringify(refused.body)).toBe(400);
    const preview = await api.get(`/v1/sessions/${id}/prompt`);
    expect(preview.status, JSON.stringify(preview.body)).toBe(200);
    expect(preview.body.refused).toEqual({ status: refused.status, ...refused.body.error });
    // A spent budget refuses the turn first: the preview names that refusal.
    expect((await api.patch(`/v1/sessions/${id}`, { budget: { max_turns: 0 } })).status).toBe(200);
    const spent = await api.post(`/v1/sessions/${id}/turns`, { input: 'Weather?' });
    expect(spent.status, JSON.stringify(spent.body)).toBe(402);
    const previewed = await api.get(`/v1/sessions/${id}/prompt`);
    expect(previewed.body.refused).toEqual({ status: spent.status, ...spent.body.error });
    // Tools the model takes: nothing refuses the next turn.
    const fewer = { budget: null, tools: tooMany.slice(0, 128) };
    expect((await api.patch(`/v1/sessions/${id}`, fewer)).status).toBe(200);
    expect((await api.get(`/v1/sessions/${id}/prompt`)).body.refused).toBeNull();
  });
});

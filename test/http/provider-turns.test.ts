import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { CONTEXT_NOTICE_TEXT } from '../../lib/strategies/context-notice.ts';
import {
  fixture,
  startFakeProvider,
  type FakeProvider,
  type RecordedRequest,
} from '../support/fake-providers/fake-provider-server.ts';
import { anthropicStreamOf } from '../support/fake-providers/anthropic-stream.ts';
import { recordedThinking, thinksToCall } from '../support/fake-providers/thinking.ts';
import { parseResponseId } from '../../lib/openai/ids.ts';
import { createClient, facadeClient, parseSse, TOKEN, type HttpHarness } from './http-suite.ts';

// Turns through the whole app against fake providers on loopback that answer with recorded
// responses from the providers' docs: tools offered, calls returned as function_call items,
// streaming, and where Anthropic's cache_control lands for a compacted prompt.
const reply = (request: RecordedRequest, json: string, sse: string) =>
  request.body?.stream ? { sse: fixture(sse) } : { json: JSON.parse(fixture(json)) };

let openai: FakeProvider;
let anthropic: FakeProvider;

beforeAll(async () => {
  openai = await startFakeProvider((request) =>
    reply(request, 'openai-chat-tool-call.json', 'openai-chat-tool-call.sse'),
  );
  anthropic = await startFakeProvider((request) =>
    thinksToCall(request)
      ? reply(request, 'anthropic-message-thinking-tool-use.json', 'anthropic-message-thinking-tool-use.sse')
      : reply(request, 'anthropic-message-text.json', 'anthropic-message-text.sse'),
  );
});

afterAll(async () => {
  await openai?.close();
  await anthropic?.close();
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
  OPENAI_COMPATIBLE_BASE_URL: openai.baseURL,
  ANTHROPIC_API_KEY: 'test-key',
  ANTHROPIC_BASE_URL: anthropic.baseURL,
  MODEL_MAX_RETRIES: '0',
});
const harness: HttpHarness = {
  fetch: async (path, init) => app.request(path, init, environment()),
  fetchWithEnv: async (overrides, path, init) => app.request(path, init, { ...environment(), ...overrides }),
  store,
  keyPrefix: '',
  logged,
};
const api = createClient(harness);

const weatherTool = {
  type: 'function',
  name: 'get_current_weather',
  description: 'Current weather',
  parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
};

describe('openai-compatible through the app', () => {
  it('offers the session tools and returns the call as a function_call item', async () => {
    const id = await api.session({
      model: 'openai-compatible:fake-model',
      instructions: 'Be brief.',
      tools: [weatherTool],
    });
    const response = await api.post(`/v1/sessions/${id}/turns`, { input: 'Weather in Boston?' });
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    expect(response.body.output).toEqual([
      {
        type: 'function_call',
        call_id: 'call_abc123',
        name: 'get_current_weather',
        arguments: expect.any(String),
        seq: 2,
      },
    ]);
    expect(JSON.parse(response.body.output[0].arguments)).toEqual({ location: 'Boston, MA' });
    expect(response.body.usage).toEqual({
      input_tokens: 82,
      cached_input_tokens: 0,
      cache_write_tokens: 0,
      output_tokens: 17,
      reasoning_tokens: 0,
      cost_usd: null,
    });
    const sent = openai.requests.at(-1)!.body;
    expect(sent.model).toBe('fake-model');
    expect(sent.messages[0]).toEqual({ role: 'system', content: 'Be brief.' });
    expect(sent.messages.at(-1)).toEqual({ role: 'user', content: 'Weather in Boston?' });
    expect(sent.tools.map((tool: any) => tool.function.name)).toEqual(['get_current_weather']);
    const stored = await api.get(`/v1/sessions/${id}/items`);
    expect(stored.body.items[0]).toMatchObject({ type: 'function_call', call_id: 'call_abc123', seq: 2 });
  });

  it("streams the call's argument pieces, then the call as output_item.done; its journal resumes", async () => {
    const id = await api.session({ model: 'openai-compatible:fake-model' });
    const response = await api.post(`/v1/sessions/${id}/turns`, {
      input: 'Weather?',
      stream: true,
      tools: [weatherTool],
    });
    const events = parseSse(response.body);
    expect(events[0]!.event).toBe('turn.started');
    expect(events.at(-1)!.event).toBe('turn.completed');
    const done = events.filter((event) => event.event === 'output_item.done');
    expect(done.map((event) => event.data.item.type)).toEqual(['function_call']);
    const streamedName = /"name":\s*"([^"]+)"/.exec(fixture('openai-chat-tool-call.sse'))![1];
    expect(done[0]!.data.item).toMatchObject({ name: streamedName, seq: 2 });
    expect(events.at(-1)!.data.output).toEqual([done[0]!.data.item]);
    expect(openai.requests.at(-1)!.body.stream).toBe(true);
    expect(openai.requests.at(-1)!.body.tools).toHaveLength(1);
    const call = done[0]!.data.item;
    // Between the call's start and its whole item, one event per piece the provider sent.
    expect(events.map((event) => event.event)).toEqual([
      'turn.started',
      'function_call.started',
      ...Array.from({ length: 7 }, () => 'function_call_arguments.delta'),
      'output_item.done',
      'turn.completed',
    ]);
    expect(events[1]!.data).toEqual({ call_id: call.call_id, name: call.name });
    const pieces = events.filter((event) => event.event === 'function_call_arguments.delta');
    expect(pieces.every((event) => event.data.call_id === call.call_id)).toBe(true);
    expect(pieces.map((event) => event.data.delta).join('')).toBe(call.arguments);
    expect(JSON.parse(call.arguments)).toEqual({ location: 'Paris, France' });
    // The journal holds every piece, numbered as the live stream: a reader after N gets the rest exactly.
    for (const after of [0, 4, 9]) {
      const replayed = await harness.fetch(`/v1/sessions/${id}/turns/1/events?after=${after}`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(parseSse(await replayed.text())).toEqual(events.slice(after));
    }
  });
});

describe('anthropic through the app', () => {
  it('places cache_control on the instructions, the last two blocks and the context notice', async () => {
    const id = await api.session({
      model: 'anthropic:claude-sonnet-4-5',
      instructions: 'You are careful.',
      strategies: ['shorten_tools_epoch', 'inbox'],
      strategy_config: {
        epoch_tool_call_threshold: 4,
        epoch_full_tool_calls: 2,
        epoch_compacted_tool_calls: 3,
        epoch_size: 2,
      },
    });
    const items: unknown[] = [{ type: 'message', role: 'user', content: 'Read the pages.' }];
    for (let index = 1; index <= 10; index++) {
      items.push({ type: 'function_call', call_id: `toolu_${index}`, name: 'read', arguments: `{"page":${index}}` });
      items.push({ type: 'function_call_output', call_id: `toolu_${index}`, output: `page ${index} `.repeat(80) });
    }
    await api.post(`/v1/sessions/${id}/items`, { items });
    const response = await api.post(`/v1/sessions/${id}/turns`, { input: 'Summarize.' });
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    expect(response.body.output).toEqual([
      { type: 'message', role: 'assistant', content: 'Hi! My name is Claude.', seq: 23 },
    ]);
    expect(response.body.context.compacted + response.body.context.dropped).toBeGreaterThan(0);

    const sent = anthropic.requests.at(-1)!.body;
    const marked: { message: number; block: any }[] = [];
    sent.messages.forEach((message: any, index: number) => {
      if (typeof message.content === 'string') return;
      for (const block of message.content) if (block.cache_control) marked.push({ message: index, block });
    });
    expect(sent.system.at(-1).cache_control).toEqual({ type: 'ephemeral' });
    expect(marked).toHaveLength(3);
    expect(marked[0]!.block).toMatchObject({
      type: 'text',
      text: CONTEXT_NOTICE_TEXT,
      cache_control: { type: 'ephemeral' },
    });
    // The sliding anchors: the last two blocks of the prompt.
    const blocks = sent.messages.flatMap((message: any) => message.content);
    expect(marked.slice(1).map(({ block }) => block)).toEqual(blocks.slice(-2));
    // Everything after the breakpoint is the part that changes from turn to turn.
    const last = sent.messages.at(-1);
    expect(JSON.stringify(last)).toContain('Summarize.');
  });
});

const thinkingTools = [
  {
    type: 'function',
    name: 'get_weather',
    description: 'Current weather',
    parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
  },
];
const { thinking, signature, redacted } = recordedThinking;
const reasoning = [
  {
    type: 'reasoning',
    summary: [{ type: 'summary_text', text: thinking }],
    encrypted_content: JSON.stringify({ anthropic: { signature } }),
  },
  { type: 'reasoning', summary: [], encrypted_content: JSON.stringify({ anthropic: { redactedData: redacted } }) },
];

describe('reasoning kept across a tool loop', () => {
  it("sends the loop's thinking blocks back unchanged with thinking on, and keeps them in the session", async () => {
    const model = 'anthropic:claude-sonnet-4-5';
    const first = await api.post('/v1/responses', {
      model,
      input: 'Weather in Paris?',
      tools: thinkingTools,
      reasoning: { effort: 'medium' },
    });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const session = parseResponseId(first.body.id)!.sessionId;
    // The call's reasoning first, as reasoning items (no encrypted_content: the conversation keeps it).
    const [thought, redactedThought, call] = first.body.output;
    expect(thought).toEqual({
      type: 'reasoning',
      id: `rs_${session}_2_1`,
      summary: [{ type: 'summary_text', text: thinking }],
      status: 'completed',
    });
    expect(redactedThought).toEqual({ type: 'reasoning', id: `rs_${session}_2_2`, summary: [], status: 'completed' });
    expect(call).toMatchObject({ type: 'function_call', id: `fc_${session}_2`, call_id: recordedThinking.callId });
    expect(first.body.output).toHaveLength(3);
    expect((await api.get(`/v1/responses/${first.body.id}`)).body.output).toEqual(first.body.output);
    const sent = anthropic.requests.length;
    const second = await api.post('/v1/responses', {
      model,
      previous_response_id: first.body.id,
      // The reasoning sent back (as returned, and by reference) is taken and left out: the conversation has it.
      input: [
        thought,
        { type: 'item_reference', id: redactedThought.id },
        { type: 'function_call_output', call_id: call.call_id, output: '18C, sunny' },
      ],
      tools: thinkingTools,
      reasoning: { effort: 'medium' },
    });
    expect(second.status, JSON.stringify(second.body)).toBe(200);
    const refused = await api.post('/v1/responses', {
      model,
      previous_response_id: second.body.id,
      input: [{ ...thought, signature: 'x' }],
    });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body.error)).toContain('signature');
    const body = anthropic.requests[sent]!.body;
    expect(body.thinking?.type).toBe('enabled');
    expect(body.messages[1].role).toBe('assistant');
    expect(body.messages[1].content.slice(0, 2)).toEqual([
      { type: 'thinking', thinking, signature },
      { type: 'redacted_thinking', data: redacted },
    ]);

    // The session keeps the reasoning on the call; an export and an import keep it.
    const items = await api.get(`/v1/sessions/${session}/items`);
    const stored = items.body.items.find((item: { type: string }) => item.type === 'function_call');
    expect(stored.reasoning).toEqual(reasoning);
    const exported = await api.get<string>(`/v1/sessions/${session}/export`);
    expect(exported.status).toBe(200);
    const copy = exported.body.replace(`"id":"${session}"`, '"id":"reasoning-copy"');
    const imported = await api.call('POST', '/v1/sessions/import', copy, { 'content-type': 'application/x-ndjson' });
    expect(imported.status, JSON.stringify(imported.body)).toBe(201);
    expect((await api.get('/v1/sessions/reasoning-copy/items')).body.items).toEqual(items.body.items);
    expect((await api.get<string>('/v1/sessions/reasoning-copy/export')).body).toBe(copy);
  });

  it("takes an assistant item's reasoning as input, and refuses a user message carrying some", async () => {
    const id = await api.session({ model: 'anthropic:claude-sonnet-4-5' });
    const appended = await api.post(`/v1/sessions/${id}/items`, {
      items: [
        { type: 'message', role: 'user', content: 'Weather?' },
        { type: 'function_call', call_id: 'c1', name: 'get_weather', arguments: '{}', reasoning },
      ],
    });
    expect(appended.status, JSON.stringify(appended.body)).toBe(201);
    const listed = await api.get(`/v1/sessions/${id}/items`);
    // Newest first: the call, then the message.
    expect(listed.body.items[0].reasoning).toEqual(reasoning);
    const refused = await api.post(`/v1/sessions/${id}/items`, {
      items: [{ type: 'message', role: 'user', content: 'Hi', reasoning }],
    });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body.error)).toContain('reasoning');
    const unknown = await api.post(`/v1/sessions/${id}/items`, {
      items: [
        {
          type: 'function_call',
          call_id: 'c2',
          name: 'get_weather',
          arguments: '{}',
          reasoning: [{ type: 'reasoning', summary: [], signature: 'x' }],
        },
      ],
    });
    expect(unknown.status).toBe(400);
    expect(JSON.stringify(unknown.body.error)).toContain('signature');
  });

  it('streams a reasoning item before the call, in the events the official client reads', async () => {
    const client = facadeClient(harness);
    const stream = client.responses.stream({
      model: 'anthropic:claude-sonnet-4-5',
      input: 'Weather in Paris?',
      tools: thinkingTools.map((tool) => ({ ...tool, type: 'function' as const, strict: false })),
      reasoning: { effort: 'medium' },
    });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const response = await stream.finalResponse();
    const session = parseResponseId(response.id)!.sessionId;
    const id = `rs_${session}_2_1`;
    const at = { item_id: id, output_index: 0, summary_index: 0 };
    const part = { type: 'summary_text', text: thinking };
    expect(events.slice(2, 8)).toEqual([
      expect.objectContaining({
        type: 'response.output_item.added',
        output_index: 0,
        item: { type: 'reasoning', id, summary: [], status: 'in_progress' },
      }),
      expect.objectContaining({ type: 'response.reasoning_summary_part.added', ...at, part: { ...part, text: '' } }),
      expect.objectContaining({ type: 'response.reasoning_summary_text.delta', ...at, delta: thinking }),
      expect.objectContaining({ type: 'response.reasoning_summary_text.done', ...at, text: thinking }),
      expect.objectContaining({ type: 'response.reasoning_summary_part.done', ...at, part }),
      expect.objectContaining({
        type: 'response.output_item.done',
        output_index: 0,
        item: { type: 'reasoning', id, summary: [part], status: 'completed' },
      }),
    ]);
    expect(events[8]).toMatchObject({
      type: 'response.output_item.added',
      output_index: 1,
      item: { id: `fc_${session}_2` },
    });
    expect(response.output.map((item) => [item.type, item.id])).toEqual([
      ['reasoning', id],
      ['function_call', `fc_${session}_2`],
    ]);
    // As retrieved: the items the stream ended with (the client adds parsed_arguments to a call).
    const retrieved = (await api.get(`/v1/responses/${response.id}`)).body.output;
    expect(retrieved[0]).toEqual(response.output[0]);
    expect(retrieved.map((item: { id: string }) => item.id)).toEqual([id, `fc_${session}_2`]);
  });

  it('stores the same items for an answer streamed or not, reasoning it ends with on an empty message', async () => {
    for (const name of ['anthropic-message-thinking-interleaved.json', 'anthropic-message-thinking-only.json']) {
      const recorded = await startFakeProvider((request) =>
        request.body?.stream ? { sse: anthropicStreamOf(fixture(name)) } : { text: fixture(name) },
      );
      const overrides = { ANTHROPIC_BASE_URL: recorded.baseURL };
      const client = createClient({ ...harness, fetch: (path, init) => harness.fetchWithEnv(overrides, path, init) });
      const turn = async (stream: boolean) => {
        const id = await client.session({ model: 'anthropic:claude-sonnet-4-5' });
        const body = { input: 'Weather in Paris?', tools: [weatherTool], stream };
        const key = { 'idempotency-key': `k-${id}` };
        const response = await client.post(`/v1/sessions/${id}/turns`, body, key);
        expect(response.status, name).toBe(200);
        if (stream) {
          // Replayed, the turn streams the same reasoning and items, and no text where none was.
          const replayed = parseSse((await client.post(`/v1/sessions/${id}/turns`, body, key)).body);
          const done = (events: { event: string; data: any }[]) =>
            events.filter((each) => each.event.endsWith('.done')).map((each) => each.data.item);
          expect(done(replayed), name).toEqual(done(parseSse(response.body)));
          const texts = replayed.filter((each) => each.event === 'output_text.delta').map((each) => each.data.delta);
          expect(texts, name).not.toContain('');
        }
        const items = (await client.get(`/v1/sessions/${id}/items`)).body.items;
        const stored = items
          .map(({ created_at: _at, ...item }: { created_at: string; seq: number }) => item)
          .sort((a: { seq: number }, b: { seq: number }) => a.seq - b.seq);
        return { stored, events: stream ? parseSse(response.body) : [] };
      };
      try {
        const generated = await turn(false);
        const streamed = await turn(true);
        expect(streamed.stored, name).toEqual(generated.stored);
        // Every block streamed as reasoning.done is stored, on the item after it.
        const done = streamed.events
          .filter((event) => event.event === 'reasoning.done')
          .map((event) => event.data.item);
        expect(done.length, name).toBeGreaterThan(0);
        expect(done, name).toEqual(streamed.stored.flatMap((item: { reasoning?: unknown[] }) => item.reasoning ?? []));
      } finally {
        await recorded.close();
      }
    }
  });
});

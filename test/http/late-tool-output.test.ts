import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MISSING_OUTPUT_TEXT } from '../../lib/models/convert-to-model-messages.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import {
  startFakeProvider,
  type FakeProvider,
  type FakeReply,
} from '../support/fake-providers/fake-provider-server.ts';
import { createClient, TOKEN, type HttpHarness } from './http-suite.ts';

// A fake Chat Completions server that enforces OpenAI's rule: "An assistant message with
// 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'" (400).
function answer(body: any): FakeReply {
  const messages: any[] = body.messages;
  for (const [index, message] of messages.entries()) {
    if (message.role !== 'assistant' || !message.tool_calls) continue;
    const open = new Set(message.tool_calls.map((call: any) => call.id));
    for (let next = index + 1; messages[next]?.role === 'tool'; next++) open.delete(messages[next].tool_call_id);
    if (open.size > 0) {
      return {
        status: 400,
        json: {
          error: {
            message:
              "An assistant message with 'tool_calls' must be followed by tool messages responding to each " +
              `'tool_call_id'. The following tool_call_ids did not have response messages: ${[...open].join(', ')}`,
            type: 'invalid_request_error',
            param: `messages.[${index}].role`,
            code: null,
          },
        },
      };
    }
  }
  const first = messages.filter((message) => message.role === 'assistant').length === 0;
  return {
    json: {
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 1,
      model: 'fake',
      choices: [
        {
          index: 0,
          message: first
            ? {
                role: 'assistant',
                content: null,
                tool_calls: ['call_a', 'call_b'].map((id) => ({
                  id,
                  type: 'function',
                  function: { name: 'get_weather', arguments: '{"location":"x"}' },
                })),
              }
            : { role: 'assistant', content: 'ok' },
          finish_reason: first ? 'tool_calls' : 'stop',
        },
      ],
      usage: { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 },
    },
  };
}

let provider: FakeProvider;
/** The messages of each request the provider got. */
const received: unknown[][] = [];
beforeAll(async () => {
  provider = await startFakeProvider((request) => {
    received.push((request.body as { messages: unknown[] }).messages);
    return answer(request.body);
  });
});
afterAll(async () => {
  await provider?.close();
});

const store = new MemoryStore();
const app = createApp({ store: () => store, readEnvironment: (c) => c.env ?? {}, log: () => {} });
const harness: HttpHarness = {
  fetch: async (path, init) =>
    app.request(path, init, {
      API_TOKEN: TOKEN,
      OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
      MODEL_MAX_RETRIES: '0',
    }),
  fetchWithEnv: async () => {
    throw new Error('unused');
  },
  store,
  keyPrefix: '',
  logged: [],
};
const api = createClient(harness);

describe('an open call answered in a later turn', () => {
  it('keeps the session usable when a call is answered a turn after another call of its response', async () => {
    const id = await api.session({
      model: 'openai-compatible:fake',
      tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: {} } }],
    });
    const first = await api.post(`/v1/sessions/${id}/turns`, { input: 'Weather in Paris and Rome?' });
    expect(first.status).toBe(200);
    expect(first.body.output.map((item: any) => item.call_id)).toEqual(['call_a', 'call_b']);
    // call_b stays open: the turn accepts an answer to call_a alone...
    const second = await api.post(`/v1/sessions/${id}/turns`, {
      input: [{ type: 'function_call_output', call_id: 'call_a', output: '18C' }],
    });
    expect(second.status, JSON.stringify(second.body)).toBe(200);
    // ...and the answer to call_b a turn later (docs/API.md: an output must answer an open call).
    const third = await api.post(`/v1/sessions/${id}/turns`, {
      input: [{ type: 'function_call_output', call_id: 'call_b', output: '25C' }],
    });
    expect(third.status, JSON.stringify(third.body)).toBe(200);
    // Every later turn sends the same history.
    const fourth = await api.post(`/v1/sessions/${id}/turns`, { input: 'Thanks' });
    expect(fourth.status, JSON.stringify(fourth.body)).toBe(200);
  });

  it('sends calls left open where they stand, each request beginning with the one before', async () => {
    const id = await api.session({
      model: 'openai-compatible:fake',
      tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: {} } }],
    });
    const from = received.length;
    const inputs = [
      'Weather in Paris and Rome?',
      'never mind',
      'and again',
      [
        { type: 'function_call_output', call_id: 'call_a', output: '18C' },
        { type: 'function_call_output', call_id: 'call_b', output: '25C' },
      ],
      'Thanks',
    ];
    for (const input of inputs) {
      const response = await api.post(`/v1/sessions/${id}/turns`, { input });
      expect(response.status, JSON.stringify(response.body)).toBe(200);
    }
    const requests = received.slice(from);
    expect(requests).toHaveLength(inputs.length);
    for (let turn = 1; turn < requests.length; turn++)
      expect(requests[turn]!.slice(0, requests[turn - 1]!.length)).toEqual(requests[turn - 1]);
    // The calls, answered by placeholders where they stand; the outputs, after other items, as user text.
    expect(requests[1]!.slice(1, 4)).toMatchObject([
      { role: 'assistant', tool_calls: [{ id: 'call_a' }, { id: 'call_b' }] },
      { role: 'tool', tool_call_id: 'call_a', content: MISSING_OUTPUT_TEXT },
      { role: 'tool', tool_call_id: 'call_b', content: MISSING_OUTPUT_TEXT },
    ]);
    expect(requests[3]!.slice(-2)).toMatchObject([
      { role: 'user', content: 'Output of tool call call_a:\n18C' },
      { role: 'user', content: 'Output of tool call call_b:\n25C' },
    ]);
  });
});

describe('an open call a compaction summarized, answered after it', () => {
  it('is sent as user text where its output stands, in the turn and after, as GET /prompt shows it', async () => {
    const id = await api.session({
      model: 'openai-compatible:fake',
      tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: {} } }],
    });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'Weather in Paris and Rome?' })).status).toBe(200);
    const answered = await api.post(`/v1/sessions/${id}/turns`, {
      input: [{ type: 'function_call_output', call_id: 'call_a', output: '18C' }],
    });
    expect(answered.status, JSON.stringify(answered.body)).toBe(200);
    // call_b, still open, is summarized as interrupted.
    const compacted = await api.post(`/v1/sessions/${id}/compact`, { model: 'echo', keep_tokens: 0 });
    expect(compacted.status, JSON.stringify(compacted.body)).toBe(200);
    expect(compacted.body.context).toMatchObject({ start_seq: 6, interrupted: ['call_b'] });

    const from = received.length;
    const late = await api.post(`/v1/sessions/${id}/turns`, {
      input: [{ type: 'function_call_output', call_id: 'call_b', output: '25C' }],
    });
    expect(late.status, JSON.stringify(late.body)).toBe(200);
    const asText = { role: 'user', content: 'Output of tool call call_b:\n25C' };
    // The summary, then the late output as user text (the request's first message is the summary).
    expect(received[from]!.slice(0, 2)).toMatchObject([
      { role: 'user', content: expect.stringContaining('tool call get_weather') },
      asText,
    ]);
    const items = await api.get(`/v1/sessions/${id}/turns/${late.body.turn}/items`);
    expect(items.body.items.find((item: { seq: number }) => item.seq === 6)).toMatchObject({
      type: 'function_call_output',
      treatment: 'whole',
    });
    const preview = await api.get(`/v1/sessions/${id}/prompt`);
    expect(preview.status).toBe(200);
    expect(preview.body.items[1]).toMatchObject({ type: 'function_call_output', call_id: 'call_b', seq: 6 });
    const next = await api.post(`/v1/sessions/${id}/turns`, { input: 'Thanks' });
    expect(next.status, JSON.stringify(next.body)).toBe(200);
    expect(received.at(-1)!.slice(0, received[from]!.length)).toEqual(received[from]);
  });
});

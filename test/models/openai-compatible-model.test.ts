import { afterEach, describe, expect, it } from 'vitest';
import type { PromptItem, Tool } from '../../lib/items.ts';
import type { ModelRequest } from '../../lib/models/model.ts';
import { resolveModel, type ModelEnvironment } from '../../lib/models/resolve-model.ts';
import { collectStream, streamedText } from '../support/fake-providers/collect-stream.ts';
import { toolLoopPrompt, weatherTool } from '../support/fake-providers/tool-loop.ts';
import {
  fixture,
  startFakeProvider,
  type FakeProvider,
  type FakeReply,
  type RecordedRequest,
} from '../support/fake-providers/fake-provider-server.ts';

const toolLoop = toolLoopPrompt('call_1');

let provider: FakeProvider | undefined;
afterEach(async () => {
  await provider?.close();
  provider = undefined;
});

async function start(reply: (request: RecordedRequest) => FakeReply, settings: ModelEnvironment = {}) {
  provider = await startFakeProvider(reply);
  const model = resolveModel('openai-compatible:test-model', {
    OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
    OPENAI_COMPATIBLE_API_KEY: 'sk-test',
    MODEL_MAX_RETRIES: '0',
    ...settings,
  });
  return { model, requests: provider.requests };
}

const byStream =
  (json: string, sse: string) =>
  (request: RecordedRequest): FakeReply =>
    request.body.stream ? { sse: fixture(sse) } : { text: fixture(json) };

const request = (prompt: PromptItem[], tools: Tool[] = []): ModelRequest => ({ prompt, tools });

describe('openai-compatible adapter against a fake chat completions server', () => {
  it('generates text and reports usage from a non-streaming answer', async () => {
    const { model, requests } = await start(byStream('openai-chat-text.json', 'openai-chat-text.sse'));
    const result = await model.generate(request([{ type: 'message', role: 'user', content: 'Hello' }]));
    expect(result).toEqual({
      output: [{ type: 'message', role: 'assistant', content: 'Hello! How can I assist you today?' }],
      usage: { input_tokens: 19, output_tokens: 10 },
    });
    expect(requests).toHaveLength(1);
    expect(requests[0]!.path).toBe('/v1/chat/completions');
    expect(requests[0]!.headers.authorization).toBe('Bearer sk-test');
    expect(requests[0]!.body).toMatchObject({
      model: 'test-model',
      messages: [{ role: 'user', content: 'Hello' }],
    });
    expect(requests[0]!.body.tools).toBeUndefined();
  });

  it('streams text deltas, then the finished message, then done with usage', async () => {
    const { model, requests } = await start(byStream('openai-chat-text.json', 'openai-chat-text.sse'));
    const events = await collectStream(model.stream(request([{ type: 'message', role: 'user', content: 'Hello' }])));
    expect(events.filter((event) => event.type === 'text_delta').length).toBeGreaterThan(1);
    expect(streamedText(events)).toBe('Hello! How can I help you today?');
    const message = { type: 'message', role: 'assistant', content: 'Hello! How can I help you today?' };
    expect(events.slice(-2)).toEqual([
      { type: 'item_done', item: message },
      { type: 'done', result: { output: [message], usage: { input_tokens: 19, output_tokens: 9 } } },
    ]);
    expect(requests[0]!.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
  });

  it('returns a tool call as a function_call item and offers the tools in the request body', async () => {
    const { model, requests } = await start(byStream('openai-chat-tool-call.json', 'openai-chat-tool-call.sse'));
    const result = await model.generate(
      request([{ type: 'message', role: 'user', content: 'Weather?' }], [weatherTool]),
    );
    expect(result.output).toEqual([
      {
        type: 'function_call',
        call_id: 'call_abc123',
        name: 'get_current_weather',
        arguments: JSON.stringify({ location: 'Boston, MA' }),
      },
    ]);
    expect(result.usage).toEqual({ input_tokens: 82, output_tokens: 17 });
    expect(requests[0]!.body.tools).toEqual([
      {
        type: 'function',
        function: {
          name: 'get_weather',
          description: 'Current weather for a place',
          parameters: weatherTool.parameters,
        },
      },
    ]);
  });

  it("passes a streamed tool call's argument pieces on as they come, then the whole call", async () => {
    const { model } = await start(byStream('openai-chat-tool-call.json', 'openai-chat-tool-call.sse'));
    const events = await collectStream(
      model.stream(request([{ type: 'message', role: 'user', content: 'Weather?' }], [weatherTool])),
    );
    const call_id = 'call_DdmO9pD3xa9XTPNJ32zg2hcA';
    const call = {
      type: 'function_call',
      call_id,
      name: 'get_weather',
      arguments: JSON.stringify({ location: 'Paris, France' }),
    };
    // The recorded chunks split the arguments in seven.
    const pieces = ['{"', 'location', '":"', 'Paris', ',', ' France', '"}'];
    expect(events).toEqual([
      { type: 'call_start', call_id, name: 'get_weather' },
      ...pieces.map((delta) => ({ type: 'arguments_delta', call_id, delta })),
      { type: 'item_done', item: call },
      { type: 'done', result: { output: [call], usage: { input_tokens: 62, output_tokens: 16 } } },
    ]);
  });

  it(
    'returns calls the SDK cannot validate (unparseable arguments, a tool not offered) as the model ' + 'sent them',
    async () => {
      const answer = JSON.parse(fixture('openai-chat-tool-call.json'));
      answer.choices[0].message.tool_calls = [
        { id: 'call_bad_json', type: 'function', function: { name: 'get_weather', arguments: '{"location": "Par' } },
        { id: 'call_unknown', type: 'function', function: { name: 'delete_everything', arguments: '{"really":true}' } },
      ];
      const { model } = await start(() => ({ json: answer }));
      const result = await model.generate(
        request([{ type: 'message', role: 'user', content: 'Weather?' }], [weatherTool]),
      );
      expect(result.output).toEqual([
        { type: 'function_call', call_id: 'call_bad_json', name: 'get_weather', arguments: '{"location": "Par' },
        { type: 'function_call', call_id: 'call_unknown', name: 'delete_everything', arguments: '{"really":true}' },
      ]);
    },
  );

  it('offers a tool without parameters with an empty object schema', async () => {
    const { model, requests } = await start(byStream('openai-chat-text.json', 'openai-chat-text.sse'));
    await model.generate(
      request([{ type: 'message', role: 'user', content: 'x' }], [{ type: 'function', name: 'now' }]),
    );
    expect(requests[0]!.body.tools).toEqual([
      { type: 'function', function: { name: 'now', parameters: { type: 'object', properties: {} } } },
    ]);
  });

  it('sends a function_call and its output as an assistant tool_calls message and a tool message', async () => {
    const { model, requests } = await start(byStream('openai-chat-text.json', 'openai-chat-text.sse'));
    await model.generate({ ...request(toolLoop, [weatherTool]), maxOutputTokens: 50, temperature: 0.2 });
    expect(requests[0]!.body).toMatchObject({ max_tokens: 50, temperature: 0.2 });
    expect(requests[0]!.body.messages).toEqual([
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'Weather in Paris?' },
      {
        role: 'assistant',
        content: 'Let me look.',
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"location":"Paris"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: '18C, sunny' },
      { role: 'user', content: 'And tomorrow?' },
    ]);
  });

  it('sends past tool traffic even when no tools are offered any more', async () => {
    const { model, requests } = await start(byStream('openai-chat-text.json', 'openai-chat-text.sse'));
    const result = await model.generate(request(toolLoop));
    expect(result.output).toHaveLength(1);
    expect(requests[0]!.body.tools).toBeUndefined();
    expect(requests[0]!.body.messages[2].tool_calls).toHaveLength(1);
    expect(requests[0]!.body.messages[3]).toEqual({ role: 'tool', tool_call_id: 'call_1', content: '18C, sunny' });
  });

  it('openai: uses OPENAI_BASE_URL and OPENAI_API_KEY and sends max_completion_tokens', async () => {
    provider = await startFakeProvider(byStream('openai-chat-text.json', 'openai-chat-text.sse'));
    const model = resolveModel('openai:gpt-4.1-mini', {
      OPENAI_BASE_URL: provider.baseURL,
      OPENAI_API_KEY: 'sk-openai',
      MODEL_MAX_RETRIES: 0,
    });
    const result = await model.generate({
      ...request([{ type: 'message', role: 'user', content: 'Hi' }]),
      maxOutputTokens: 64,
    });
    expect(result.output).toEqual([
      { type: 'message', role: 'assistant', content: 'Hello! How can I assist you today?' },
    ]);
    expect(model.id).toBe('openai:gpt-4.1-mini');
    const sent = provider.requests[0]!;
    expect(sent.headers.authorization).toBe('Bearer sk-openai');
    expect(sent.body.model).toBe('gpt-4.1-mini');
    expect(sent.body.max_completion_tokens).toBe(64);
    expect(sent.body.max_tokens).toBeUndefined();
  });

  it('sends no Authorization header when OPENAI_COMPATIBLE_API_KEY is not set (local servers)', async () => {
    const { model, requests } = await start(byStream('openai-chat-text.json', 'openai-chat-text.sse'), {
      OPENAI_COMPATIBLE_API_KEY: '',
    });
    await model.generate(request([{ type: 'message', role: 'user', content: 'Hi' }]));
    expect(requests[0]!.headers.authorization).toBeUndefined();
  });

  it('uses the injected fetch', async () => {
    const seen: string[] = [];
    const { model } = await start(byStream('openai-chat-text.json', 'openai-chat-text.sse'), {
      fetch: (input, init) => {
        seen.push(String(input instanceof Request ? input.url : input));
        return fetch(input, init);
      },
    });
    await model.generate(request([{ type: 'message', role: 'user', content: 'Hi' }]));
    expect(seen).toEqual([`${provider!.baseURL}/chat/completions`]);
  });
});

describe('prompt_cache_key', () => {
  it('is sent to OpenAI (openai:<model>), generating and streaming, and not to other compatible servers', async () => {
    provider = await startFakeProvider(byStream('openai-chat-text.json', 'openai-chat-text.sse'));
    const openai = resolveModel('openai:gpt-4.1-mini', {
      OPENAI_BASE_URL: provider.baseURL,
      OPENAI_API_KEY: 'sk-test',
      MODEL_MAX_RETRIES: '0',
    });
    const keyed: ModelRequest = {
      ...request([{ type: 'message', role: 'user', content: 'Hello' }]),
      promptCacheKey: 'agent-7',
    };
    await openai.generate(keyed);
    await collectStream(openai.stream(keyed));
    await openai.generate(request([{ type: 'message', role: 'user', content: 'Hello' }]));
    expect(provider.requests.map((recorded) => recorded.body.prompt_cache_key)).toEqual([
      'agent-7',
      'agent-7',
      undefined,
    ]);

    const compatible = resolveModel('openai-compatible:test-model', {
      OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
      MODEL_MAX_RETRIES: '0',
    });
    await compatible.generate(keyed);
    expect(provider.requests.at(-1)!.body.prompt_cache_key).toBeUndefined();
  });
});

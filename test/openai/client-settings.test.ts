import { Agent, OpenAIProvider, Runner } from '@openai/agents';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  fixture,
  startFakeProvider,
  type FakeProvider,
  type RecordedRequest,
} from '../support/fake-providers/fake-provider-server.ts';
import { startTailgate, TOKEN } from './server.ts';
import { agentsTracingOff } from './agents-tracing.ts';

// What clients send by default, and the settings they may ask: honoured (passed to the
// provider: asserted on the fake provider's wire), echoed in the response, or refused by name.
let openaiWire: FakeProvider;
let anthropicWire: FakeProvider;
let tailgate: Awaited<ReturnType<typeof startTailgate>>;
let client: OpenAI;

function reply(request: RecordedRequest, name: string) {
  return request.body?.stream ? { sse: fixture(`${name}.sse`) } : { json: JSON.parse(fixture(`${name}.json`)) };
}

/** A forced tool choice gets the recorded tool call (the AI SDK checks that the model made it), else text. */
function forced(choice: unknown): boolean {
  return (
    choice !== undefined && choice !== 'auto' && choice !== 'none' && (choice as { type?: string }).type !== 'auto'
  );
}

agentsTracingOff();
beforeAll(async () => {
  openaiWire = await startFakeProvider((request) =>
    reply(request, forced(request.body?.tool_choice) ? 'openai-chat-tool-call' : 'openai-chat-text'),
  );
  anthropicWire = await startFakeProvider((request) =>
    reply(request, forced(request.body?.tool_choice) ? 'anthropic-message-tool-use' : 'anthropic-message-text'),
  );
  tailgate = await startTailgate({
    OPENAI_API_KEY: 'test-key',
    OPENAI_BASE_URL: openaiWire.baseURL,
    ANTHROPIC_API_KEY: 'test-key',
    ANTHROPIC_BASE_URL: anthropicWire.baseURL,
    OPENAI_COMPATIBLE_BASE_URL: openaiWire.baseURL,
    MODEL_MAX_RETRIES: '0',
    MODEL_ALIASES:
      'gpt-wire=openai:gpt-5.2,claude-wire=anthropic:claude-sonnet-4-5,gpt-5.6-luna=echo,' +
      'local-wire=openai-compatible:qwen3',
  });
  client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
});
afterAll(async () => {
  await tailgate.close();
  await openaiWire.close();
  await anthropicWire.close();
});

/** The tool the recorded OpenAI tool call calls. */
const currentWeather = {
  type: 'function' as const,
  name: 'get_current_weather',
  strict: false,
  parameters: { type: 'object', properties: { location: { type: 'string' } } },
};

const weather = {
  type: 'function' as const,
  name: 'get_weather',
  strict: false,
  parameters: { type: 'object', properties: { city: { type: 'string' } } },
};

const answerSchema = {
  type: 'object',
  properties: {
    city: { type: 'string', minLength: 2 },
    degrees: { type: 'integer', minimum: -50, maximum: 60 },
    sky: { type: 'string', enum: ['clear', 'cloudy'] },
    hours: { type: 'array', items: { type: 'number', minimum: 0 }, minItems: 2 },
  },
  required: ['city', 'degrees', 'sky', 'hours'],
  additionalProperties: false,
};

const settings = {
  top_p: 0.5,
  presence_penalty: 0.25,
  frequency_penalty: -0.5,
  reasoning: { effort: 'low' as const, summary: 'auto' as const },
  text: {
    format: { type: 'json_schema' as const, name: 'weather', schema: answerSchema, strict: true },
    verbosity: 'low' as const,
  },
  tool_choice: { type: 'function' as const, name: 'get_current_weather' },
  parallel_tool_calls: false,
  max_tool_calls: 3,
  user: 'user-1',
  safety_identifier: 'hashed-user-1',
  service_tier: 'flex' as const,
  top_logprobs: 2,
  include: ['reasoning.encrypted_content' as const],
};

describe('Responses settings: honoured on the wire, echoed in the response', () => {
  it('passes every setting to an OpenAI model and echoes each', async () => {
    const response = await client.responses.create({
      model: 'gpt-wire',
      input: 'hi',
      tools: [currentWeather],
      ...settings,
    });
    const body = openaiWire.requests.at(-1)!.body;
    expect(body).toMatchObject({
      top_p: 0.5,
      presence_penalty: 0.25,
      frequency_penalty: -0.5,
      reasoning_effort: 'low',
      verbosity: 'low',
      response_format: { type: 'json_schema', json_schema: { name: 'weather', schema: answerSchema, strict: true } },
      tool_choice: { type: 'function', function: { name: 'get_current_weather' } },
      parallel_tool_calls: false,
      user: 'user-1',
      safety_identifier: 'hashed-user-1',
    });
    expect(response).toMatchObject({
      top_p: 0.5,
      presence_penalty: 0.25,
      frequency_penalty: -0.5,
      reasoning: { effort: 'low', summary: 'auto' },
      text: settings.text,
      tool_choice: settings.tool_choice,
      parallel_tool_calls: false,
      max_tool_calls: 3,
      user: 'user-1',
      safety_identifier: 'hashed-user-1',
      service_tier: 'flex',
      top_logprobs: 2,
    });
    // The settings are kept with the turn's record, and a retrieve answers them again.
    expect(await client.responses.retrieve(response.id)).toEqual(response);
  });

  it('passes a json_schema text format to an OpenAI-compatible server whole, as its response_format', async () => {
    // vLLM, Ollama, llama.cpp and LM Studio take OpenAI's json_schema; a server that does not answers its own error.
    await client.responses.create({
      model: 'local-wire',
      input: 'The weather in Paris, as JSON.',
      text: { format: settings.text.format },
    });
    expect(openaiWire.requests.at(-1)!.body).toMatchObject({
      model: 'qwen3',
      response_format: { type: 'json_schema', json_schema: { name: 'weather', schema: answerSchema, strict: true } },
    });
  });

  it('passes them to an Anthropic model: thinking budget, tool choice, one call at most, the end user', async () => {
    await client.responses.create({
      model: 'claude-wire',
      input: 'hi',
      reasoning: { effort: 'low' },
      safety_identifier: 'hashed-user-1',
      max_output_tokens: 4096,
    });
    const thinking = anthropicWire.requests.at(-1)!.body;
    expect(thinking.thinking).toMatchObject({ type: 'enabled' });
    expect(thinking.thinking.budget_tokens).toBeGreaterThan(0);
    expect(thinking.metadata).toEqual({ user_id: 'hashed-user-1' });
    // Anthropic forces no tool while thinking: the choice goes with a call without reasoning.
    await client.responses.create({
      model: 'claude-wire',
      input: 'hi',
      tools: [weather],
      top_p: 0.5,
      tool_choice: 'required',
      parallel_tool_calls: false,
      user: 'user-1',
    });
    const forcedCall = anthropicWire.requests.at(-1)!.body;
    expect(forcedCall).toMatchObject({ top_p: 0.5, metadata: { user_id: 'user-1' } });
    expect(forcedCall.tool_choice).toEqual({ type: 'any', disable_parallel_tool_use: true });
  });

  it('the echo model answers a json_schema request with JSON that validates against the schema', async () => {
    const response = await client.responses.create({
      model: 'echo',
      input: 'Paris',
      text: { format: { type: 'json_schema', name: 'weather', schema: answerSchema } },
    });
    const value = JSON.parse(response.output_text);
    expect(z.fromJSONSchema(answerSchema as Parameters<typeof z.fromJSONSchema>[0]).safeParse(value).success).toBe(
      true,
    );
    expect(value).toEqual({ city: 'echo: Paris', degrees: -50, sky: 'clear', hours: [0, 0] });
    const object = await client.responses.create({
      model: 'echo',
      input: 'x',
      text: { format: { type: 'json_object' } },
    });
    expect(JSON.parse(object.output_text)).toEqual({ echo: 'echo: x' });
  });

  it('echoes the defaults when nothing is sent, and honours tool_choice none', async () => {
    const response = await client.responses.create({
      model: 'echo',
      input: 'call get_weather {}',
      tools: [weather],
      tool_choice: 'none',
    });
    expect(response.output.map((item) => item.type)).toEqual(['message']);
    expect(response).toMatchObject({
      temperature: 1,
      top_p: 1,
      presence_penalty: 0,
      frequency_penalty: 0,
      top_logprobs: 0,
      tool_choice: 'none',
      parallel_tool_calls: true,
      max_tool_calls: null,
      reasoning: null,
      text: { format: { type: 'text' }, verbosity: 'medium' },
      service_tier: 'default',
      user: null,
      safety_identifier: null,
      prompt_cache_key: null,
    });
  });

  it('refuses by name what cannot be honoured', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ background: true, store: false }, 'background'],
      [{ tools: [{ type: 'web_search' }] }, 'tools[0].type'],
      // A built-in tool with fields of its own is refused for its type, not for a field of it.
      [
        { tools: [{ type: 'computer_use_preview', display_width: 1024, display_height: 768, environment: 'browser' }] },
        'tools[0].type',
      ],
      [{ tools: [{ type: 'file_search', vector_store_ids: ['vs_1'] }] }, 'tools[0].type'],
      [{ tools: [{ type: 'mcp', server_label: 'docs', server_url: 'https://example.com/mcp' }] }, 'tools[0].type'],
      [
        { tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [{ type: 'mcp', server_label: 'docs' }] } },
        'tool_choice.tools[0].type',
      ],
      [{ include: ['file_search_call.results'] }, 'include[0]'],
      [{ reasoning: { effort: 'extreme' } }, 'reasoning.effort'],
      [{ text: { format: { type: 'json_schema', name: 'bad name', schema: {} } } }, 'text.format.name'],
    ];
    for (const [extra, param] of cases) {
      const error = await client.responses
        .create({ model: 'echo', input: 'hi', ...extra } as never)
        .catch((caught: unknown) => caught);
      expect(error, param).toMatchObject({ status: 400, param });
    }
  });

  // Providers refuse a request offering one tool name twice (a 502 after the fact): refused first,
  // as a session's or a native turn's tools are.
  it('refuses a tool name offered twice, in a response and a chat completion', async () => {
    const twice = (name: string) => [name, name].map((same) => ({ type: 'function' as const, name: same }));
    const response = await client.responses
      .create({ model: 'echo', input: 'hi', tools: twice('lookup') } as never)
      .catch((caught: unknown) => caught);
    expect(response).toMatchObject({ status: 400, param: 'tools[1].name' });
    const chat = await client.chat.completions
      .create({
        model: 'echo',
        messages: [{ role: 'user', content: 'hi' }],
        tools: twice('lookup').map(({ type, name }) => ({ type, function: { name } })),
      })
      .catch((caught: unknown) => caught);
    expect(chat).toMatchObject({ status: 400, param: 'tools[1].function.name' });
  });

  it('refuses a Chat Completions tool that is not a function for its type', async () => {
    const chat = await client.chat.completions
      .create({
        model: 'echo',
        messages: [{ role: 'user', content: 'hi' }],
        tools: [{ type: 'custom', custom: { name: 'grammar' } }],
      } as never)
      .catch((caught: unknown) => caught);
    expect(chat).toMatchObject({ status: 400, param: 'tools[0].type' });
  });
});

describe("the values the openai client's types take beyond the first ones", () => {
  it('reasoning effort max reaches the provider, and the fast service tiers are echoed', async () => {
    const response = await client.responses.create({
      model: 'gpt-wire',
      input: 'hi',
      reasoning: { effort: 'max' },
      service_tier: 'ultrafast',
    });
    expect(openaiWire.requests.at(-1)!.body).toMatchObject({ reasoning_effort: 'max' });
    expect(response).toMatchObject({ reasoning: { effort: 'max' }, service_tier: 'ultrafast' });
    await client.responses.create({
      model: 'claude-wire',
      input: 'hi',
      reasoning: { effort: 'max' },
      max_output_tokens: 4096,
    });
    expect(anthropicWire.requests.at(-1)!.body.thinking).toMatchObject({ type: 'enabled' });
    const completion = await client.chat.completions.create({
      model: 'gpt-wire',
      messages: [{ role: 'user', content: 'hi' }],
      reasoning_effort: 'max',
      service_tier: 'fast',
    });
    expect(openaiWire.requests.at(-1)!.body).toMatchObject({ reasoning_effort: 'max' });
    expect(completion.service_tier).toBe('fast');
  });
});

describe('Chat Completions settings on the wire', () => {
  it('passes stop, seed, top_p, tool_choice, response_format, reasoning_effort...; echoes service_tier', async () => {
    // Each sent as the provider's Chat Completions body takes it.
    const passed = {
      stop: ['END'],
      seed: 7,
      top_p: 0.25,
      tool_choice: 'required' as const,
      parallel_tool_calls: false,
      response_format: { type: 'json_object' as const },
      reasoning_effort: 'high' as const,
      verbosity: 'high' as const,
      user: 'user-2',
      safety_identifier: 'hashed-user-2',
    };
    const completion = await client.chat.completions.create({
      model: 'gpt-wire',
      messages: [{ role: 'user', content: 'hi' }],
      tools: [{ type: 'function', function: { name: 'get_current_weather', parameters: currentWeather.parameters } }],
      ...passed,
      service_tier: 'auto',
    });
    expect(openaiWire.requests.at(-1)!.body).toMatchObject(passed);
    expect(completion.service_tier).toBe('auto');
  });
});

describe('@openai/agents with no model set (its defaults: reasoning effort, text verbosity)', () => {
  it('runs, and what it sent is echoed', async () => {
    const seen: unknown[] = [];
    const openai = new OpenAI({
      apiKey: TOKEN,
      baseURL: tailgate.baseURL,
      maxRetries: 0,
      fetch: async (url, init) => {
        if (typeof init?.body === 'string') seen.push(JSON.parse(init.body));
        return fetch(url, init);
      },
    });
    const runner = new Runner({
      modelProvider: new OpenAIProvider({ openAIClient: openai, useResponses: true }),
      tracingDisabled: true,
    });
    const result = await runner.run(new Agent({ name: 'default', instructions: 'Be brief.' }), 'hello');
    expect(result.finalOutput).toBe('echo: hello');
    expect(seen[0]).toMatchObject({ model: 'gpt-5.6-luna', text: { verbosity: 'low' } });
  });
});

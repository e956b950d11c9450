import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText, tool } from 'ai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { clientOnTailgate, startTailgate, TOKEN } from './server.ts';

// Options real clients send that tailgate takes (docs/OPENAI.md, "Fields").
const world = clientOnTailgate({ MODEL_ALIASES: 'gpt-4.1-mini=echo' });

describe('log probabilities', () => {
  it("takes the AI SDK's logprobs option: output_text carries the provider's logprobs, [] for none", async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL });
    const options = { openai: { logprobs: true } };
    const result = await generateText({ model: openai('gpt-4.1-mini'), prompt: 'hi', providerOptions: options });
    expect(result.text).toBe('echo: hi');
    expect(result.providerMetadata?.openai?.logprobs).toEqual([[]]);
    const streamed = streamText({ model: openai('gpt-4.1-mini'), prompt: 'hi', providerOptions: options });
    expect(await streamed.text).toBe('echo: hi');

    const response = await world.client.responses.create({
      model: 'echo',
      input: 'hi',
      include: ['message.output_text.logprobs'],
      top_logprobs: 5,
    });
    expect(response.top_logprobs).toBe(5);
    const message = response.output[0];
    expect(message?.type === 'message' && message.content[0]).toMatchObject({ type: 'output_text', logprobs: [] });
  });

  it('takes message.output_text.logprobs on retrieve and the item lists, each output_text carrying []', async () => {
    const { client } = world;
    const include = ['message.output_text.logprobs' as const];
    const created = await client.responses.create({ model: 'echo', input: 'hi', include });
    const retrieved = await client.responses.retrieve(created.id, { include });
    expect(retrieved.output).toEqual(created.output);
    const next = await client.responses.create({ model: 'echo', input: 'again', previous_response_id: created.id });
    const inputs = await client.responses.inputItems.list(next.id, { include });
    expect(inputs.data).toHaveLength(1);
    const items = await client.conversations.items.list(created.conversation!.id, { include });
    const assistant = items.data.find((item) => item.type === 'message' && item.role === 'assistant');
    expect(assistant?.type === 'message' && assistant.content[0]).toMatchObject({ type: 'output_text', logprobs: [] });
    // Another value is still one tailgate refuses.
    const refused = await client.responses
      .retrieve(created.id, { include: ['message.input_image.image_url'] })
      .catch((error: unknown) => error);
    expect(refused).toMatchObject({ status: 400, param: 'include[]' });
  });
});

const weather = { type: 'function' as const, name: 'get_weather', strict: false, parameters: { type: 'object' } };
const lookup = { type: 'function' as const, name: 'lookup', strict: false, parameters: { type: 'object' } };

describe('tool_choice allowed_tools', () => {
  it('lets the model call the listed tools alone, every tool still offered, and echoes it', async () => {
    const { client } = world;
    const tool_choice = {
      type: 'allowed_tools' as const,
      mode: 'auto' as const,
      tools: [{ type: 'function', name: 'lookup' }],
    };
    const kept = await client.responses.create({
      model: 'echo',
      input: 'call get_weather {"city":"Paris"}',
      tools: [weather, lookup],
      tool_choice,
    });
    expect(kept.output_text).toBe('echo: call get_weather {"city":"Paris"}');
    expect(kept.tool_choice).toEqual(tool_choice);
    expect(kept.tools.map((tool) => tool.type === 'function' && tool.name)).toEqual(['get_weather', 'lookup']);
    const called = await client.responses.create({
      model: 'echo',
      input: 'call lookup {}',
      tools: [weather, lookup],
      tool_choice,
    });
    expect(called.output[0]).toMatchObject({ type: 'function_call', name: 'lookup' });

    const refused: [unknown, string][] = [
      [{ ...tool_choice, tools: [{ type: 'function', name: 'search' }] }, 'tool_choice.tools[0].name'],
      [{ ...tool_choice, tools: [{ type: 'web_search' }] }, 'tool_choice.tools[0].type'],
      [{ ...tool_choice, tools: [] }, 'tool_choice.tools'],
      [{ ...tool_choice, mode: 'sometimes' }, 'tool_choice.mode'],
    ];
    for (const [choice, param] of refused) {
      const error = await client.responses
        .create({ model: 'echo', input: 'hi', tools: [weather, lookup], tool_choice: choice } as never)
        .catch((caught: unknown) => caught);
      expect(error, param).toMatchObject({ status: 400, param });
    }
  });
});

describe('on providers', () => {
  let wire: FakeProvider;
  let anthropic: FakeProvider;
  let tailgate: Awaited<ReturnType<typeof startTailgate>>;
  let client: OpenAI;
  beforeAll(async () => {
    wire = await startFakeProvider(() => ({ json: JSON.parse(fixture('openai-chat-text.json')) }));
    anthropic = await startFakeProvider(() => ({ json: JSON.parse(fixture('anthropic-message-text.json')) }));
    tailgate = await startTailgate({
      ANTHROPIC_API_KEY: 'test-key',
      ANTHROPIC_BASE_URL: anthropic.baseURL,
      OPENAI_API_KEY: 'test-key',
      OPENAI_BASE_URL: wire.baseURL,
      MODEL_MAX_RETRIES: '0',
      DEFAULT_MODEL: 'openai:gpt-5.2',
    });
    client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
  });
  afterAll(async () => {
    await tailgate.close();
    await wire.close();
    await anthropic.close();
  });

  it("sends the AI SDK's allowedTools to OpenAI as allowed_tools with every tool; others get those alone", async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL });
    const tools = {
      get_weather: tool({ inputSchema: z.object({ city: z.string() }), execute: async () => '18C' }),
      lookup: tool({ inputSchema: z.object({ query: z.string() }), execute: async () => 'found' }),
    };
    const providerOptions = { openai: { allowedTools: { toolNames: ['lookup'] } } };
    await generateText({ model: openai('openai:gpt-5.2'), prompt: 'hi', tools, providerOptions });
    const sent = wire.requests.at(-1)!.body;
    expect(sent.tools.map((tool: { function: { name: string } }) => tool.function.name)).toEqual([
      'get_weather',
      'lookup',
    ]);
    expect(sent.tool_choice).toEqual({
      type: 'allowed_tools',
      allowed_tools: { mode: 'auto', tools: [{ type: 'function', function: { name: 'lookup' } }] },
    });
    expect(sent).not.toHaveProperty('tailgate_allowed_tools');

    await generateText({ model: openai('anthropic:claude-sonnet-4-5'), prompt: 'hi', tools, providerOptions });
    const toAnthropic = anthropic.requests.at(-1)!.body;
    expect(toAnthropic.tools.map((tool: { name: string }) => tool.name)).toEqual(['lookup']);
    expect(toAnthropic.tool_choice).toMatchObject({ type: 'auto' });
  });

  it("runs DEFAULT_MODEL, or under previous_response_id or conversation the conversation's model", async () => {
    const before = wire.requests.length;
    const fresh = await client.responses.create({ input: 'hi' } as never);
    expect(fresh).toMatchObject({ status: 'completed', model: 'openai:gpt-5.2' });
    expect(wire.requests.at(-1)!.body).toMatchObject({ model: 'gpt-5.2' });
    const stateless = await client.responses.create({ input: 'hi', store: false, model: null } as never);
    expect(stateless).toMatchObject({ status: 'completed', model: 'openai:gpt-5.2' });
    expect(wire.requests).toHaveLength(before + 2);

    const first = await client.responses.create({ model: 'echo', input: 'one' });
    const next = await client.responses.create({ previous_response_id: first.id, input: 'two' } as never);
    expect(next).toMatchObject({ model: 'echo', output_text: 'echo: two' });
    const under = await client.responses.create({ conversation: first.conversation!.id, input: 'three' } as never);
    expect(under).toMatchObject({ model: 'echo', output_text: 'echo: three' });
    expect((await client.responses.retrieve(under.id)).model).toBe('echo');
    expect(wire.requests).toHaveLength(before + 2);
  });
});

// The Open Responses specification lets `input` be absent; a tailgate turn answers new input.
describe('a request without input', () => {
  it('is a 400 naming input, with or without previous_response_id or conversation', async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'hi' });
    const bodies = [
      { model: 'echo' },
      { input: null },
      { previous_response_id: first.id },
      { conversation: first.conversation!.id },
    ];
    for (const body of bodies) {
      const error = await world.client.responses.create(body as never).catch((caught: unknown) => caught);
      expect(error, JSON.stringify(body)).toMatchObject({ status: 400, param: 'input', code: 'invalid_request' });
    }
  });
});

import { createOpenAI } from '@ai-sdk/openai';
import { generateText } from 'ai';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { fixture, type RecordedRequest } from '../support/fake-providers/fake-provider-server.ts';
import { clientOnFakeProvider, settledResponse, TOKEN } from './server.ts';

// Fields the `openai` client's types allow and the AI SDK sends: honoured where tailgate can,
// taken as advisory where they mean nothing to its providers, refused only where accepting
// would do the wrong thing. `gpt-4o-mini` is an OpenAI model on a loopback fake provider, whose
// wire shows what reached it; `gpt-5` (a name the AI SDK takes for a reasoning model) is echo.
const world = clientOnFakeProvider(
  (request: RecordedRequest) =>
    // Chat Completions takes `30m` alone as `prompt_cache_options.ttl` (a response may ask `12h`).
    ttlOf(request) !== undefined && ttlOf(request) !== '30m'
      ? { status: 400, json: { error: { message: 'unsupported ttl', type: 'invalid_request_error', code: null } } }
      : request.body?.stream
        ? { sse: fixture('openai-chat-text.sse') }
        : { json: JSON.parse(fixture('openai-chat-text.json')) },
  (baseURL) => ({
    OPENAI_API_KEY: 'test-key',
    OPENAI_BASE_URL: baseURL,
    MODEL_ALIASES: 'gpt-4o-mini=openai:gpt-4o-mini,gpt-5=echo',
  }),
);
function ttlOf(request: RecordedRequest): unknown {
  return (request.body?.prompt_cache_options as { ttl?: unknown } | undefined)?.ttl;
}
const PDF = 'data:application/pdf;base64,JVBERi0xLjQKJSVFT0YK';
const refused = (promise: Promise<unknown>) => promise.catch((error: unknown) => error);

describe('request fields of the openai client and the AI SDK', () => {
  it('the AI SDK sends reasoningMode, reasoningContext, prompt cache options and breakpoints', async () => {
    const bodies: Record<string, unknown>[] = [];
    const openai = createOpenAI({
      apiKey: TOKEN,
      baseURL: world.tailgate.baseURL,
      fetch: (url, init) => {
        bodies.push(JSON.parse(String(init?.body)) as Record<string, unknown>);
        return fetch(url, init);
      },
    });
    const breakpoint = { openai: { promptCacheBreakpoint: { mode: 'explicit' as const } } };
    const result = await generateText({
      model: openai('gpt-5'),
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hello', providerOptions: breakpoint }] }],
      providerOptions: {
        openai: {
          reasoningEffort: 'low',
          reasoningMode: 'pro',
          reasoningContext: 'all_turns',
          promptCacheRetention: '24h',
          promptCacheOptions: { mode: 'explicit', ttl: '12h' },
        },
      },
    });
    expect(result.text).toBe('echo: hello');
    // The mode and context the call ran with, as OpenAI answers the effective ones.
    expect(result.providerMetadata?.openai).toMatchObject({ reasoningContext: 'current_turn' });
    expect(bodies[0]).toMatchObject({
      reasoning: { mode: 'pro', context: 'all_turns' },
      prompt_cache_retention: '24h',
      prompt_cache_options: { mode: 'explicit', ttl: '12h' },
      input: [{ content: [{ prompt_cache_breakpoint: { mode: 'explicit' } }] }],
    });
    const stored = await world.client.responses.retrieve(result.response.id);
    expect(stored.reasoning).toMatchObject({ effort: 'low', mode: 'standard', context: 'current_turn' });
  });

  it('passes prompt_cache_retention to an OpenAI model, a ttl Chat Completions refuses advisory', async () => {
    const before = world.provider.requests.length;
    const created = await world.client.responses.create({
      model: 'gpt-4o-mini',
      input: 'hi',
      prompt_cache_key: 'k1',
      prompt_cache_retention: '24h',
      prompt_cache_options: { mode: 'implicit', ttl: '12h', comparison_response_id: 'resp_elsewhere' },
      reasoning: { mode: 'standard', context: 'auto' },
    });
    expect(created.status).toBe('completed');
    expect(created.reasoning).toMatchObject({ mode: 'standard', context: 'current_turn' });
    const wire = world.provider.requests.slice(before).map((request) => request.body);
    expect(wire).toHaveLength(1);
    expect(wire[0]).toMatchObject({ prompt_cache_key: 'k1', prompt_cache_retention: '24h' });
    expect(wire[0]).not.toHaveProperty('prompt_cache_options');
  });

  it('sends no prompt cache field the client did not ask for, also after a response that asked', async () => {
    const before = world.provider.requests.length;
    const asked = await world.client.responses.create({
      model: 'gpt-4o-mini',
      input: 'hi',
      prompt_cache_retention: 'in_memory',
    });
    await world.client.responses.create({ model: 'gpt-4o-mini', input: 'again', previous_response_id: asked.id });
    await world.client.responses.create({ model: 'gpt-4o-mini', input: 'hi', store: false });
    for await (const _ of await world.client.responses.create({ model: 'gpt-4o-mini', input: 'hi', stream: true }));
    const queued = await world.client.responses.create({ model: 'gpt-4o-mini', input: 'hi', background: true });
    await settledResponse(world.client, queued.id);
    await world.client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
    await world.client.responses.compact({ model: 'gpt-4o-mini', input: 'summarize me' });
    const wire = world.provider.requests.slice(before).map((request) => request.body ?? {});
    expect(wire).toHaveLength(7);
    expect(wire[0]).toMatchObject({ prompt_cache_retention: 'in_memory' });
    for (const body of wire.slice(1))
      expect(Object.keys(body).filter((key) => key.startsWith('prompt_cache'))).toEqual([]);
  });

  it("passes a chat completion's prompt_cache_retention and prompt_cache_options.ttl to an OpenAI model", async () => {
    const before = world.provider.requests.length;
    await world.client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi' }],
      prompt_cache_retention: 'in_memory',
      prompt_cache_options: { mode: 'implicit', ttl: '30m' },
    });
    const wire = world.provider.requests.slice(before).map((request) => request.body);
    expect(wire).toHaveLength(1);
    expect(wire[0]).toMatchObject({ prompt_cache_retention: 'in_memory', prompt_cache_options: { ttl: '30m' } });
  });

  it('takes null as not sent for prompt, prompt_cache_retention and moderation', async () => {
    const created = await world.client.responses.create({
      model: 'gpt-5',
      input: 'hi',
      prompt: null,
      prompt_cache_retention: null,
      moderation: null,
    });
    expect(created.output_text).toBe('echo: hi');
    // A prompt template or a moderation policy is one tailgate would not apply: named, not ignored.
    const prompt = await refused(world.client.responses.create({ model: 'gpt-5', input: 'hi', prompt: { id: 'p' } }));
    expect(prompt).toBeInstanceOf(OpenAI.BadRequestError);
    expect(prompt).toMatchObject({ status: 400, param: 'prompt' });
    const moderation = await refused(
      world.client.responses.create({ model: 'gpt-5', input: 'hi', moderation: { model: 'omni-moderation-latest' } }),
    );
    expect(moderation).toMatchObject({ status: 400, param: 'moderation' });
    const prewarm = await refused(
      world.client.responses.create({ model: 'gpt-5', input: 'hi', prompt_cache_options: { prewarm: true } }),
    );
    expect(prewarm).toMatchObject({ status: 400, param: 'prompt_cache_options.prewarm' });
  });

  it("takes an input_file's detail and a part's prompt_cache_breakpoint, keeping neither", async () => {
    const created = await world.client.responses.create({
      model: 'gpt-5',
      input: [
        {
          role: 'user',
          content: [
            { type: 'input_file', filename: 'a.pdf', file_data: PDF, detail: 'low' },
            { type: 'input_text', text: 'read it', prompt_cache_breakpoint: { mode: 'explicit', ttl: '30m' } },
          ],
        },
      ],
    });
    expect(created.status).toBe('completed');
    const items = await world.client.conversations.items.list(created.conversation!.id);
    const user = items.data.find((item) => item.type === 'message' && item.role === 'user');
    const parts = user?.type === 'message' ? (user.content as unknown as Record<string, unknown>[]) : [];
    expect(parts.map((part) => part.type)).toEqual(['input_file', 'input_text']);
    expect(parts[0]).not.toHaveProperty('detail');
    expect(parts[1]).toEqual({ type: 'input_text', text: 'read it' });
  });

  it("takes a refusal part of a resent assistant message as that message's text", async () => {
    const created = await world.client.responses.create({
      model: 'gpt-5',
      input: [
        { role: 'user', content: 'help me' },
        {
          type: 'message',
          role: 'assistant',
          id: 'msg_from_openai',
          status: 'completed',
          content: [{ type: 'refusal', refusal: 'I cannot help with that.' }],
        },
        { role: 'user', content: 'fine' },
      ],
    });
    expect(created.output_text).toBe('echo: fine');
    const items = await world.client.conversations.items.list(created.conversation!.id, { order: 'asc' });
    const assistant = items.data.find((item) => item.type === 'message' && item.role === 'assistant');
    expect(assistant?.type === 'message' && assistant.content).toMatchObject([
      { type: 'output_text', text: 'I cannot help with that.' },
    ]);
    // A refusal is the model's: in a user message it is a 400 naming the part.
    const user = await refused(
      world.client.responses.create({
        model: 'gpt-5',
        input: [{ role: 'user', content: [{ type: 'refusal', refusal: 'no' }] } as never],
      }),
    );
    expect(user).toBeInstanceOf(OpenAI.BadRequestError);
    expect(user).toMatchObject({ status: 400, param: 'input[0].content[0]' });
  });

  it('compacts with any service_tier of the compact type, advisory', async () => {
    const compacted = await world.client.responses.compact({
      model: 'gpt-5',
      input: 'summarize me',
      service_tier: 'flex',
    });
    expect(compacted.object).toBe('response.compaction');
    const scale = await refused(
      world.client.responses.compact({ model: 'gpt-5', input: 'hi', service_tier: 'scale' as never }),
    );
    expect(scale).toMatchObject({ status: 400, param: 'service_tier' });
  });

  it('retrieves with include reasoning.encrypted_content, as a create takes it', async () => {
    const include = ['reasoning.encrypted_content' as const];
    const created = await world.client.responses.create({ model: 'gpt-5', input: 'hi', include });
    const retrieved = await world.client.responses.retrieve(created.id, { include });
    expect(retrieved.output).toEqual(created.output);
    const items = await world.client.conversations.items.list(created.conversation!.id, { include });
    expect(items.data.length).toBeGreaterThan(0);
  });
});

describe('responses.inputTokens.count', () => {
  it("counts the prompt of an input by tailgate's estimate, the tools with it", async () => {
    const counted = await world.client.responses.inputTokens.count({ model: 'gpt-5', input: 'hello world!' });
    // A user message of 12 characters: 3 tokens of text and 4 of overhead (lib/tokens/token-counter.ts).
    expect(counted).toEqual({ object: 'response.input_tokens', input_tokens: 7 });
    const tool = { type: 'function' as const, name: 'get', parameters: { type: 'object' }, strict: false };
    const withTools = await world.client.responses.inputTokens.count({
      model: 'gpt-5',
      instructions: 'be brief',
      input: [{ role: 'user', content: 'hello world!' }],
      tools: [tool],
    });
    expect(withTools.input_tokens).toBeGreaterThan(7);
    const conversation = await refused(
      world.client.responses.inputTokens.count({ model: 'gpt-5', input: 'hi', conversation: 'conv_x' }),
    );
    expect(conversation).toBeInstanceOf(OpenAI.NotFoundError);
    expect(conversation).toMatchObject({ status: 404, param: 'conversation' });
    const model = await refused(world.client.responses.inputTokens.count({ model: 'gpt-unknown', input: 'hi' }));
    expect(model).toMatchObject({ status: 404, code: 'model_not_found' });
  });

  it('names a refused image in the input to count as a create names it', async () => {
    const image = { type: 'input_image' as const, image_url: 'data:image/png;base64,!!!!', detail: 'auto' as const };
    const input = [
      { role: 'system' as const, content: 'be brief' },
      { role: 'user' as const, content: 'hi' },
      { role: 'user' as const, content: [image] },
    ];
    const create = await refused(world.client.responses.create({ model: 'gpt-5', input, store: false }));
    expect(create).toMatchObject({ status: 400, param: 'input[2].content[0]' });
    const count = await refused(world.client.responses.inputTokens.count({ model: 'gpt-5', input }));
    expect(count).toMatchObject({ status: 400, param: 'input[2].content[0]' });
    expect((count as Error).message).toContain('input[2].content[0]');
  });

  it('refuses to count an input a create refuses: an output answering no call before it', async () => {
    const call = { type: 'function_call' as const, call_id: 'c1', name: 'get', arguments: '{}' };
    const output = { type: 'function_call_output' as const, call_id: 'c1', output: 'the weather' };
    const answered = await world.client.responses.inputTokens.count({ model: 'gpt-5', input: [call, output] });
    expect(answered.input_tokens).toBeGreaterThan(0);
    for (const input of [[output], [{ role: 'user' as const, content: 'hi' }, output], [call, output, output]]) {
      const count = await refused(world.client.responses.inputTokens.count({ model: 'gpt-5', input }));
      const create = await refused(world.client.responses.create({ model: 'gpt-5', input, store: false }));
      expect(create).toMatchObject({ status: 400, param: `input[${input.length - 1}].call_id` });
      expect(count).toMatchObject({ status: 400, param: `input[${input.length - 1}].call_id` });
    }
  });
});

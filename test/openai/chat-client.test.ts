import { createOpenAI } from '@ai-sdk/openai';
import { generateText, stepCountIs, streamText, tool } from 'ai';
import OpenAI from 'openai';
import type { ChatCompletionChunk, ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { chatMessagesToItems, itemsToChatMessages } from '../../lib/openai/chat.ts';
import { clientOnTailgate, tailgatePost, TOKEN } from './server.ts';

// Chat Completions against the real app on a loopback Node server (echo model): the official
// client and the AI SDK's OpenAI provider in chat mode.
const world = clientOnTailgate({ MODEL_ALIASES: 'gpt-4o-mini=echo' });

const weather = {
  type: 'function' as const,
  function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
};

async function storedKeys(): Promise<string[]> {
  return (await world.tailgate.store.list('', { limit: 1000 })).objects
    .map((object) => object.key)
    .filter((key) => !key.includes('write-probe'));
}

/** An assistant message calling `f`, and its answer. */
const answeredCall: ChatCompletionMessageParam[] = [
  {
    role: 'assistant',
    content: 'checking',
    tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }],
  },
  { role: 'tool', tool_call_id: 'c1', content: 'done' },
];

const post = (path: string, body: unknown): Promise<Response> => tailgatePost(world.tailgate.baseURL, path, body);

describe('the official openai client: chat completions', () => {
  it('answers a tool call, then the tool result, statelessly', async () => {
    const before = await storedKeys();
    const messages: ChatCompletionMessageParam[] = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'call get_weather {"city":"Paris"}' },
    ];
    const first = await world.client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages,
      tools: [weather],
      temperature: 0,
      max_completion_tokens: 100,
    });
    expect(first).toMatchObject({ object: 'chat.completion', model: 'gpt-4o-mini' });
    expect(first.id).toMatch(/^chatcmpl_[0-9a-f]{24}$/);
    const choice = first.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBeNull();
    expect(choice.message.tool_calls).toEqual([
      {
        id: expect.stringMatching(/^call_/),
        type: 'function',
        function: { name: 'get_weather', arguments: '{"city":"Paris"}' },
      },
    ]);
    expect(first.usage).toMatchObject({
      prompt_tokens: expect.any(Number),
      completion_tokens: expect.any(Number),
      prompt_tokens_details: { cached_tokens: 0 },
    });
    expect(first.usage!.total_tokens).toBe(first.usage!.prompt_tokens + first.usage!.completion_tokens);

    messages.push(choice.message as ChatCompletionMessageParam, {
      role: 'tool',
      tool_call_id: choice.message.tool_calls![0]!.id,
      content: '18C, clear',
    });
    const second = await world.client.chat.completions.create({
      model: 'echo',
      messages,
      tools: [weather],
      max_tokens: 50,
    });
    expect(second.choices[0]).toMatchObject({
      finish_reason: 'stop',
      message: { role: 'assistant', content: 'echo: call get_weather {"city":"Paris"}' },
    });
    // Nothing is stored.
    expect(await storedKeys()).toEqual(before);

    const none = await world.client.chat.completions.create({
      model: 'echo',
      messages: [{ role: 'user', content: 'call get_weather {}' }],
      tools: [weather],
      tool_choice: 'none',
    });
    expect(none.choices[0]!.message.content).toBe('echo: call get_weather {}');
  });

  it('streams chunks in the official format, ending with the usage chunk and [DONE]', async () => {
    const stream = await world.client.chat.completions.create({
      model: 'echo',
      messages: [{ role: 'user', content: 'stream these words please' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.length).toBeGreaterThan(3);
    expect(new Set(chunks.map((chunk) => chunk.id)).size).toBe(1);
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant');
    expect(chunks.flatMap((chunk) => chunk.choices.map((choice) => choice.delta.content ?? '')).join('')).toBe(
      'echo: stream these words please',
    );
    const finishing = chunks.at(-2)!;
    expect(finishing.choices[0]!.finish_reason).toBe('stop');
    expect(finishing.usage).toBeNull();
    const usage = chunks.at(-1)!;
    expect(usage.choices).toEqual([]);
    expect(usage.usage).toMatchObject({ prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number) });

    const calls = await world.client.chat.completions.create({
      model: 'echo',
      messages: [{ role: 'user', content: 'call get_weather {"city":"Oslo"}' }],
      tools: [weather],
      stream: true,
    });
    const callChunks: ChatCompletionChunk[] = [];
    for await (const chunk of calls) callChunks.push(chunk);
    expect(callChunks.flatMap((chunk) => chunk.choices[0]?.delta.tool_calls ?? [])).toEqual([
      {
        index: 0,
        id: expect.stringMatching(/^call_/),
        type: 'function',
        function: { name: 'get_weather', arguments: '{"city":"Oslo"}' },
      },
    ]);
    expect(callChunks.at(-1)!.choices[0]!.finish_reason).toBe('tool_calls');
    expect(callChunks.every((chunk) => chunk.usage === undefined)).toBe(true);
  });

  it('applies the strategies of x-tailgate-strategies to the messages sent (unknown names are a 400)', async () => {
    const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: 'hello' }];
    const chosen = await world.client.chat.completions.create(
      { model: 'echo', messages },
      { headers: { 'x-tailgate-strategies': 'none' } },
    );
    expect(
      (chosen as unknown as { tailgate: { context: { strategies: string[] } } }).tailgate.context.strategies,
    ).toEqual(['none']);
    const unknown = await world.client.chat.completions
      .create({ model: 'echo', messages }, { headers: { 'x-tailgate-strategies': 'no_such_strategy' } })
      .catch((error: unknown) => error);
    expect(unknown).toBeInstanceOf(OpenAI.BadRequestError);
    expect(unknown).toMatchObject({ code: 'unknown_strategy', param: 'x-tailgate-strategies' });
    // It names the header as a header's other refusals do: `details.field` and the message's start.
    const tooLong = await world.client.chat.completions
      .create({ model: 'echo', messages }, { headers: { 'x-tailgate-strategies': 'x'.repeat(1001) } })
      .catch((error: unknown) => error);
    expect(tooLong).toMatchObject({ code: 'invalid_request', param: 'x-tailgate-strategies' });
    for (const refused of [unknown, tooLong] as InstanceType<typeof OpenAI.BadRequestError>[]) {
      const error = refused.error as { message: string; details: { field: string } };
      expect(error.details.field).toBe('x-tailgate-strategies');
      expect(error.message).toMatch(/^header\.x-tailgate-strategies: /);
    }
    expect((unknown as { error: { details: unknown } }).error.details).toMatchObject({
      strategy: 'no_such_strategy',
      known: expect.arrayContaining(['none']),
    });
  });

  it('delivers at most 32 notices of x-tailgate-session a call (MAX_NOTICES_PER_TURN), the rest next', async () => {
    const id = `chat-inbox-cap-${Date.now()}`;
    expect((await post('/sessions', { id })).status).toBe(201);
    const names = Array.from({ length: 34 }, (_, index) => `n${String(index).padStart(2, '0')}`);
    for (const name of names) expect((await post(`/sessions/${id}/inbox`, { name, content: name })).status).toBe(201);
    const delivered = async () => {
      const answer = await world.client.chat.completions.create(
        { model: 'echo', messages: [{ role: 'user', content: 'What next?' }] },
        { headers: { 'x-tailgate-session': id } },
      );
      return (answer as unknown as { tailgate: { context: { notices_delivered: string[] } } }).tailgate.context
        .notices_delivered;
    };
    expect(await delivered()).toEqual(names.slice(0, 32));
    expect(await delivered()).toEqual(names.slice(32));
  });

  it('delivers the inbox of x-tailgate-session and answers its abort notice with 409', async () => {
    const id = `chat-inbox-${Date.now()}`;
    expect((await post('/sessions', { id })).status).toBe(201);
    expect(
      (await post(`/sessions/${id}/inbox`, { name: '0001-budget.md', content: 'Budget left: 2 USD' })).status,
    ).toBe(201);
    const delivered = await world.client.chat.completions.create(
      { model: 'echo', messages: [{ role: 'user', content: 'What next?' }] },
      { headers: { 'x-tailgate-session': id } },
    );
    expect(delivered.choices[0]!.message.content).toBe('echo: Budget left: 2 USD');
    expect(
      (delivered as unknown as { tailgate: { context: { notices_delivered: string[] } } }).tailgate.context
        .notices_delivered,
    ).toEqual(['0001-budget.md']);
    // Consumed: the next call does not see it.
    const again = await world.client.chat.completions.create(
      { model: 'echo', messages: [{ role: 'user', content: 'What next?' }] },
      { headers: { 'x-tailgate-session': id } },
    );
    expect(again.choices[0]!.message.content).toBe('echo: What next?');

    expect((await post(`/sessions/${id}/inbox`, { name: 'abort', content: 'budget exhausted' })).status).toBe(201);
    const aborted = await world.client.chat.completions
      .create(
        { model: 'echo', messages: [{ role: 'user', content: 'go on' }] },
        { headers: { 'x-tailgate-session': id } },
      )
      .catch((error: unknown) => error);
    expect(aborted).toBeInstanceOf(OpenAI.ConflictError);
    expect(aborted).toMatchObject({ code: 'aborted', type: 'invalid_request_error' });
    const missing = await world.client.chat.completions
      .create(
        { model: 'echo', messages: [{ role: 'user', content: 'x' }] },
        { headers: { 'x-tailgate-session': 'no-such-session' } },
      )
      .catch((error: unknown) => error);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    const malformed = await world.client.chat.completions
      .create(
        { model: 'echo', messages: [{ role: 'user', content: 'x' }] },
        { headers: { 'x-tailgate-session': 'a b' } },
      )
      .catch((error: unknown) => error);
    expect(malformed).toMatchObject({ status: 400, param: 'x-tailgate-session' });
  });

  it('takes logprobs: a choice asking for them carries none where the provider gives none, streamed too', async () => {
    const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: 'hello' }];
    const asked = await world.client.chat.completions.create({
      model: 'echo',
      messages,
      logprobs: true,
      top_logprobs: 2,
    });
    expect(asked.choices[0]!.logprobs).toEqual({ content: [], refusal: null });
    expect(asked.choices[0]!.message.content).toBe('echo: hello');
    const plain = await world.client.chat.completions.create({ model: 'echo', messages });
    expect(plain.choices[0]!.logprobs).toBeNull();
    const stream = await world.client.chat.completions.create({
      model: 'echo',
      messages,
      logprobs: true,
      stream: true,
    });
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const choices = chunks.flatMap((chunk) => chunk.choices);
    expect(choices.length).toBeGreaterThan(1);
    for (const choice of choices) expect(choice.logprobs).toEqual({ content: [], refusal: null });
  });

  it('tool_choice allowed_tools lets the model call the listed tools alone; one not offered is a 400', async () => {
    const readFile = { type: 'function' as const, function: { name: 'read_file', parameters: { type: 'object' } } };
    const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: 'call get_weather {"city":"Oslo"}' }];
    const allowing = (name: string) => ({
      type: 'allowed_tools' as const,
      allowed_tools: { mode: 'auto' as const, tools: [{ type: 'function' as const, function: { name } }] },
    });
    const allowed = await world.client.chat.completions.create({
      model: 'echo',
      messages,
      tools: [weather, readFile],
      tool_choice: allowing('get_weather'),
    });
    expect(
      allowed.choices[0]!.message.tool_calls?.map((call) => call.type === 'function' && call.function.name),
    ).toEqual(['get_weather']);
    const left = await world.client.chat.completions.create({
      model: 'echo',
      messages,
      tools: [weather, readFile],
      tool_choice: allowing('read_file'),
    });
    expect(left.choices[0]!.message.tool_calls).toBeUndefined();
    expect(left.choices[0]!.finish_reason).toBe('stop');
    const unknown = await world.client.chat.completions
      .create({ model: 'echo', messages, tools: [weather], tool_choice: allowing('read_file') })
      .catch((error: unknown) => error);
    expect(unknown).toMatchObject({ status: 400, param: 'tool_choice.allowed_tools.tools[0].function.name' });
  });

  it('refuses what it does not support, naming the field', async () => {
    const image = await world.client.chat.completions
      .create({
        model: 'echo',
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://example.com/a.png' } }] }],
      })
      .catch((error: unknown) => error);
    expect(image).toBeInstanceOf(OpenAI.BadRequestError);
    expect(image).toMatchObject({ param: 'messages[0].content[0]' });
    expect((image as Error).message).toContain('messages[0].content[0]: image_url must be an https:// or data: URL');
    // Named by its message's position, whatever the system messages and tool calls before it.
    const parts = [
      { type: 'text' as const, text: 'and' },
      { type: 'image_url' as const, image_url: { url: 'http://example.com/a.png' } },
    ];
    const messages: ChatCompletionMessageParam[] = [{ role: 'system', content: 'be brief' }, ...answeredCall];
    messages.splice(1, 0, { role: 'user', content: 'look' });
    messages.push({ role: 'user', content: parts });
    const later = await world.client.chat.completions.create({ model: 'echo', messages }).catch((error) => error);
    expect(later).toMatchObject({ status: 400, param: 'messages[4].content[1]' });
    const uploaded = await world.client.chat.completions
      .create({ model: 'echo', messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: 'file_1' } }] }] })
      .catch((error: unknown) => error);
    expect(uploaded).toMatchObject({
      status: 400,
      param: 'messages[0].content[0].file.file_id',
      message: '400 messages[0].content[0].file.file_id: this field is not supported by tailgate',
    });
    const n = await world.client.chat.completions
      .create({ model: 'echo', messages: [{ role: 'user', content: 'x' }], n: 2 })
      .catch((error: unknown) => error);
    expect(n).toMatchObject({ status: 400, param: 'n' });
    const logprobs = await world.client.chat.completions
      .create({ model: 'echo', messages: [{ role: 'user', content: 'x' }], logprobs: true, top_logprobs: 21 })
      .catch((error: unknown) => error);
    expect(logprobs).toMatchObject({ status: 400, param: 'top_logprobs' });
    const late = await world.client.chat.completions
      .create({
        model: 'echo',
        messages: [
          { role: 'user', content: 'x' },
          { role: 'system', content: 'late' },
        ],
      })
      .catch((error: unknown) => error);
    expect(late).toMatchObject({ status: 400, param: 'messages[1].role' });
    const model = await world.client.chat.completions
      .create({ model: 'gpt-unknown', messages: [{ role: 'user', content: 'x' }] })
      .catch((error: unknown) => error);
    expect(model).toMatchObject({ status: 404, code: 'model_not_found' });
    const lookup = { type: 'function' as const, function: { name: 'lookup', parameters: { type: 'object' } } };
    const choice = { type: 'function' as const, function: { name: 'search' } };
    for (const tools of [[lookup], undefined]) {
      const unknown = await world.client.chat.completions
        .create({
          model: 'echo',
          messages: [{ role: 'user', content: 'x' }],
          ...(tools ? { tools } : {}),
          tool_choice: choice,
        })
        .catch((error: unknown) => error);
      expect(unknown).toMatchObject({ status: 400, param: 'tool_choice' });
    }
  });

  it('refuses stream_options without stream: true, as OpenAI does', async () => {
    const message = [{ role: 'user' as const, content: 'x' }];
    for (const stream of [undefined, false, null]) {
      const options = await post('/chat/completions', {
        model: 'echo',
        messages: message,
        ...(stream !== undefined ? { stream } : {}),
        stream_options: { include_usage: true },
      });
      expect(options.status).toBe(400);
      expect(((await options.json()) as { error: unknown }).error).toMatchObject({
        type: 'invalid_request_error',
        param: 'stream_options',
        message: expect.stringContaining("only allowed when 'stream' is enabled"),
      });
    }
    // Null stands for a field not given.
    expect((await post('/chat/completions', { model: 'echo', messages: message, stream_options: null })).status).toBe(
      200,
    );
    const streamed = await world.client.chat.completions.create({
      model: 'echo',
      messages: message,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of streamed) chunks.push(chunk);
    expect(chunks.at(-1)?.usage).toBeTruthy();
  });

  it('refuses top_logprobs without logprobs: true, as OpenAI does', async () => {
    const message = [{ role: 'user' as const, content: 'x' }];
    for (const logprobs of [undefined, false, null]) {
      const top = await post('/chat/completions', {
        model: 'echo',
        messages: message,
        ...(logprobs !== undefined ? { logprobs } : {}),
        top_logprobs: 2,
      });
      expect(top.status).toBe(400);
      expect(((await top.json()) as { error: unknown }).error).toMatchObject({
        type: 'invalid_request_error',
        param: 'top_logprobs',
        message: expect.stringContaining("needs 'logprobs' to be true"),
      });
    }
    // Null stands for a field not given.
    expect((await post('/chat/completions', { model: 'echo', messages: message, top_logprobs: null })).status).toBe(
      200,
    );
    const asked = await world.client.chat.completions.create({
      model: 'echo',
      messages: message,
      logprobs: true,
      top_logprobs: 2,
    });
    expect(asked.choices[0]?.logprobs).toEqual({ content: [], refusal: null });
  });
});

describe('chat messages and tailgate items', () => {
  it('maps messages to items and back, folding calls into their assistant message', () => {
    const messages: ChatCompletionMessageParam[] = [
      { role: 'developer', content: 'Be brief.' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b' },
        ],
      },
      ...answeredCall,
      { role: 'assistant', content: 'ok' },
    ];
    const { instructions, items } = chatMessagesToItems(messages as never);
    expect(instructions).toBe('Be brief.');
    expect(items).toEqual([
      { type: 'message', role: 'user', content: 'a\nb' },
      { type: 'message', role: 'assistant', content: 'checking' },
      { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
      { type: 'function_call_output', call_id: 'c1', output: 'done' },
      { type: 'message', role: 'assistant', content: 'ok' },
    ]);
    expect(itemsToChatMessages(items)).toEqual([
      { role: 'user', content: 'a\nb' },
      ...answeredCall,
      { role: 'assistant', content: 'ok' },
    ]);
  });
});

describe('@ai-sdk/openai in chat mode against tailgate', () => {
  it('generateText runs a tool through chat completions and answers in a second step', async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL });
    const calls: unknown[] = [];
    const result = await generateText({
      model: openai.chat('gpt-4o-mini'),
      prompt: 'call get_weather {"city":"Paris"}',
      tools: {
        get_weather: tool({
          inputSchema: z.object({ city: z.string() }),
          execute: async (input) => {
            calls.push(input);
            return '18C, clear';
          },
        }),
      },
      stopWhen: stepCountIs(3),
    });
    expect(calls).toEqual([{ city: 'Paris' }]);
    expect(result.steps).toHaveLength(2);
    expect(result.text).toBe('echo: call get_weather {"city":"Paris"}');
    expect(result.steps[0]!.response.id).toMatch(/^chatcmpl_/);
  });

  it("generateText with the provider's logprobs option gets an answer and no log probabilities", async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL });
    const result = await generateText({
      model: openai.chat('echo'),
      prompt: 'hello',
      providerOptions: { openai: { logprobs: 3 } },
    });
    expect(result.text).toBe('echo: hello');
    expect(result.providerMetadata?.openai?.logprobs).toEqual([]);
  });

  it('streamText streams the answer with usage', async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL });
    const result = streamText({ model: openai.chat('echo'), system: 'Be brief.', prompt: 'stream me please' });
    const chunks: string[] = [];
    for await (const chunk of result.textStream) chunks.push(chunk);
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.join('')).toBe('echo: stream me please');
    expect((await result.usage).inputTokens).toBeGreaterThan(0);
  });
});

import OpenAI from 'openai';
import type { ChatCompletionTokenLogprob } from 'openai/resources/chat/completions';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  fixture,
  startFakeProvider,
  type FakeProvider,
  type FakeReply,
  type RecordedRequest,
} from '../support/fake-providers/fake-provider-server.ts';
import { startTailgate, TOKEN } from './server.ts';

// The provider's log probabilities, asked for only when the client asks, answered through the
// facade: Chat Completions' `choices[].logprobs.content`, and the Responses API's output_text
// `logprobs` and its streamed text events', kept with a stored response's object.
let wire: FakeProvider;
let tailgate: Awaited<ReturnType<typeof startTailgate>>;
let client: OpenAI;
let answer: (request: RecordedRequest) => FakeReply;

/** The recorded answer: with log probabilities when the request asked for them, as OpenAI answers. */
function recorded(request: RecordedRequest): FakeReply {
  const name = request.body?.logprobs === true ? 'openai-chat-logprobs' : 'openai-chat-text';
  return request.body?.stream ? { sse: fixture(`${name}.sse`) } : { json: JSON.parse(fixture(`${name}.json`)) };
}

/** The content token log probabilities of the recorded answer. */
const tokens: ChatCompletionTokenLogprob[] = JSON.parse(fixture('openai-chat-logprobs.json')).choices[0].logprobs
  .content;

beforeAll(async () => {
  wire = await startFakeProvider((request) => answer(request));
  tailgate = await startTailgate({
    OPENAI_API_KEY: 'test-key',
    OPENAI_BASE_URL: wire.baseURL,
    MODEL_MAX_RETRIES: '0',
    MODEL_ALIASES: 'gpt-wire=openai:gpt-4.1',
  });
  client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
});
beforeEach(() => {
  answer = recorded;
  wire.requests.length = 0;
});
afterAll(async () => {
  await tailgate.close();
  await wire.close();
});

const messages = [{ role: 'user' as const, content: 'hi' }];

/** A Responses output_text's log probabilities of the recorded tokens: each token's bytes, and its top ones'. */
const responseTokens = tokens.map(({ token, logprob, bytes, top_logprobs }) => ({
  token,
  logprob,
  bytes,
  top_logprobs: top_logprobs.map((top) => ({ token: top.token, logprob: top.logprob, bytes: top.bytes })),
}));
/** A streamed text event's: token and logprob. */
const eventTokens = (from: readonly ChatCompletionTokenLogprob[]) =>
  from.map(({ token, logprob, top_logprobs }) => ({
    token,
    logprob,
    top_logprobs: top_logprobs.map((top) => ({ token: top.token, logprob: top.logprob })),
  }));

describe('chat completions', () => {
  it("asks the provider for logprobs and top_logprobs, and answers the provider's tokens", async () => {
    const completion = await client.chat.completions.create({
      model: 'gpt-wire',
      messages,
      logprobs: true,
      top_logprobs: 2,
    });
    expect(wire.requests[0]!.body).toMatchObject({ logprobs: true, top_logprobs: 2 });
    expect(completion.choices[0]!.message.content).toBe('Hello! How');
    expect(completion.choices[0]!.logprobs).toEqual({ content: tokens, refusal: null });
  });

  it('asks for none when the client does not, and answers null', async () => {
    const completion = await client.chat.completions.create({ model: 'gpt-wire', messages });
    expect(wire.requests[0]!.body).not.toHaveProperty('logprobs');
    expect(wire.requests[0]!.body).not.toHaveProperty('top_logprobs');
    expect(completion.choices[0]!.logprobs).toBeNull();
  });

  it('streams each text chunk with the tokens of its text', async () => {
    const stream = await client.chat.completions.create({
      model: 'gpt-wire',
      messages,
      logprobs: true,
      top_logprobs: 2,
      stream: true,
    });
    const texts: { content: string; tokens: ChatCompletionTokenLogprob[] }[] = [];
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (choice?.delta.content) texts.push({ content: choice.delta.content, tokens: choice.logprobs?.content ?? [] });
    }
    expect(wire.requests[0]!.body).toMatchObject({ stream: true, logprobs: true, top_logprobs: 2 });
    expect(texts).toEqual([
      { content: 'Hello', tokens: [tokens[0]] },
      { content: '!', tokens: [tokens[1]] },
      { content: ' How', tokens: [tokens[2]] },
    ]);
  });

  it('answers a malformed logprobs from the provider as its failure', async () => {
    answer = () => {
      const body = JSON.parse(fixture('openai-chat-logprobs.json'));
      body.choices[0].logprobs.content[0].logprob = 'high';
      return { json: body };
    };
    const failure = await client.chat.completions
      .create({ model: 'gpt-wire', messages, logprobs: true })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(OpenAI.APIError);
    expect((failure as InstanceType<typeof OpenAI.APIError>).status).toBeGreaterThanOrEqual(500);
  });
});

describe('responses', () => {
  const include = ['message.output_text.logprobs' as const];

  it("store: false with include asks for them and answers the output_text's logprobs", async () => {
    const response = await client.responses.create({
      model: 'gpt-wire',
      input: 'hi',
      store: false,
      include,
      top_logprobs: 2,
    });
    expect(wire.requests[0]!.body).toMatchObject({ logprobs: true, top_logprobs: 2 });
    const message = response.output.find((item) => item.type === 'message');
    expect(message?.type === 'message' && message.content[0]).toEqual({
      type: 'output_text',
      text: 'Hello! How',
      annotations: [],
      logprobs: responseTokens,
    });
  });

  it('store: false without include asks for none', async () => {
    const response = await client.responses.create({ model: 'gpt-wire', input: 'hi', store: false, top_logprobs: 2 });
    expect(wire.requests[0]!.body).not.toHaveProperty('logprobs');
    const message = response.output.find((item) => item.type === 'message');
    expect(message?.type === 'message' && message.content[0]).toMatchObject({ logprobs: [] });
  });

  it('streams the tokens on each output_text.delta, and all of them on the done events', async () => {
    const stream = await client.responses.create({
      model: 'gpt-wire',
      input: 'hi',
      store: false,
      include,
      top_logprobs: 2,
      stream: true,
    });
    const events: ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const deltas = events.flatMap((event) => (event.type === 'response.output_text.delta' ? [event] : []));
    expect(deltas.map(({ delta, logprobs }) => ({ delta, logprobs }))).toEqual([
      { delta: 'Hello', logprobs: eventTokens(tokens.slice(0, 1)) },
      { delta: '!', logprobs: eventTokens(tokens.slice(1, 2)) },
      { delta: ' How', logprobs: eventTokens(tokens.slice(2, 3)) },
    ]);
    const done = events.find((event) => event.type === 'response.output_text.done');
    expect(done?.type === 'response.output_text.done' && done.logprobs).toEqual(eventTokens(tokens));
    const part = events.find((event) => event.type === 'response.content_part.done');
    expect(part?.type === 'response.content_part.done' && part.part).toMatchObject({ logprobs: responseTokens });
    const completed = events.at(-1);
    expect(completed?.type).toBe('response.completed');
    const message = completed?.type === 'response.completed' && completed.response.output[0];
    expect(message && message.type === 'message' && message.content[0]).toMatchObject({ logprobs: responseTokens });
  });

  it('a stored response keeps them in its object: GET and a keyed retry answer them again', async () => {
    const body = { model: 'gpt-wire', input: 'hi', include, top_logprobs: 2 };
    const key = { headers: { 'Idempotency-Key': `logprobs-${Math.random()}` } };
    const response = await client.responses.create(body, key);
    expect(wire.requests[0]!.body).toMatchObject({ logprobs: true, top_logprobs: 2 });
    const message = response.output.find((item) => item.type === 'message');
    expect(message?.type === 'message' && message.content[0]).toMatchObject({ logprobs: responseTokens });
    const retrieved = await client.responses.retrieve(response.id, { include });
    expect(retrieved.output).toEqual(response.output);
    const retried = await client.responses.create(body, key);
    expect(wire.requests).toHaveLength(1);
    expect(retried.output).toEqual(response.output);
  });

  it('a stored streamed response carries them on its events and in the response it keeps', async () => {
    const stream = await client.responses.create({
      model: 'gpt-wire',
      input: 'hi',
      include,
      top_logprobs: 2,
      stream: true,
    });
    const events: ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const deltas = events.flatMap((event) => (event.type === 'response.output_text.delta' ? [event.logprobs] : []));
    expect(deltas).toEqual(tokens.map((token) => eventTokens([token])));
    const completed = events.at(-1);
    if (completed?.type !== 'response.completed') throw new Error('the stream did not complete');
    const message = completed.response.output.find((item) => item.type === 'message');
    expect(message?.type === 'message' && message.content[0]).toMatchObject({ logprobs: responseTokens });
    const retrieved = await client.responses.retrieve(completed.response.id);
    expect(retrieved.output).toEqual(completed.response.output);
  });

  it('a keyed retry of a streamed response streams the tokens its completed response answers', async () => {
    const body = { model: 'gpt-wire', input: 'hi', include, top_logprobs: 2, stream: true as const };
    const key = { headers: { 'Idempotency-Key': `logprobs-stream-${Math.random()}` } };
    const run = async () => {
      const events: ResponseStreamEvent[] = [];
      for await (const event of await client.responses.create(body, key)) events.push(event);
      return events;
    };
    const first = await run();
    const again = await run();
    expect(wire.requests).toHaveLength(1);
    for (const events of [first, again]) {
      const completed = events.at(-1);
      if (completed?.type !== 'response.completed') throw new Error('the stream did not complete');
      const message = completed.response.output.find((item) => item.type === 'message');
      expect(message?.type === 'message' && message.content[0]).toMatchObject({ logprobs: responseTokens });
      const deltas = events.flatMap((event) => (event.type === 'response.output_text.delta' ? event.logprobs : []));
      expect(deltas).toEqual(eventTokens(tokens));
      const done = events.find((event) => event.type === 'response.output_text.done');
      expect(done?.type === 'response.output_text.done' && done.logprobs).toEqual(eventTokens(tokens));
      const item = events.find((event) => event.type === 'response.output_item.done');
      expect(item?.type === 'response.output_item.done' && item.item).toEqual(message);
    }
  });

  it("refuses a Responses request's logprobs by name: the Responses API asks with include", async () => {
    const failure = await client.responses
      .create({ model: 'gpt-wire', input: 'hi', store: false, logprobs: true } as OpenAI.Responses.ResponseCreateParams)
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(OpenAI.BadRequestError);
    expect((failure as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({ param: 'logprobs' });
    expect(wire.requests).toHaveLength(0);
  });

  it('a background response asks for none: its answer is built from its stored items', async () => {
    const queued = await client.responses.create({ model: 'gpt-wire', input: 'hi', include, background: true });
    let response = queued;
    while (response.status === 'queued' || response.status === 'in_progress') {
      response = await client.responses.retrieve(queued.id);
    }
    expect(response.status).toBe('completed');
    expect(wire.requests[0]!.body).not.toHaveProperty('logprobs');
  });
});

describe('a stream whose tokens come in a chunk without text', () => {
  /** The recorded stream with each chunk's tokens moved to a chunk of no text after it. */
  function tokensAfterText(): FakeReply {
    const chunks = fixture('openai-chat-logprobs.sse')
      .split('\n\n')
      .filter((line) => line.startsWith('data: {'))
      .map((line) => JSON.parse(line.slice('data: '.length)));
    const moved = chunks.flatMap((chunk) => {
      const choice = chunk.choices[0];
      if (!choice?.logprobs?.content?.length) return [chunk];
      return [
        { ...chunk, choices: [{ ...choice, logprobs: null }] },
        { ...chunk, choices: [{ ...choice, delta: {} }] },
      ];
    });
    return { sse: `${moved.map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`).join('')}data: [DONE]\n\n` };
  }

  it('gives them to the text before them, in a chat completion stream', async () => {
    answer = tokensAfterText;
    const stream = await client.chat.completions.create({
      model: 'gpt-wire',
      messages,
      logprobs: true,
      top_logprobs: 2,
      stream: true,
    });
    let text = '';
    const got: ChatCompletionTokenLogprob[] = [];
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      got.push(...(chunk.choices[0]?.logprobs?.content ?? []));
    }
    expect(text).toBe('Hello! How');
    expect(got).toEqual(tokens);
  });

  it("gives them to the output_text's done events and the completed response", async () => {
    answer = tokensAfterText;
    const stream = await client.responses.create({
      model: 'gpt-wire',
      input: 'hi',
      store: false,
      include: ['message.output_text.logprobs'],
      top_logprobs: 2,
      stream: true,
    });
    const events: ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const done = events.find((event) => event.type === 'response.output_text.done');
    expect(done?.type === 'response.output_text.done' && done.logprobs).toEqual(eventTokens(tokens));
    const completed = events.at(-1);
    const message = completed?.type === 'response.completed' && completed.response.output[0];
    expect(message && message.type === 'message' && message.content[0]).toMatchObject({
      text: 'Hello! How',
      logprobs: responseTokens,
    });
  });
});

describe('an answer of text, a call and text again', () => {
  /** The recorded tokens' chunks: the first token's text, a call, then the other tokens' text. */
  function textCallText(): FakeReply {
    const chunk = (delta: unknown, logprobs: unknown, finish: string | null = null) =>
      `data: ${JSON.stringify({
        id: 'chatcmpl-1',
        object: 'chat.completion.chunk',
        created: 1746542142,
        model: 'gpt-4.1',
        choices: [{ index: 0, delta, logprobs, finish_reason: finish }],
      })}\n\n`;
    const call = { index: 0, id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{}' } };
    return {
      sse: [
        chunk({ role: 'assistant', content: 'Hello' }, { content: tokens.slice(0, 1), refusal: null }),
        chunk({ tool_calls: [call] }, null),
        chunk({ content: '! How' }, { content: tokens.slice(1), refusal: null }),
        chunk({}, null, 'tool_calls'),
        'data: [DONE]\n\n',
      ].join(''),
    };
  }

  it.each([false, true])(
    'gives each message its tokens, on its events as in the completed response (store: %s)',
    async (store) => {
      answer = textCallText;
      const stream = await client.responses.create({
        model: 'gpt-wire',
        input: 'hi',
        store,
        include: ['message.output_text.logprobs'],
        top_logprobs: 2,
        tools: [
          { type: 'function', name: 'get_weather', parameters: { type: 'object', properties: {} }, strict: false },
        ],
        stream: true,
      });
      const events: ResponseStreamEvent[] = [];
      for await (const event of stream) events.push(event);
      const completed = events.at(-1);
      if (completed?.type !== 'response.completed') throw new Error('the stream did not complete');
      const output = completed.response.output;
      expect(output.map((item) => item.type)).toEqual(['message', 'function_call', 'message']);
      const texts = output.flatMap((item) => (item.type === 'message' ? [item.content[0]] : []));
      expect(texts).toMatchObject([
        { text: 'Hello', logprobs: responseTokens.slice(0, 1) },
        { text: '! How', logprobs: responseTokens.slice(1) },
      ]);
      const done = events.flatMap((event) => (event.type === 'response.output_item.done' ? [event.item] : []));
      expect(done).toEqual(output);
      const textDone = events.flatMap((event) => (event.type === 'response.output_text.done' ? [event.logprobs] : []));
      expect(textDone).toEqual([eventTokens(tokens.slice(0, 1)), eventTokens(tokens.slice(1))]);
    },
  );
});

describe('an answer cut at max_output_tokens', () => {
  it.each([false, true])(
    'keeps its tokens on the incomplete message, streamed and completed (store: %s)',
    async (store) => {
      answer = (request) => {
        const reply = recorded(request);
        return { sse: (reply as { sse: string }).sse.replace('"finish_reason":"stop"', '"finish_reason":"length"') };
      };
      const stream = await client.responses.create({
        model: 'gpt-wire',
        input: 'hi',
        store,
        include: ['message.output_text.logprobs'],
        top_logprobs: 2,
        max_output_tokens: 16,
        stream: true,
      });
      const events: ResponseStreamEvent[] = [];
      for await (const event of stream) events.push(event);
      const ended = events.at(-1);
      if (ended?.type !== 'response.incomplete') throw new Error('the stream did not end incomplete');
      const message = ended.response.output[0];
      expect(message).toMatchObject({ status: 'incomplete', content: [{ logprobs: responseTokens }] });
      const done = events.find((event) => event.type === 'response.output_item.done');
      expect(done?.type === 'response.output_item.done' && done.item).toEqual(message);
    },
  );
});

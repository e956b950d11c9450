import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { afterEach, describe, expect, it } from 'vitest';
import type { ModelRequest, TokenLogprob } from '../../lib/models/model.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { ResponseEventWriter } from '../../lib/openai/response-events.ts';
import type { TailgateResponse } from '../../lib/openai/responses.ts';
import { collectStream } from '../support/fake-providers/collect-stream.ts';
import {
  fixture,
  startFakeProvider,
  type FakeProvider,
  type FakeReply,
  type RecordedRequest,
} from '../support/fake-providers/fake-provider-server.ts';

// The chat completions adapter's log probabilities: asked for only with `settings.logprobs`,
// read from the answer (whole or streamed) and kept by output item.
let provider: FakeProvider | undefined;
afterEach(async () => {
  await provider?.close();
  provider = undefined;
});

async function start(reply: (request: RecordedRequest) => FakeReply) {
  provider = await startFakeProvider(reply);
  const model = resolveModel('openai:gpt-4.1', {
    OPENAI_BASE_URL: provider.baseURL,
    OPENAI_API_KEY: 'sk-test',
    MODEL_MAX_RETRIES: '0',
  });
  return { model, requests: provider.requests };
}

const recorded = (request: RecordedRequest): FakeReply =>
  request.body.stream
    ? { sse: fixture('openai-chat-logprobs.sse') }
    : { json: JSON.parse(fixture('openai-chat-logprobs.json')) };

const tokens: TokenLogprob[] = JSON.parse(fixture('openai-chat-logprobs.json')).choices[0].logprobs.content;

const asking = (logprobs?: number): ModelRequest => ({
  prompt: [{ type: 'message', role: 'user', content: 'hi' }],
  tools: [],
  ...(logprobs !== undefined ? { settings: { logprobs } } : {}),
});

/** A streamed answer: text with its tokens' log probabilities, then a tool call (none). */
function textThenCall(): string {
  const chunk = (delta: unknown, logprobs: unknown, finish: string | null = null) =>
    `data: ${JSON.stringify({
      id: 'chatcmpl-1',
      object: 'chat.completion.chunk',
      created: 1746542142,
      model: 'gpt-4.1',
      choices: [{ index: 0, delta, logprobs, finish_reason: finish }],
    })}\n\n`;
  const call = { index: 0, id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{}' } };
  return [
    chunk({ role: 'assistant', content: '' }, { content: [], refusal: null }),
    chunk({ content: 'Hello' }, { content: tokens.slice(0, 1), refusal: null }),
    chunk({ tool_calls: [call] }, null),
    chunk({}, null, 'tool_calls'),
    'data: [DONE]\n\n',
  ].join('');
}

describe('log probabilities of the chat completions adapter', () => {
  it('asks for them with top_logprobs and keeps a generated answer’s on its message', async () => {
    const { model, requests } = await start(recorded);
    expect(model.logprobs).toBe(true);
    const result = await model.generate(asking(3));
    expect(requests[0]!.body).toMatchObject({ logprobs: true, top_logprobs: 3 });
    expect(result.output).toEqual([{ type: 'message', role: 'assistant', content: 'Hello! How' }]);
    expect(result.logprobs).toEqual([tokens]);
  });

  it('asks for none unless asked, and answers none', async () => {
    const { model, requests } = await start(recorded);
    const result = await model.generate(asking());
    expect(requests[0]!.body).not.toHaveProperty('logprobs');
    expect(requests[0]!.body).not.toHaveProperty('top_logprobs');
    expect(result).not.toHaveProperty('logprobs');
    const events = await collectStream(model.stream(asking()));
    expect(events.filter((event) => event.type === 'text_delta').every((event) => !('logprobs' in event))).toBe(true);
  });

  it("streams each delta with its chunk's tokens, and keeps them by output item", async () => {
    const { model } = await start(recorded);
    const events = await collectStream(model.stream(asking(0)));
    const deltas = events.flatMap((event) => (event.type === 'text_delta' ? [event] : []));
    expect(deltas).toEqual([
      { type: 'text_delta', delta: 'Hello', logprobs: tokens.slice(0, 1) },
      { type: 'text_delta', delta: '!', logprobs: tokens.slice(1, 2) },
      { type: 'text_delta', delta: ' How', logprobs: tokens.slice(2, 3) },
    ]);
    const done = events.at(-1);
    expect(done?.type === 'done' && done.result.logprobs).toEqual([tokens]);
  });

  it("gives a call after the text none of the text's tokens", async () => {
    const { model } = await start(() => ({ sse: textThenCall() }));
    const events = await collectStream(model.stream(asking(0)));
    const done = events.at(-1);
    expect(done?.type === 'done' && done.result.output.map((item) => item.type)).toEqual(['message', 'function_call']);
    expect(done?.type === 'done' && done.result.logprobs).toEqual([tokens.slice(0, 1), []]);
  });
});

describe('a refusal', () => {
  // The AI SDK answers a refusal as the message's text: its tokens are those of logprobs.refusal.
  const refusal = (stream: boolean): FakeReply => {
    const refusalTokens = tokens.slice(0, 2);
    if (!stream) {
      const body = JSON.parse(fixture('openai-chat-logprobs.json'));
      body.choices[0].message = { role: 'assistant', content: null, refusal: 'Hello!' };
      body.choices[0].logprobs = { content: null, refusal: refusalTokens };
      return { json: body };
    }
    const chunk = (delta: unknown, logprobs: unknown, finish: string | null = null) =>
      `data: ${JSON.stringify({
        id: 'chatcmpl-1',
        object: 'chat.completion.chunk',
        created: 1746542142,
        model: 'gpt-4.1',
        choices: [{ index: 0, delta, logprobs, finish_reason: finish }],
      })}\n\n`;
    return {
      sse: [
        chunk({ role: 'assistant', content: null, refusal: '' }, { content: null, refusal: [] }),
        chunk({ refusal: 'Hello' }, { content: null, refusal: refusalTokens.slice(0, 1) }),
        chunk({ refusal: '!' }, { content: null, refusal: refusalTokens.slice(1, 2) }),
        chunk({}, null, 'stop'),
        'data: [DONE]\n\n',
      ].join(''),
    };
  };

  it("keeps the refusal's tokens on the message its text is, generated or streamed", async () => {
    const { model } = await start((request) => refusal(request.body.stream === true));
    const result = await model.generate(asking(2));
    expect(result.output).toMatchObject([{ type: 'message', role: 'assistant', content: 'Hello!' }]);
    expect(result.logprobs).toEqual([tokens.slice(0, 2)]);
    const events = await collectStream(model.stream(asking(2)));
    const done = events.at(-1);
    expect(done?.type === 'done' && done.result.output).toEqual(result.output);
    expect(done?.type === 'done' && done.result.logprobs).toEqual([tokens.slice(0, 2)]);
  });
});

describe('a provider that answers top_logprobs: null', () => {
  it('gives the token no top tokens, not a failed call', async () => {
    const { model } = await start(() => {
      const body = JSON.parse(fixture('openai-chat-logprobs.json'));
      for (const entry of body.choices[0].logprobs.content) entry.top_logprobs = null;
      return { json: body };
    });
    const result = await model.generate(asking(0));
    expect(result.logprobs).toEqual([tokens.map((entry) => ({ ...entry, top_logprobs: [] }))]);
  });
});

describe('a long answer', () => {
  // More tokens than a call's arguments may hold (a spread push of them overflows the stack).
  const many = 150_000;
  const long = Array.from({ length: many }, (_, index) => ({
    token: 'a',
    logprob: -index / many,
    bytes: [97],
    top_logprobs: [],
  }));

  it('keeps every token of a generated answer on its message', async () => {
    const { model } = await start(() => {
      const body = JSON.parse(fixture('openai-chat-logprobs.json'));
      body.choices[0].message.content = 'a'.repeat(many);
      body.choices[0].logprobs.content = long;
      return { json: body };
    });
    const result = await model.generate(asking(0));
    expect(result.logprobs?.[0]).toHaveLength(many);
    expect(result.logprobs?.[0]?.at(-1)).toEqual(long.at(-1));
  });

  it('gives every token to the done events of a text that comes in one delta', () => {
    const events: ResponseStreamEvent[] = [];
    const writer = new ResponseEventWriter(
      (index) => `msg_${index}`,
      (event) => events.push(event),
    );
    writer.delta('a'.repeat(many), long);
    writer.itemDone({ type: 'message', role: 'assistant', content: 'a'.repeat(many) });
    writer.failed({} as TailgateResponse);
    const done = events.find((event) => event.type === 'response.output_text.done');
    expect(done?.type === 'response.output_text.done' && done.logprobs).toHaveLength(many);
  });
});

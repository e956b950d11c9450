import { describe, expect, it } from 'vitest';
import { type FakeReply, fakeProviderForFile, fixture } from '../support/fake-providers/fake-provider-server.ts';
import { anthropicOverloaded, chatServerError, firstEvents } from '../support/fake-providers/in-band-errors.ts';
import { parseSse } from './http-suite.ts';
import { spendWorld } from './spend-world.ts';

// A provider that accepted a streamed call and then reports a failure inside the stream (a 200
// whose events end in an error): Anthropic's `event: error` (`overloaded_error`), an OpenAI
// Chat Completions chunk holding `error`. The native turn ends with an `error` event as the
// error JSON gives it, stores its input alone (no message or call cut short), charges its
// estimate, replays the failure under its key, and an empty input under a new key takes it
// again, after which the session's next prompt holds the call with its output.

const fake = fakeProviderForFile();

/** The input tokens a Messages stream's message_start reports, cache reads and writes included. */
function reportedInput(sse: string): number {
  const start = sse.split('\n\n').find((event) => event.startsWith('event: message_start'))!;
  const { usage } = JSON.parse(start.slice(start.indexOf('data: ') + 6)).message;
  return usage.input_tokens + (usage.cache_read_input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0);
}

const ANTHROPIC = 'anthropic:claude-sonnet-4-5';
const CHAT = 'openai-compatible:fake-model';

const cases = [
  // message_start, a text block begun, a ping and the first words.
  ['Anthropic, after some text', ANTHROPIC, firstEvents('anthropic-message-text.sse', 4) + anthropicOverloaded],
  // The text block whole, then a tool_use block begun with part of its input.
  ['Anthropic, inside a tool_use', ANTHROPIC, firstEvents('anthropic-message-tool-use.sse', 10) + anthropicOverloaded],
  ['Chat Completions, after some text', CHAT, firstEvents('openai-chat-text.sse', 3) + chatServerError],
  ['Chat Completions, inside a tool call', CHAT, firstEvents('openai-chat-tool-call.sse', 3) + chatServerError],
] as const;

/** The provider's whole answer (a call) to each model, streamed or not. */
function answerWithCall(model: string, stream: boolean): FakeReply {
  const name = model === ANTHROPIC ? 'anthropic-message-tool-use' : 'openai-chat-tool-call';
  return stream ? { sse: fixture(`${name}.sse`) } : { json: JSON.parse(fixture(`${name}.json`)) };
}

const tools = [
  {
    type: 'function',
    name: 'get_weather',
    parameters: { type: 'object', properties: { location: { type: 'string' } } },
  },
];

async function world() {
  const spend = await spendWorld(fake.provider.baseURL, {
    ANTHROPIC_API_KEY: 'test-key',
    ANTHROPIC_BASE_URL: fake.provider.baseURL,
    MODEL_MAX_RETRIES: '0',
  });
  const { harness, auth } = spend;
  const turn = async (id: string, body: Record<string, unknown>, key?: string) => {
    const response = await harness.fetch(`/v1/sessions/${id}/turns`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
      body: JSON.stringify({ tools, ...body }),
    });
    return { status: response.status, headers: response.headers, text: await response.text() };
  };
  return { ...spend, turn };
}

describe.each(cases)('a stream that reports an error in band: %s', (_, model, failing) => {
  it('ends with the error event, stores the input alone, and is taken again by an empty input', async () => {
    const { api, auth, drain, turn } = await world();
    const id = await api.session({ model });
    fake.next = { sse: failing };
    const failed = await turn(id, { input: 'Weather in Paris?', stream: true }, `${id}-1`);
    await drain();
    expect(failed.status).toBe(200);
    const frames = parseSse(failed.text);
    expect(frames.map((frame) => frame.event)).not.toContain('turn.completed');
    // The stream had begun: its 200 says nothing of the failure, so no status.
    const error = { code: 'model_error', message: 'the model call failed', details: { model } };
    expect(frames.at(-1)).toEqual({ event: 'error', data: { error } });

    // Stored: the input, nothing of the answer cut short.
    const stored = (await api.get(`/v1/sessions/${id}/items`)).body.items;
    expect(stored.map((item: any) => [item.type, item.role, item.content])).toEqual([
      ['message', 'user', 'Weather in Paris?'],
    ]);
    const receipt = (await api.get(`/v1/sessions/${id}/turns/1`)).body;
    expect(receipt).toMatchObject({ status: 'failed', error, output: null, usage_estimated: true });
    // The provider ran the model: the prompt and the output streamed so far are charged. Anthropic
    // reported the input in its message_start: that input is charged, not the prompt's estimate.
    const { input_tokens, output_tokens } = receipt.usage;
    expect(input_tokens).toBeGreaterThan(0);
    expect(output_tokens).toBeGreaterThan(0);
    if (model === ANTHROPIC) expect(input_tokens).toBe(reportedInput(failing));
    const charged = { turns: 0, input_tokens, output_tokens };
    expect((await api.get('/v1/tokens/current', auth)).body.usage).toMatchObject(charged);
    expect((await api.get(`/v1/sessions/${id}`)).body.usage).toMatchObject(charged);

    // Its key answers the failure again without a model call.
    const calls = fake.provider.requests.length;
    const replayed = await turn(id, { input: 'Weather in Paris?', stream: true }, `${id}-1`);
    expect(replayed.status).toBe(502);
    expect(JSON.parse(replayed.text)).toEqual({ error });
    expect(replayed.headers.get('x-should-retry')).toBe('false');
    expect(fake.provider.requests.length).toBe(calls);

    // An empty input under a new key takes the failed turn again: the model gets the input once.
    fake.next = answerWithCall(model, true);
    const again = await turn(id, { input: [], stream: true }, `${id}-2`);
    expect(parseSse(again.text).at(-1)?.event).toBe('turn.completed');
    expect(JSON.stringify(fake.provider.requests.at(-1)!.body.messages).split('Weather in Paris?')).toHaveLength(2);
    const items = (await api.get(`/v1/sessions/${id}/items`)).body.items.reverse();
    expect(items.filter((item: any) => item.role === 'user')).toHaveLength(1);
    const called = items.filter((item: any) => item.type === 'function_call');
    expect(called).toHaveLength(1);
    expect(() => JSON.parse(called[0].arguments)).not.toThrow();

    // The next prompt holds the call with its output.
    const { call_id } = called[0];
    fake.next = answerWithCall(model, false);
    const next = await turn(id, { input: [{ type: 'function_call_output', call_id, output: 'sunny' }] });
    expect(next.status, next.text).toBe(200);
    expect(JSON.stringify(fake.provider.requests.at(-1)!.body.messages).split(call_id)).toHaveLength(3);
  });
});

describe('Anthropic refusing the call before its stream (529 overloaded, 429 with retry-after)', () => {
  const overloaded = { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } };
  const limited = { type: 'error', error: { type: 'rate_limit_error', message: 'Number of request tokens exceeded' } };
  it.each([
    ['529', { status: 529, json: overloaded }, { status: 529 }, null],
    [
      '429',
      { status: 429, headers: { 'retry-after': '9' }, json: limited },
      { status: 429, retry_after_seconds: 9 },
      '9',
    ],
  ] as const)('%s: model_error with its status, nothing charged', async (_, reply, details, retryAfter) => {
    const { api, auth, drain, turn } = await world();
    const error = { code: 'model_error', message: 'the model call failed', details: { model: ANTHROPIC, ...details } };
    for (const stream of [false, true]) {
      const id = await api.session({ model: ANTHROPIC });
      fake.next = reply;
      const failed = await turn(id, { input: 'Hello', stream });
      await drain();
      if (stream) {
        expect(parseSse(failed.text)).toEqual([
          { event: 'turn.started', data: { turn: 1, first_seq: 2 } },
          { event: 'error', data: { error } },
        ]);
      } else {
        expect(failed.status).toBe(502);
        expect(JSON.parse(failed.text)).toEqual({ error });
        expect(failed.headers.get('retry-after')).toBe(retryAfter);
      }
      expect((await api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({ status: 'failed', usage: null });
    }
    expect((await api.get('/v1/tokens/current', auth)).body.usage).toMatchObject({ turns: 0, total_tokens: 0 });
  });
});

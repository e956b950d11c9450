import { APIError } from 'openai';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { parseResponseId } from '../../lib/openai/ids.ts';
import { type FakeReply, fixture } from '../support/fake-providers/fake-provider-server.ts';
import { anthropicOverloaded, chatServerError, firstEvents } from '../support/fake-providers/in-band-errors.ts';
import { specProblems, streamingEventSchema } from '../support/open-responses-spec.ts';
import { clientOnFakeProvider, tailgateGet } from './server.ts';

// A tool step of the official client's loop whose provider stream reports a failure in band
// (Anthropic's `event: error` `overloaded_error`, a Chat Completions chunk holding `error`),
// after some text or inside a call: the facade's stream closes what it opened (`incomplete`)
// and ends with `response.failed` (no `error` event, which the client would throw on), the
// conversation keeps the step's input alone, its estimate is charged, and the step sent again
// under the same `previous_response_id` goes on with the call's output stored once.

const recorded =
  (name: string) =>
  (stream: boolean): FakeReply =>
    stream ? { sse: fixture(`${name}.sse`) } : { json: JSON.parse(fixture(`${name}.json`)) };
let reply: (stream: boolean) => FakeReply = () => ({ status: 500, json: {} });
const world = clientOnFakeProvider(
  (request) => reply(Boolean(request.body?.stream)),
  (baseURL) => ({
    ANTHROPIC_API_KEY: 'test-key',
    ANTHROPIC_BASE_URL: baseURL,
    OPENAI_COMPATIBLE_BASE_URL: baseURL,
    MODEL_ALIASES: 'claude-wire=anthropic:claude-sonnet-4-5,chat-wire=openai-compatible:fake-model',
  }),
);

const cases = [
  [
    'Anthropic, after some text',
    'claude-wire',
    'anthropic',
    firstEvents('anthropic-message-text.sse', 4) + anthropicOverloaded,
    'message',
  ],
  [
    'Anthropic, inside a tool_use',
    'claude-wire',
    'anthropic',
    firstEvents('anthropic-message-tool-use.sse', 10) + anthropicOverloaded,
    'function_call',
  ],
  [
    'Chat Completions, after some text',
    'chat-wire',
    'openai-chat',
    firstEvents('openai-chat-text.sse', 3) + chatServerError,
    'message',
  ],
  [
    'Chat Completions, inside a tool call',
    'chat-wire',
    'openai-chat',
    firstEvents('openai-chat-tool-call.sse', 3) + chatServerError,
    'function_call',
  ],
] as const;

const tools = [
  {
    type: 'function' as const,
    name: 'get_weather',
    strict: false,
    parameters: { type: 'object', properties: { location: { type: 'string' } } },
  },
];

describe.each(cases)('a streamed step whose provider reports an error in band: %s', (_, model, wire, failing, cut) => {
  it('ends with response.failed, keeps the input alone, and goes on when sent again', async () => {
    reply = recorded(wire === 'anthropic' ? 'anthropic-message-tool-use' : 'openai-chat-tool-call');
    const first = await world.client.responses.create({ model, input: 'Weather in Paris?', tools });
    const call = first.output.find((item) => item.type === 'function_call')!;
    const input = [{ type: 'function_call_output' as const, call_id: call.call_id, output: 'sunny' }];

    reply = () => ({ sse: failing });
    const events: ResponseStreamEvent[] = [];
    const stream = world.client.responses.stream({ model, input, tools, previous_response_id: first.id });
    for await (const event of stream) events.push(event);
    for (const event of events) expect(specProblems(streamingEventSchema, event)).toEqual([]);
    expect(events.map((event) => event.sequence_number)).toEqual(events.map((__, index) => index));
    const failed = events.at(-1)!;
    const modelId = model === 'claude-wire' ? 'anthropic:claude-sonnet-4-5' : 'openai-compatible:fake-model';
    expect(failed).toMatchObject({
      type: 'response.failed',
      response: { status: 'failed', output: [], error: { code: 'model_error', message: 'the model call failed' } },
    });
    const done = events.filter((event) => event.type === 'response.output_item.done').at(-1);
    expect(done).toMatchObject({ item: { type: cut, status: 'incomplete' } });

    // The conversation holds the step's output of the call, nothing of the answer cut short.
    const { sessionId } = parseResponseId(first.id)!;
    const listed = async () =>
      (await tailgateGet(world.tailgate.baseURL, `/sessions/${sessionId}/items?limit=100`)).items
        .reverse()
        .map((item: any) => item.type);
    const before = first.output.map((item) => item.type);
    expect(await listed()).toEqual(['message', ...before, 'function_call_output']);
    const receipt = (await tailgateGet(world.tailgate.baseURL, `/sessions/${sessionId}/turns/2`)) as any;
    expect(receipt).toMatchObject({
      status: 'failed',
      output: null,
      usage_estimated: true,
      error: { details: { model: modelId } },
    });
    expect(receipt.usage.output_tokens).toBeGreaterThan(0);

    // The step sent again goes on: the output stored once, the call and its output in the prompt.
    reply = recorded(wire === 'anthropic' ? 'anthropic-message-text' : 'openai-chat-text');
    const again = await world.client.responses.create({ model, input, tools, previous_response_id: first.id });
    expect(again.status).toBe('completed');
    expect(await listed()).toEqual(['message', ...before, 'function_call_output', 'message']);
    const prompt = JSON.stringify(world.provider.requests.at(-1)!.body.messages);
    expect(prompt.split(call.call_id)).toHaveLength(3);
    const next = await world.client.responses.create({ model, input: 'And tomorrow?', previous_response_id: again.id });
    expect(next.status).toBe('completed');
    expect(JSON.stringify(world.provider.requests.at(-1)!.body.messages).split(call.call_id)).toHaveLength(3);
  });
});

// The Chat Completions route streams the failure as OpenAI does: a last chunk holding `error`,
// which the official client throws as an APIError carrying it.
describe.each(cases)(
  'a streamed chat completion whose provider reports an error in band: %s',
  (_, model, _w, failing) => {
    it('ends with an error chunk the client throws', async () => {
      reply = () => ({ sse: failing });
      const messages = [{ role: 'user' as const, content: 'Weather in Paris?' }];
      const stream = await world.client.chat.completions.create({ model, messages, stream: true });
      const chunks: unknown[] = [];
      const thrown = await (async () => {
        for await (const chunk of stream) chunks.push(chunk);
      })().catch((error: unknown) => error);
      expect(chunks.length).toBeGreaterThan(0);
      expect(thrown).toBeInstanceOf(APIError);
      expect((thrown as APIError).error).toMatchObject({
        type: 'server_error',
        code: 'model_error',
        message: 'the model call failed',
      });
    });
  },
);

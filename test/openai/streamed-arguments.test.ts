import { createOpenAI } from '@ai-sdk/openai';
import { jsonSchema, streamText, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { fixture } from '../support/fake-providers/fake-provider-server.ts';
import { specProblems, streamingEventSchema } from '../support/open-responses-spec.ts';
import { clientOnFakeOpenAI, TOKEN } from './server.ts';

// The provider streams a call's arguments in seven pieces (a recorded chat completions stream):
// the facade passes each on as it comes, to the official client's stream helpers and the AI SDK.
// An input saying "cut" gets the stream broken off after the call's first three pieces.
const cut = `${fixture('openai-chat-tool-call.sse').split('\n\n').slice(0, 4).join('\n\n')}\n\n`;
const world = clientOnFakeOpenAI((request) => {
  if (!request.body?.stream) return { json: JSON.parse(fixture('openai-chat-tool-call.json')) };
  return JSON.stringify(request.body.messages).includes('cut')
    ? { sse: cut }
    : { sse: fixture('openai-chat-tool-call.sse') };
});

const parameters = { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] } as const;
const PIECES = ['{"', 'location', '":"', 'Paris', ',', ' France', '"}'];
const ARGUMENTS = PIECES.join('');

describe('a tool call whose arguments the provider streams', () => {
  it("responses.stream: the call's output_item.added, a delta per piece, .done with the whole arguments", async () => {
    const stream = world.client.responses.stream({
      model: 'gpt-4o-mini',
      input: 'Weather in Paris?',
      tools: [{ type: 'function', name: 'get_weather', parameters, strict: false }],
    });
    const events = [];
    for await (const event of stream) events.push(event);
    const response = await stream.finalResponse();
    const [call] = response.output;
    expect(call).toMatchObject({ type: 'function_call', name: 'get_weather', arguments: ARGUMENTS });
    const item_id = (call as { id: string }).id;
    expect(events.map((event) => event.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      ...PIECES.map(() => 'response.function_call_arguments.delta'),
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(events[2]).toMatchObject({
      output_index: 0,
      item: { type: 'function_call', id: item_id, name: 'get_weather', arguments: '', status: 'in_progress' },
    });
    const deltas = events.filter((event) => event.type === 'response.function_call_arguments.delta');
    expect(deltas.map((event) => event.delta)).toEqual(PIECES);
    expect(deltas.every((event) => event.item_id === item_id && event.output_index === 0)).toBe(true);
    expect(events.at(-3)).toMatchObject({ item_id, output_index: 0, arguments: ARGUMENTS });
    expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, index) => index));
    for (const event of events) expect(specProblems(streamingEventSchema, event)).toEqual([]);
  });

  it.each([
    ['stored', {}],
    ['store: false', { store: false }],
    ['background', { background: true }],
  ])(
    'a call the failure cut short is done, with its arguments so far, before response.failed (%s)',
    async (_, body) => {
      const stream = world.client.responses.stream({
        model: 'gpt-4o-mini',
        input: 'cut',
        tools: [{ type: 'function', name: 'get_weather', parameters, strict: false }],
        ...body,
      });
      const events: ResponseStreamEvent[] = [];
      for await (const event of stream) events.push(event);
      expect(events.map((event) => event.type)).toEqual([
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        ...PIECES.slice(0, 3).map(() => 'response.function_call_arguments.delta'),
        'response.function_call_arguments.done',
        'response.output_item.done',
        'response.failed',
      ]);
      expect(events.at(-2)).toMatchObject({
        output_index: 0,
        item: { type: 'function_call', arguments: PIECES.slice(0, 3).join('') },
      });
      for (const event of events) expect(specProblems(streamingEventSchema, event)).toEqual([]);
    },
  );

  it('chat.completions.stream: a tool_calls delta with the id and name, then one per piece', async () => {
    const stream = world.client.chat.completions.stream({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools: [{ type: 'function', function: { name: 'get_weather', parameters } }],
    });
    const pieces: string[] = [];
    stream.on('tool_calls.function.arguments.delta', (event) => pieces.push(event.arguments_delta));
    const completion = await stream.finalChatCompletion();
    // The first tool_calls delta (id, name) has empty arguments, as OpenAI's own.
    expect(pieces).toEqual(['', ...PIECES]);
    expect(completion.choices[0]!.finish_reason).toBe('tool_calls');
    expect(completion.choices[0]!.message.tool_calls).toMatchObject([
      {
        id: 'call_DdmO9pD3xa9XTPNJ32zg2hcA',
        type: 'function',
        function: { name: 'get_weather', arguments: ARGUMENTS },
      },
    ]);
  });

  it("the AI SDK's streamText gets the pieces as tool-input-delta parts (Responses and chat)", async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL });
    for (const model of [openai('gpt-4o-mini'), openai.chat('gpt-4o-mini')]) {
      const result = streamText({
        model,
        prompt: 'Weather in Paris?',
        tools: { get_weather: tool({ inputSchema: jsonSchema<{ location: string }>(parameters) }) },
      });
      const pieces: string[] = [];
      for await (const part of result.fullStream) if (part.type === 'tool-input-delta') pieces.push(part.delta);
      expect(pieces).toEqual(PIECES);
      const [call] = await result.toolCalls;
      expect(call).toMatchObject({ toolName: 'get_weather', input: { location: 'Paris, France' } });
    }
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';
import { responseSchema, specProblems, streamingEventSchema } from '../support/open-responses-spec.ts';
import { startTailgate, TOKEN } from './server.ts';

// The scenarios of the Open Responses compliance suite (basic, streaming, system prompt, tool
// calls streamed or not, a forced function call answered with previous_response_id, multi-turn,
// previous_response_id), written here from the specification: every response object, every
// snapshot in a streaming event and every event, field by field (test/support/open-responses-spec.ts).
// The model is an OpenAI model on a loopback fake provider that calls the first tool offered
// when the last message is the user's, and answers text otherwise.
let provider: FakeProvider;
let tailgate: Awaited<ReturnType<typeof startTailgate>>;

beforeAll(async () => {
  provider = await startFakeProvider((request) => {
    const body = request.body;
    const calls = body.tools?.length > 0 && body.messages.at(-1).role === 'user' && body.tool_choice !== 'none';
    const name = calls ? 'openai-chat-tool-call' : 'openai-chat-text';
    if (body.stream) return { sse: fixture(`${name}.sse`) };
    const json = JSON.parse(fixture(`${name}.json`));
    if (calls) json.choices[0].message.tool_calls[0].function.name = body.tools[0].function.name;
    return { json };
  });
  tailgate = await startTailgate({
    OPENAI_API_KEY: 'test-key',
    OPENAI_BASE_URL: provider.baseURL,
    // Nothing listens on the discard port: its calls fail.
    OPENAI_COMPATIBLE_BASE_URL: 'http://127.0.0.1:9/v1',
    MODEL_MAX_RETRIES: '0',
    MODEL_ALIASES: 'gpt-4o-mini=openai:gpt-4o-mini,unreachable=openai-compatible:nothing',
  });
});
afterAll(async () => {
  await tailgate.close();
  await provider.close();
});

const weatherTool = {
  type: 'function',
  name: 'get_weather',
  description: 'Get the current weather for a location',
  parameters: {
    type: 'object',
    properties: { location: { type: 'string', description: 'The city and state' } },
    required: ['location'],
  },
};

/** The smallest PDF a model takes: its header and end-of-file marker. */
const PDF = 'data:application/pdf;base64,JVBERi0xLjQKJSVFT0YK';

async function post(body: Record<string, unknown>): Promise<Response> {
  return fetch(`${tailgate.baseURL}/responses`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o-mini', ...body }),
  });
}

/** A created response, checked against the spec, and read back by GET (which must conform too). */
async function create(body: Record<string, unknown>): Promise<any> {
  const response = await post(body);
  const json = (await response.json()) as any;
  expect(response.status, JSON.stringify(json)).toBe(200);
  expect(specProblems(responseSchema, json)).toEqual([]);
  const read = await fetch(`${tailgate.baseURL}/responses/${json.id}`, {
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  expect(specProblems(responseSchema, await read.json())).toEqual([]);
  return json;
}

/** The events of a streamed response, each checked against the spec; numbered from 0 in order. */
async function stream(body: Record<string, unknown>): Promise<any[]> {
  const response = await post({ ...body, stream: true });
  expect(response.status).toBe(200);
  const text = await response.text();
  // The terminal event, then the literal [DONE] the specification ends a stream with.
  expect(text.endsWith('\n\ndata: [DONE]\n\n')).toBe(true);
  const events = text
    .split('\n\n')
    .filter((block) => block.includes('data: ') && block !== 'data: [DONE]')
    .map((block) => {
      const name = /^event: (.+)$/m.exec(block)?.[1];
      const data = JSON.parse(/^data: (.+)$/m.exec(block)![1]!);
      expect(name).toBe(data.type);
      return data;
    });
  for (const event of events) expect(specProblems(streamingEventSchema, event), event.type).toEqual([]);
  expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, index) => index));
  return events;
}

describe('Open Responses: every object and event as the specification requires', () => {
  it('basic text response', async () => {
    const response = await create({ input: [{ type: 'message', role: 'user', content: 'Say hello in 3 words.' }] });
    expect(response.status).toBe('completed');
    expect(response.completed_at).toBeGreaterThanOrEqual(response.created_at);
    expect(response.output[0]).toMatchObject({ type: 'message', role: 'assistant', status: 'completed' });
  });

  it('streaming response: response.created and response.in_progress snapshots are whole, usage null', async () => {
    const events = await stream({ input: [{ type: 'message', role: 'user', content: 'Count from 1 to 5.' }] });
    expect(events.map((event) => event.type).slice(0, 2)).toEqual(['response.created', 'response.in_progress']);
    expect(events[0].response).toMatchObject({ status: 'in_progress', usage: null, completed_at: null });
    expect(events.map((event) => event.type)).toContain('response.output_text.delta');
    const completed = events.at(-1);
    expect(completed).toMatchObject({ type: 'response.completed', response: { status: 'completed' } });
    expect(completed.response.usage.total_tokens).toBeGreaterThan(0);
  });

  it('system prompt', async () => {
    const response = await create({
      input: [
        { type: 'message', role: 'system', content: 'You are a pirate.' },
        { type: 'message', role: 'user', content: 'Say hello.' },
      ],
    });
    expect(response.instructions).toBe('You are a pirate.');
  });

  it('tool calling, and the same streamed: output_item.added, arguments delta and done, output_item.done', async () => {
    const input = [{ type: 'message', role: 'user', content: "What's the weather like in San Francisco?" }];
    const response = await create({ input, tools: [weatherTool] });
    expect(response.output.map((item: { type: string }) => item.type)).toEqual(['function_call']);
    const events = await stream({ input, tools: [weatherTool] });
    const types = events.map((event) => event.type);
    for (const type of [
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
    ])
      expect(types).toContain(type);
    expect(events.find((event) => event.type === 'response.output_item.added').item.type).toBe('function_call');
  });

  it('function call round trip: a forced call, answered with previous_response_id', async () => {
    const first = await create({
      input: 'Use the weather tool to get the temperature in San Francisco.',
      tools: [weatherTool],
      tool_choice: { type: 'function', name: 'get_weather' },
    });
    expect(first.tool_choice).toEqual({ type: 'function', name: 'get_weather' });
    const call = first.output.find((item: { type: string }) => item.type === 'function_call');
    const second = await create({
      previous_response_id: first.id,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: '64 degrees and clear' }],
    });
    expect(second).toMatchObject({ status: 'completed', previous_response_id: first.id });
    expect(second.output[0].type).toBe('message');
  });

  it('multi-turn history, and previous_response_id', async () => {
    await create({
      input: [
        { type: 'message', role: 'user', content: 'My name is Alice.' },
        { type: 'message', role: 'assistant', content: 'Hello Alice!' },
        { type: 'message', role: 'user', content: 'What is my name?' },
      ],
    });
    const first = await create({ input: 'Remember this code word: papaya. Reply with only OK.' });
    const second = await create({ previous_response_id: first.id, input: 'What code word did I ask you to remember?' });
    expect(second.previous_response_id).toBe(first.id);
  });

  it('settings as the client sent them conform: structured output, reasoning, a named tool choice', async () => {
    const response = await create({
      input: 'hi',
      tools: [weatherTool],
      text: { format: { type: 'json_schema', name: 'answer', schema: { type: 'object' } }, verbosity: 'low' },
      reasoning: { effort: 'low' },
      user: 'user-1',
    });
    expect(response.text.format).toEqual({
      type: 'json_schema',
      name: 'answer',
      schema: { type: 'object' },
      description: null,
      strict: false,
    });
    expect(response.reasoning).toEqual({ effort: 'low', summary: null });
  });

  it('null where the spec allows it is as not sent: tools, tool_choice, item id and status, part file_id', async () => {
    const image = { type: 'input_image', image_url: dataUrl('image/png', pngBytes(2, 2)), detail: null, file_id: null };
    const file = { type: 'input_file', filename: 'a.pdf', file_data: PDF, file_id: null };
    const nulls = { id: null, status: null };
    const response = await create({
      model: 'echo',
      input: [
        { type: 'message', role: 'user', content: 'hello', ...nulls },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'hi' }], ...nulls },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'look' }, image, file], ...nulls },
      ],
      tools: null,
      tool_choice: null,
    });
    expect(response.output_text).toBe('echo: look [image/png 2x2, 1 KB] [application/pdf a.pdf, 1 KB]');
    expect(response).toMatchObject({ tools: [], tool_choice: 'auto' });
    // A file_id that names an upload is still refused by name: tailgate has no Files API.
    const named = await post({ input: [{ role: 'user', content: [{ ...image, file_id: 'file-abc' }] }] });
    expect(named.status).toBe(400);
    expect(((await named.json()) as any).error.param).toBe('input[0].content[0].file_id');
  });

  it('a response that fails streams a response.failed snapshot that conforms too', async () => {
    const events = await stream({ model: 'unreachable', input: 'hi' });
    expect(events.at(-1)).toMatchObject({ type: 'response.failed', response: { status: 'failed' } });
    expect(events.at(-1).response.error.code).toBeTypeOf('string');
  });
});

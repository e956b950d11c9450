import type { ResponseItem, ResponseOutputItem } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import type { RecordedRequest } from '../support/fake-providers/fake-provider-server.ts';
import { parseSse } from '../http/http-suite.ts';
import { clientOnFakeProvider, TOKEN } from './server.ts';

// Answers that stop at their token limit after a message, in a call: the Open Responses item
// lifecycle makes `incomplete` the item the model stopped in, the last one emitted, and only it.
// Anthropic (`claude-cut`) streams a call it never ends (no content_block_stop): the call is left
// out of the output and the message before it was written whole. OpenAI (`gpt-cut`) ends the
// call with its arguments so far: it is in the output, the item the limit cut.

const sse = (events: object[]) => events.map((event) => `data: ${JSON.stringify(event)}\n\n`).join('');
const message = { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-sonnet-4-5', content: [] };
const usage = { input_tokens: 10, output_tokens: 1 };
const ANTHROPIC_STREAM = sse([
  { type: 'message_start', message: { ...message, stop_reason: null, stop_sequence: null, usage } },
  { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
  { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Let me look.' } },
  { type: 'content_block_stop', index: 0 },
  {
    type: 'content_block_start',
    index: 1,
    content_block: { type: 'tool_use', id: 'toolu_1', name: 'lookup', input: {} },
  },
  { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"q": "ab' } },
  { type: 'message_delta', delta: { stop_reason: 'max_tokens', stop_sequence: null }, usage: { output_tokens: 16 } },
  { type: 'message_stop' },
]);
const ANTHROPIC_JSON = {
  ...message,
  content: [{ type: 'text', text: 'Let me look.' }],
  stop_reason: 'max_tokens',
  stop_sequence: null,
  usage,
};

const chunk = (delta: object, finish: string | null = null) => ({
  id: 'c',
  object: 'chat.completion.chunk',
  created: 1,
  model: 'gpt-4o-mini',
  choices: [{ index: 0, delta, finish_reason: finish }],
});
const call = { id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{"q": "ab' } };
const OPENAI_STREAM = `${sse([
  chunk({ role: 'assistant', content: 'Let me look.' }),
  chunk({ tool_calls: [{ index: 0, ...call }] }),
  chunk({}, 'length'),
])}data: [DONE]\n\n`;
const OPENAI_JSON = {
  id: 'c',
  object: 'chat.completion',
  created: 1,
  model: 'gpt-4o-mini',
  choices: [
    { index: 0, message: { role: 'assistant', content: 'Let me look.', tool_calls: [call] }, finish_reason: 'length' },
  ],
  usage: { prompt_tokens: 10, completion_tokens: 16, total_tokens: 26 },
};

function reply(request: RecordedRequest) {
  const anthropic = request.path.endsWith('/messages');
  if (request.body.stream) return { sse: anthropic ? ANTHROPIC_STREAM : OPENAI_STREAM };
  return { json: anthropic ? ANTHROPIC_JSON : OPENAI_JSON };
}

const world = clientOnFakeProvider(reply, (baseURL) => ({
  ANTHROPIC_API_KEY: 'test-key',
  ANTHROPIC_BASE_URL: baseURL,
  OPENAI_API_KEY: 'test-key',
  OPENAI_BASE_URL: baseURL,
  MODEL_ALIASES: 'claude-cut=anthropic:claude-sonnet-4-5,gpt-cut=openai:gpt-4o-mini',
}));

const tools = [{ type: 'function' as const, name: 'lookup', strict: false, parameters: { type: 'object' } }];
const statuses = (items: readonly (ResponseOutputItem | ResponseItem)[]) =>
  items.flatMap((item) =>
    item.type === 'message' && item.role !== 'assistant' ? [] : [`${item.type} ${'status' in item ? item.status : ''}`],
  );

describe('the item an answer stopped in is the one incomplete, on every surface', () => {
  // Not streamed, Anthropic's answer (ANTHROPIC_JSON) stops in its message: that is the one incomplete.
  it.each([
    [
      'a call left out: the message before it is completed',
      'claude-cut',
      ['message completed'],
      ['message incomplete'],
    ],
    [
      'a call the provider ended: it is the one incomplete',
      'gpt-cut',
      ['message completed', 'function_call incomplete'],
    ],
  ])('%s', async (_, model, expected, generated = expected) => {
    const created = await world.client.responses.create({ model, input: 'look', tools, max_output_tokens: 16 });
    expect(created.status).toBe('incomplete');
    const stream = world.client.responses.stream({ model, input: 'look', tools, max_output_tokens: 16 });
    const done: ResponseOutputItem[] = [];
    for await (const event of stream) if (event.type === 'response.output_item.done') done.push(event.item);
    const streamed = await stream.finalResponse();
    expect(streamed.status).toBe('incomplete');
    // The stream closes a call left out `incomplete` too: it is the last item done, the only one so.
    const left = model === 'claude-cut' ? ['function_call incomplete'] : [];
    expect(statuses(done)).toEqual([...expected, ...left]);
    for (const [response, output] of [
      [created, generated],
      [streamed, expected],
    ] as const) {
      expect(statuses(response.output)).toEqual(output);
      expect(statuses((await world.client.responses.retrieve(response.id)).output)).toEqual(output);
      const items = await world.client.conversations.items.list(response.conversation!.id, { order: 'asc' });
      expect(statuses(items.data as ResponseItem[])).toEqual(output);
    }
  });

  it("a background response's retrieve and replayed stream say the same", async () => {
    const created = await world.client.responses.create({ model: 'gpt-cut', input: 'look', tools, background: true });
    let response = created;
    for (let polls = 0; polls < 400 && ['queued', 'in_progress'].includes(response.status!); polls++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      response = await world.client.responses.retrieve(created.id);
    }
    expect(response.status).toBe('incomplete');
    expect(statuses(response.output)).toEqual(['message completed', 'function_call incomplete']);
    const done: ResponseOutputItem[] = [];
    const replay = await world.client.responses.retrieve(created.id, { stream: true, starting_after: 0 });
    for await (const event of replay) if (event.type === 'response.output_item.done') done.push(event.item);
    expect(statuses(done)).toEqual(['message completed', 'function_call incomplete']);
  });
});

describe("a native streamed turn's output_item.done", () => {
  // A live stream has an item done before the answer ended (OpenAI's call here); a replay (the
  // same Idempotency-Key again) has the stored answer: the item is the same in both, and the
  // turn's response says which one the answer stopped in.
  it('carries the same item live and replayed, turn.completed the cut item', async () => {
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const created = await fetch(`${world.tailgate.baseURL}/sessions`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        model: 'openai:gpt-4o-mini',
        tools: [{ type: 'function', name: 'lookup', parameters: tools[0]!.parameters }],
      }),
    });
    const { id } = (await created.json()) as { id: string };
    const turn = async () => {
      const response = await fetch(`${world.tailgate.baseURL}/sessions/${id}/turns`, {
        method: 'POST',
        headers: { ...headers, 'idempotency-key': 'cut' },
        body: JSON.stringify({ input: 'look', stream: true }),
      });
      const events = parseSse(await response.text());
      return {
        done: events.filter((event) => event.event === 'output_item.done').map((event) => event.data.item),
        output: events.find((event) => event.event === 'turn.completed')?.data.output,
      };
    };
    const live = await turn();
    const replayed = await turn();
    expect(live.output.map((item: { incomplete?: true }) => item.incomplete)).toEqual([undefined, true]);
    expect(replayed).toEqual(live);
    expect(live.done).toEqual(live.output.map(({ incomplete: _, ...item }: { incomplete?: true }) => item));
  });
});

import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compactingResponse, startTailgate, tailgateGet, tailgatePost, TOKEN } from './server.ts';

// A tool loop's step (function_call_outputs answering the calls of the response before) whose
// streamed attempt failed after its first event: the attempt stays with its input, and a resend
// of the step takes it again (lib/openai/failed-steps.ts). "unreachable" fails every model call.
let tailgate: Awaited<ReturnType<typeof startTailgate>>;
let client: OpenAI;
beforeAll(async () => {
  tailgate = await startTailgate({
    OPENAI_COMPATIBLE_BASE_URL: 'http://127.0.0.1:9/v1',
    MODEL_MAX_RETRIES: '0',
    MODEL_ALIASES: 'unreachable=openai-compatible:nothing',
  });
  client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
});
afterAll(() => tailgate.close());

const tools = [{ type: 'function' as const, name: 'get_weather', strict: false, parameters: { type: 'object' } }];

/** A response calling get_weather for `city`, and the whole history of the step answering it. */
async function toolStep(city: string) {
  const ask = `call get_weather {"city":"${city}"}`;
  const first = await client.responses.create({ model: 'echo', input: ask, tools });
  const call = first.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
  const input = [
    { role: 'user' as const, content: ask },
    ...(first.output as OpenAI.Responses.ResponseInputItem[]),
    { type: 'function_call_output' as const, call_id: call.call_id, output: '10C' },
  ];
  return { first, conversation: first.conversation!.id, input };
}

/** A streamed attempt of the step that fails after its first event (it stays, failed). */
async function failedStreamed(input: OpenAI.Responses.ResponseInputItem[], headers?: Record<string, string>) {
  const failed = await client.responses.create({ model: 'unreachable', input, tools, stream: true }, { headers });
  const types: string[] = [];
  for await (const event of failed) types.push(event.type);
  expect(types.at(-1)).toBe('response.failed');
}

const turnsOf = async (conversation: string) =>
  (await tailgateGet(tailgate.baseURL, `/sessions/${conversation}`)).counts.turns as number;

/** The conversation's items once the step was answered: its outputs stored once. */
const ANSWERED = ['message', 'function_call', 'function_call_output', 'message'];
const typesOf = async (conversation: string) =>
  (await client.conversations.items.list(conversation, { order: 'asc' })).data.map((item) => item.type);

describe('a resent tool step whose streamed attempt failed', () => {
  it('taken again and failing not streamed leaves nothing: the step survives more such retries than 8', async () => {
    const { conversation, input } = await toolStep('Lima');
    await failedStreamed(input);
    // The official client's retries of a 5xx (here sent one by one): each takes the step again.
    for (let attempt = 0; attempt < 9; attempt++) {
      const failed = await client.responses.create({ model: 'unreachable', input, tools }).catch((error) => error);
      expect(failed).toBeInstanceOf(OpenAI.InternalServerError);
    }
    expect(await turnsOf(conversation)).toBe(2);
    const retried = await client.responses.create({ model: 'echo', input, tools });
    expect(retried.conversation!.id).toBe(conversation);
    expect(await typesOf(conversation)).toEqual(ANSWERED);
  });

  it('retried under the key of its failed attempt is answered as that attempt was', async () => {
    const { conversation, input } = await toolStep('Quito');
    const headers = { 'Idempotency-Key': 'failed-tool-step-key' };
    await failedStreamed(input, headers);
    // The same request under the same key: the key's answer again (its failure), nothing taken.
    for (const stream of [false, true]) {
      const again = await client.responses
        .create({ model: 'unreachable', input, tools, stream }, { headers })
        .catch((error: unknown) => error);
      expect(again).toBeInstanceOf(OpenAI.InternalServerError);
      expect((again as InstanceType<typeof OpenAI.APIError>).code).toBe('model_error');
    }
    expect(await turnsOf(conversation)).toBe(2);
    // Under a key of its own, the step is taken again, then its retry under that key replayed.
    const retakeKey = { 'Idempotency-Key': 'failed-tool-step-retake' };
    const retried = await client.responses.create({ model: 'echo', input, tools }, { headers: retakeKey });
    expect(retried.conversation!.id).toBe(conversation);
    const replayed = await client.responses.create({ model: 'echo', input, tools }, { headers: retakeKey });
    expect(replayed.id).toBe(retried.id);
    expect(await typesOf(conversation)).toEqual(ANSWERED);
  });

  it('taken again and refused by an abort notice, then retried, is refused again (no new conversation)', async () => {
    const { first, conversation, input } = await toolStep('Bogota');
    await failedStreamed(input);
    await tailgatePost(tailgate.baseURL, `/sessions/${conversation}/inbox`, { name: 'abort', content: 'stop' });
    const sessions = async () => (await tailgateGet(tailgate.baseURL, '/sessions?limit=100')).sessions.length;
    const before = await sessions();
    // The AI SDK retries a 409 by itself: every retry is refused as the first was, nothing run.
    for (let attempt = 0; attempt < 2; attempt++) {
      const refused = await client.responses.create({ model: 'echo', input, tools }).catch((error) => error);
      expect(refused).toBeInstanceOf(OpenAI.ConflictError);
      expect((refused as InstanceType<typeof OpenAI.APIError>).code).toBe('aborted');
    }
    // So is a retry under previous_response_id naming the response before the step.
    const asked = { model: 'echo', previous_response_id: first.id, input: input.slice(-1), tools };
    const refused = await client.responses.create(asked).catch((error) => error);
    expect(refused).toBeInstanceOf(OpenAI.ConflictError);
    expect(await sessions()).toBe(before);
    expect(await typesOf(conversation)).toEqual(['message', 'function_call', 'function_call_output']);
  });

  it('resent with an item after the outputs, failing again, goes on after what its attempts stored', async () => {
    const { conversation, input } = await toolStep('Lagos');
    await failedStreamed(input);
    // A resend adding a message after the outputs: stored after them, alone; its attempt fails too.
    const more = [...input, { role: 'user' as const, content: 'and in Accra?' }];
    await failedStreamed(more);
    const retried = await client.responses.create({ model: 'echo', input: more, tools });
    expect(retried.conversation!.id).toBe(conversation);
    expect(retried.output_text).toBe('echo: and in Accra?');
    const items = await client.conversations.items.list(conversation, { order: 'asc' });
    expect(items.data.map((item: any) => item.content?.[0]?.text ?? item.type)).toEqual([
      'call get_weather {"city":"Lagos"}',
      'function_call',
      'function_call_output',
      'and in Accra?',
      'echo: and in Accra?',
    ]);
  });

  it('retried under conversation takes the step again, the outputs stored once', async () => {
    const { first, conversation } = await toolStep('Cairo');
    const call = first.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
    const answer = [{ type: 'function_call_output' as const, call_id: call.call_id, output: '10C' }];
    const asked = { conversation, input: answer, tools };
    for (let attempt = 0; attempt < 2; attempt++) {
      const failed = await client.responses.create({ model: 'unreachable', ...asked, stream: true });
      for await (const event of failed) expect(event.type).not.toBe('response.completed');
    }
    // Another answer to the call is no retry of the step: refused, as answering it twice.
    const other = await client.responses
      .create({ model: 'echo', conversation, input: [{ ...answer[0]!, output: '11C' }], tools })
      .catch((error: unknown) => error);
    expect(other).toBeInstanceOf(OpenAI.BadRequestError);
    const retried = await client.responses.create({ model: 'echo', ...asked });
    expect(retried.output_text).toBe('echo: call get_weather {"city":"Cairo"}');
    expect(await typesOf(conversation)).toEqual(ANSWERED);
    const listed = await client.responses.inputItems.list(retried.id, { order: 'asc' });
    expect(listed.data.map((item) => item.type)).toEqual(['function_call_output']);
  });
});

describe("a tool step resending its conversation's own compaction item", () => {
  it.each(['conversation', 'previous_response_id'] as const)(
    'retried under %s after a failed streamed attempt takes the step again, the outputs stored once',
    async (how) => {
      const first = await compactingResponse(client, 'alpha');
      const conversation = first.conversation!.id;
      const compacted = await compactingResponse(client, 'bravo', { after: first.id });
      const compaction = compacted.output.find((item) => item.type === 'compaction');
      expect(compaction).toBeDefined();
      const ask = 'call get_weather {"city":"Cairo"}';
      const called = await client.responses.create({ model: 'echo', conversation, input: ask, tools });
      const call = called.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
      const answer = { type: 'function_call_output' as const, call_id: call.call_id, output: '10C' };
      const asked = {
        ...(how === 'conversation' ? { conversation } : { previous_response_id: called.id }),
        input: [compaction as OpenAI.Responses.ResponseInputItem, answer],
        tools,
      };
      const failed = await client.responses.create({ model: 'unreachable', ...asked, stream: true });
      for await (const event of failed) expect(event.type).not.toBe('response.completed');
      const retried = await client.responses.create({ model: 'echo', ...asked });
      expect(retried.conversation!.id).toBe(conversation);
      expect(retried.output_text).toBe(`echo: ${ask}`);
      // The answer stored once, and no summary stored as a message.
      const items = await client.conversations.items.list(conversation, { order: 'asc', limit: 100 });
      expect(items.data.map((item) => item.type)).toEqual([
        'message',
        'message',
        'compaction',
        'message',
        'message',
        'message',
        'function_call',
        'function_call_output',
        'message',
      ]);
    },
  );
});

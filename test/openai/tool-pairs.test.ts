import OpenAI from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { ResponseInputItem } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { clientOnTailgate } from './server.ts';

// A tool output without its call, or a call without its output, is refused before any model
// call (OpenAI answers such a prompt 400), in OpenAI's error shape naming the item.
const world = clientOnTailgate();

const call = (id: string) => ({ id, type: 'function' as const, function: { name: 'f', arguments: '{}' } });

async function chatError(messages: ChatCompletionMessageParam[]): Promise<unknown> {
  return world.client.chat.completions.create({ model: 'echo', messages }).then(
    () => 'answered',
    (error: unknown) => error,
  );
}

describe('chat completions: tool messages and their calls', () => {
  it('refuses a tool message whose tool_call_id no call before it has', async () => {
    const error = await chatError([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'hello' },
      { role: 'tool', tool_call_id: 'call_nowhere', content: 'done' },
    ]);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error).toMatchObject({
      status: 400,
      type: 'invalid_request_error',
      param: 'messages[3].tool_call_id',
      message: expect.stringContaining('call_nowhere'),
    });
  });

  it('refuses a tool message answering a call of an earlier turn, or answering a call twice', async () => {
    const late = await chatError([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: null, tool_calls: [call('c1')] },
      { role: 'tool', tool_call_id: 'c1', content: 'done' },
      { role: 'user', content: 'again' },
      { role: 'tool', tool_call_id: 'c1', content: 'done again' },
    ]);
    expect(late).toMatchObject({ status: 400, param: 'messages[4].tool_call_id' });
    const twice = await chatError([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: null, tool_calls: [call('c1')] },
      { role: 'tool', tool_call_id: 'c1', content: 'done' },
      { role: 'tool', tool_call_id: 'c1', content: 'done again' },
    ]);
    expect(twice).toMatchObject({ status: 400, param: 'messages[3].tool_call_id' });
  });

  it('refuses an assistant tool call no tool message answers before the next message, or at the end', async () => {
    const skipped = await chatError([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: null, tool_calls: [call('c1'), call('c2')] },
      { role: 'tool', tool_call_id: 'c1', content: 'done' },
      { role: 'user', content: 'go on' },
    ]);
    expect(skipped).toMatchObject({
      status: 400,
      param: 'messages[1].tool_calls',
      message: expect.stringContaining('c2'),
    });
    const trailing = await chatError([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: null, tool_calls: [call('c1')] },
    ]);
    expect(trailing).toMatchObject({ status: 400, param: 'messages[1].tool_calls' });
    // Each message starts with the param it names, as every refusal's does.
    for (const error of [skipped, trailing])
      expect((error as Error).message).toMatch(/^400 messages\[1\]\.tool_calls: /);
  });

  it('answers calls and their tool messages in order', async () => {
    const answer = await world.client.chat.completions.create({
      model: 'echo',
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'checking', tool_calls: [call('c1'), call('c2')] },
        { role: 'tool', tool_call_id: 'c2', content: 'two' },
        { role: 'tool', tool_call_id: 'c1', content: 'one' },
        { role: 'user', content: 'thanks' },
      ],
    });
    expect(answer.choices[0]!.finish_reason).toBe('stop');
  });
});

const respond = (input: ResponseInputItem[], store = false) =>
  world.client.responses.create({ model: 'echo', store, input }).then(
    (response) => response,
    (error: unknown) => error,
  );

/** A function_call_output of no call after a developer and a user message: refused naming `input[2].call_id`. */
async function expectOutputWithoutCall(store: boolean): Promise<void> {
  const error = await respond(
    [
      { role: 'developer', content: 'Be brief.' },
      { role: 'user', content: 'hi' },
      { type: 'function_call_output', call_id: 'call_nowhere', output: 'done' },
    ],
    store,
  );
  expect(error).toBeInstanceOf(OpenAI.BadRequestError);
  expect(error).toMatchObject({
    status: 400,
    type: 'invalid_request_error',
    param: 'input[2].call_id',
    message: expect.stringMatching(/ input\[2\]\.call_id: .*call_nowhere/),
  });
}

describe('stateless responses (store: false): outputs and their calls', () => {
  it('refuses a function_call_output with no function_call before it, naming the item', async () => {
    await expectOutputWithoutCall(false);
    const twice = await respond([
      { role: 'user', content: 'hi' },
      { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
      { type: 'function_call_output', call_id: 'c1', output: 'done' },
      { type: 'function_call_output', call_id: 'c1', output: 'done again' },
    ]);
    expect(twice).toMatchObject({ status: 400, param: 'input[3].call_id' });
  });

  it('answers a call left without output as a stored response does (its output a placeholder)', async () => {
    const response = await respond([
      { role: 'user', content: 'hi' },
      { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
      { role: 'user', content: 'never mind' },
    ]);
    expect(response).toMatchObject({ status: 'completed', store: false });
  });
});

/**
 * A conversation compacted twice: a reference to its first compaction item (which the second
 * superseded), then the second's output, then `tail`. The reference is left out of the input
 * when resolved, and still counts in the positions an error names.
 */
async function afterSupersededReference(tail: ResponseInputItem[]): Promise<ResponseInputItem[]> {
  const { client } = world;
  const first = await client.responses.create({ model: 'echo', input: 'hello' });
  const older = await client.responses.compact({ model: 'echo', previous_response_id: first.id });
  const next = await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'more' });
  const newer = await client.responses.compact({ model: 'echo', previous_response_id: next.id });
  return [{ type: 'item_reference', id: older.output[0]!.id! }, ...(newer.output as ResponseInputItem[]), ...tail];
}

const lateSystem: ResponseInputItem[] = [{ role: 'system', content: 'late' }];
const outputWithoutCall: ResponseInputItem[] = [
  { role: 'user', content: 'and then' },
  { type: 'function_call_output', call_id: 'call_nowhere', output: 'done' },
];

describe('stored responses: outputs and their calls', () => {
  it("refuses a function_call_output with no open call, naming the request's input item", async () => {
    await expectOutputWithoutCall(true);
    // A resent history: the item is named where the request has it, not among the items it adds.
    const first = await world.client.responses.create({ model: 'echo', input: 'hello' });
    const resent = await respond(
      [
        { role: 'developer', content: 'Be brief.' },
        { role: 'user', content: 'hello' },
        ...(first.output as ResponseInputItem[]),
        { role: 'user', content: 'and then' },
        { type: 'function_call_output', call_id: 'call_nowhere', output: 'done' },
      ],
      true,
    );
    expect(resent).toMatchObject({ status: 400, param: 'input[4].call_id' });
  });
});

describe('positions after a superseded compaction reference left out of the input', () => {
  for (const store of [true, false]) {
    it(`name the request's own input item (store: ${store})`, async () => {
      const compacted = await respond(await afterSupersededReference(outputWithoutCall), store);
      expect(compacted).toMatchObject({
        status: 400,
        param: 'input[3].call_id',
        message: expect.stringContaining('input[3].call_id: '),
      });
      const system = await respond(await afterSupersededReference(lateSystem), store);
      expect(system).toMatchObject({
        status: 400,
        param: 'input[2].role',
        message: expect.stringContaining('input[2].role: a system message'),
      });
    });
  }
});

describe("a conversation's items after a superseded compaction reference left out", () => {
  it("name the request's own item, for a late system message and a part of the wrong kind", async () => {
    const conversation = await world.client.conversations.create({});
    const append = (items: ResponseInputItem[]) =>
      world.client.conversations.items.create(conversation.id, { items }).then(
        () => null,
        (error: InstanceType<typeof OpenAI.APIError>) => ({ status: error.status, param: error.param }),
      );
    expect(await append(await afterSupersededReference(lateSystem))).toEqual({ status: 400, param: 'items[2].role' });
    const wrongPart: ResponseInputItem[] = [{ role: 'user', content: [{ type: 'output_text', text: 'x' } as never] }];
    expect(await append(await afterSupersededReference(wrongPart))).toEqual({
      status: 400,
      param: 'items[2].content[0].type',
    });
  });
});

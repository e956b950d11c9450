import { createOpenAI } from '@ai-sdk/openai';
import { generateText, stepCountIs, streamText, tool } from 'ai';
import type OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { clientOnTailgate, echoedThen, settledResponse, tailgateGet, tailgatePost, TOKEN } from './server.ts';

// A tool loop under a fixed previous_response_id (the AI SDK's previousResponseId with tools):
// every step names the same response and resends every item since it (lib/openai/resent-after.ts).
const world = clientOnTailgate({ MODEL_ALIASES: 'gpt-4.1-mini=echo' });

async function shapesOf(sessionId: string): Promise<unknown[]> {
  const listed = await tailgateGet(world.tailgate.baseURL, `/sessions/${sessionId}/items?limit=100`);
  return listed.items.reverse().map((item: any) => [item.type, item.content ?? item.output ?? item.arguments]);
}

const sessionOf = (responseId: string) => /^resp_(conv_[0-9a-f]{24})_/.exec(responseId)![1];

describe('a tool loop under a fixed previous_response_id', () => {
  it("the AI SDK's generateText: every step in the conversation of that response, each item once", async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL });
    const first = await generateText({ model: openai('gpt-4.1-mini'), prompt: 'hello' });
    const result = await generateText({
      model: openai('gpt-4.1-mini'),
      prompt: 'call get_weather {"city":"Paris"}',
      tools: { get_weather: tool({ inputSchema: z.object({ city: z.string() }), execute: async () => '18C' }) },
      stopWhen: stepCountIs(4),
      providerOptions: { openai: { previousResponseId: first.response.id } },
    });
    expect(result.steps).toHaveLength(2);
    expect(result.text).toBe('echo: call get_weather {"city":"Paris"}');
    const conversation = sessionOf(first.response.id);
    expect(result.steps.map((step) => sessionOf(step.response.id))).toEqual([conversation, conversation]);
    expect(await shapesOf(conversation!)).toEqual([
      ['message', 'hello'],
      ['message', 'echo: hello'],
      ['message', 'call get_weather {"city":"Paris"}'],
      ['function_call', '{"city":"Paris"}'],
      ['function_call_output', '18C'],
      ['message', 'echo: call get_weather {"city":"Paris"}'],
    ]);
  });

  it("the AI SDK's streamText: every step streamed in the conversation of that response", async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL });
    const first = await generateText({ model: openai('gpt-4.1-mini'), prompt: 'hi' });
    const result = streamText({
      model: openai('gpt-4.1-mini'),
      prompt: 'call get_weather {"city":"Rome"}',
      tools: { get_weather: tool({ inputSchema: z.object({ city: z.string() }), execute: async () => '21C' }) },
      stopWhen: stepCountIs(4),
      providerOptions: { openai: { previousResponseId: first.response.id } },
    });
    expect(await result.text).toBe('echo: call get_weather {"city":"Rome"}');
    const conversation = sessionOf(first.response.id);
    expect((await result.steps).map((step) => sessionOf(step.response.id))).toEqual([conversation, conversation]);
    expect(await shapesOf(conversation!)).toHaveLength(6);
  });

  it('a step an abort notice refused, retried by the AI SDK (a 409 is retried), is refused again', async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL });
    const first = await generateText({ model: openai('gpt-4.1-mini'), prompt: 'start' });
    const conversation = sessionOf(first.response.id)!;
    const before = (await tailgateGet(world.tailgate.baseURL, '/sessions?limit=100')).sessions.length;
    const failed = await generateText({
      model: openai('gpt-4.1-mini'),
      prompt: 'call get_weather {"city":"Oslo"}',
      tools: {
        get_weather: tool({
          inputSchema: z.object({ city: z.string() }),
          // The notice arrives while the tool runs: the next step meets it.
          execute: async () => {
            await tailgatePost(world.tailgate.baseURL, `/sessions/${conversation}/inbox`, {
              name: 'abort',
              content: 'stop',
            });
            return '-2C';
          },
        }),
      },
      stopWhen: stepCountIs(4),
      maxRetries: 1,
      providerOptions: { openai: { previousResponseId: first.response.id } },
    }).catch((error: unknown) => error);
    expect(String(failed)).toContain('aborted');
    // Nothing ran after the abort, in this conversation or in a branch of it.
    expect((await tailgateGet(world.tailgate.baseURL, '/sessions?limit=100')).sessions).toHaveLength(before);
    expect((await shapesOf(conversation)).at(-1)).toEqual(['function_call_output', '-2C']);
  });

  it('a loop under an older response branches once: its later steps go on in that branch', async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL });
    const first = await generateText({ model: openai('gpt-4.1-mini'), prompt: 'hello' });
    const conversation = sessionOf(first.response.id)!;
    // The conversation moves on: the loop below names a response that is no longer its newest.
    await generateText({
      model: openai('gpt-4.1-mini'),
      prompt: 'more',
      providerOptions: { openai: { previousResponseId: first.response.id } },
    });
    const before = (await tailgateGet(world.tailgate.baseURL, '/sessions?limit=100')).sessions.length;
    const result = await generateText({
      model: openai('gpt-4.1-mini'),
      prompt: 'call get_weather {"city":"Lima"}',
      tools: { get_weather: tool({ inputSchema: z.object({ city: z.string() }), execute: async () => '15C' }) },
      stopWhen: stepCountIs(4),
      providerOptions: { openai: { previousResponseId: first.response.id } },
    });
    expect(result.text).toBe('echo: call get_weather {"city":"Lima"}');
    const [branch, again] = result.steps.map((step) => sessionOf(step.response.id));
    expect(branch).not.toBe(conversation);
    expect(again).toBe(branch);
    expect((await tailgateGet(world.tailgate.baseURL, '/sessions?limit=100')).sessions).toHaveLength(before + 1);
    expect(await shapesOf(branch!)).toEqual([
      ['message', 'hello'],
      ['message', 'echo: hello'],
      ['message', 'call get_weather {"city":"Lima"}'],
      ['function_call', '{"city":"Lima"}'],
      ['function_call_output', '15C'],
      ['message', 'echo: call get_weather {"city":"Lima"}'],
    ]);
    expect(await shapesOf(conversation)).toEqual([
      ['message', 'hello'],
      ['message', 'echo: hello'],
      ['message', 'more'],
      ['message', 'echo: more'],
    ]);
  });

  it('a step an abort notice refused in the branch of a loop under an older response is refused again', async () => {
    const { client } = world;
    const tools = [{ type: 'function' as const, name: 'get_weather', strict: false, parameters: { type: 'object' } }];
    const first = await client.responses.create({ model: 'echo', input: 'template' });
    await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'moved on' });
    const ask = { role: 'user' as const, content: 'call get_weather {"city":"Riga"}' };
    const step = (input: OpenAI.Responses.ResponseInputItem[]) =>
      client.responses.create({ model: 'echo', previous_response_id: first.id, input, tools });
    const called = await step([ask]);
    const branch = sessionOf(called.id)!;
    const call = called.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
    const answered = [
      ask,
      ...(called.output as OpenAI.Responses.ResponseInputItem[]),
      { type: 'function_call_output' as const, call_id: call.call_id, output: '1C' },
    ];
    await tailgatePost(world.tailgate.baseURL, `/sessions/${branch}/inbox`, { name: 'abort', content: 'stop' });
    await expect(step(answered)).rejects.toThrow(/aborted/);
    const before = (await tailgateGet(world.tailgate.baseURL, '/sessions?limit=100')).sessions.length;
    // The AI SDK retries a 409: the same step again, refused with no model call, branch or new conversation.
    await expect(step(answered)).rejects.toThrow(/aborted/);
    expect((await tailgateGet(world.tailgate.baseURL, '/sessions?limit=100')).sessions).toHaveLength(before);
    expect((await shapesOf(branch)).at(-1)).toEqual(['function_call_output', '1C']);
  });

  it("another loop's steps under the same older response never go on in this loop's branch", async () => {
    const { client } = world;
    const first = await client.responses.create({ model: 'echo', input: 'template' });
    await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'moved on' });
    const step = (input: string | ReturnType<typeof echoedThen>, user: string) =>
      client.responses.create({ model: 'echo', previous_response_id: first.id, input, user });
    // One end user's first step branches off the response.
    const branch = sessionOf((await step('hi', 'alice')).id)!;
    // Another's input happens to hold the same items since that response: a branch of its own.
    const theirs = await step(echoedThen('hi', 'my account number is 42'), 'bob');
    expect(sessionOf(theirs.id)).not.toBe(branch);
    expect(await shapesOf(branch)).toEqual([
      ['message', 'template'],
      ['message', 'echo: template'],
      ['message', 'hi'],
      ['message', 'echo: hi'],
    ]);
    // The first user's own next step still goes on in its branch.
    expect(sessionOf((await step(echoedThen('hi', 'and then'), 'alice')).id)).toBe(branch);
  });

  it('another end user resending the items after the newest response branches, never continuing it', async () => {
    const { client } = world;
    const first = await client.responses.create({ model: 'echo', input: 'template' });
    const conversation = sessionOf(first.id)!;
    const step = (input: string | ReturnType<typeof echoedThen>, user: string) =>
      client.responses.create({ model: 'echo', previous_response_id: first.id, input, user });
    // One end user's first step continues the response, its conversation's newest.
    expect(sessionOf((await step('hi', 'alice')).id)).toBe(conversation);
    // Another's input holds exactly the items stored since that response: a branch of its own.
    const theirs = await step(echoedThen('hi', 'my account number is 42'), 'bob');
    expect(sessionOf(theirs.id)).not.toBe(conversation);
    expect(await shapesOf(conversation)).toEqual([
      ['message', 'template'],
      ['message', 'echo: template'],
      ['message', 'hi'],
      ['message', 'echo: hi'],
    ]);
    // So do another caller's metadata and safety_identifier; the first user's own next step goes on.
    const other = { model: 'echo', previous_response_id: first.id, user: 'alice', input: echoedThen('hi', 'x') };
    for (const differs of [{ metadata: { tenant: 'b' } }, { safety_identifier: 'b' }, { prompt_cache_key: 'b' }])
      expect(sessionOf((await client.responses.create({ ...other, ...differs })).id)).not.toBe(conversation);
    expect(sessionOf((await step(echoedThen('hi', 'and then'), 'alice')).id)).toBe(conversation);
    expect((await shapesOf(conversation)).slice(4)).toEqual([
      ['message', 'and then'],
      ['message', 'echo: and then'],
    ]);
  });

  it('a keyed retry of a step that went on after the newest response is replayed, in the background too', async () => {
    const { client } = world;
    for (const background of [false, true]) {
      const first = await client.responses.create({ model: 'echo', input: 'template' });
      const step = async (input: string | ReturnType<typeof echoedThen>, key: string) => {
        const headers = { 'Idempotency-Key': `${key}-${first.id}` };
        const asked = { model: 'echo', previous_response_id: first.id, input, background };
        const created = await client.responses.create(asked, { headers });
        return background ? settledResponse(client, created.id) : created;
      };
      await step('hi', 'one');
      const second = await step(echoedThen('hi', 'next'), 'two');
      expect(sessionOf(second.id)).toBe(sessionOf(first.id));
      // Retried at once, and after the loop's next step: the same response, nothing taken again.
      expect((await step(echoedThen('hi', 'next'), 'two')).id).toBe(second.id);
      const more = [...echoedThen('hi', 'next'), ...echoedThen('next', 'more').slice(1)];
      await step(more, 'three');
      expect((await step(echoedThen('hi', 'next'), 'two')).id).toBe(second.id);
      expect(await shapesOf(sessionOf(first.id)!)).toHaveLength(8);
    }
  });

  it('an input that edits what followed the response still branches', async () => {
    const { client } = world;
    const first = await client.responses.create({ model: 'echo', input: 'one' });
    const second = await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'two' });
    // The items since the first response, the user's message given, then a new one.
    const since = (text: string) => ({
      model: 'echo',
      previous_response_id: first.id,
      input: [
        { role: 'user' as const, content: text },
        { role: 'assistant' as const, content: 'echo: two' },
        { role: 'user' as const, content: 'three' },
      ],
    });
    const edited = await client.responses.create(since('two, edited'));
    expect(edited.conversation!.id).not.toBe(second.conversation!.id);
    const resent = await client.responses.create(since('two'));
    expect(resent.conversation!.id).toBe(second.conversation!.id);
    expect(resent.previous_response_id).toBe(first.id);
    expect(await shapesOf(second.conversation!.id)).toEqual([
      ['message', 'one'],
      ['message', 'echo: one'],
      ['message', 'two'],
      ['message', 'echo: two'],
      ['message', 'three'],
      ['message', 'echo: three'],
    ]);
  });

  it("a step's input_items list every item it sent, the resent ones included, as OpenAI lists them", async () => {
    const { client } = world;
    const first = await client.responses.create({ model: 'echo', input: 'one' });
    await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'two' });
    const step = await client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: [
        { role: 'user', content: 'two' },
        { role: 'assistant', content: 'echo: two' },
        { role: 'user', content: 'three' },
      ],
    });
    expect((step as any).tailgate).toMatchObject({ resent: { compactions: [] } });
    const listed = await client.responses.inputItems.list(step.id, { order: 'asc' });
    const texts = listed.data.map((item: any) => [item.role, item.content[0].text]);
    expect(texts).toEqual([
      ['user', 'two'],
      ['assistant', 'echo: two'],
      ['user', 'three'],
    ]);
  });
});

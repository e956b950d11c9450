import { createOpenAI } from '@ai-sdk/openai';
import { Agent, OpenAIProvider, Runner, tool as agentsTool } from '@openai/agents';
import { generateText, stepCountIs, streamText, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { RecordedRequest } from '../support/fake-providers/fake-provider-server.ts';
import { chatCompletion as completion, clientOnFakeOpenAI, tailgatePost, TOKEN } from './server.ts';
import { agentsTracingOff } from './agents-tracing.ts';

// A tool loop under `conversation` whose client resends what it sent before (the AI SDK's
// generateText and streamText with providerOptions.openai.conversation, lib/openai/conversation-resend.ts):
// every step goes on in the conversation, which stores each item once. The model is an OpenAI
// one on a loopback fake provider that calls `lookup` until its prompt holds TOOL_STEPS outputs.
const TOOL_STEPS = 5;

const chunk = (delta: object, finish: string | null = null) => {
  const choices = [{ index: 0, delta, finish_reason: finish }];
  const body = { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices };
  return `data: ${JSON.stringify(body)}\n\n`;
};

/** While set, the provider answers a 500 (a streamed step then fails after its first event). */
let failing = false;

function reply(request: RecordedRequest) {
  if (failing) return { status: 500, json: { error: { message: 'unavailable', type: 'server_error' } } };
  const { messages, tools, stream } = request.body;
  const answered = messages.filter((message: { role: string }) => message.role === 'tool').length;
  const call = {
    id: `call_${answered + 1}`,
    type: 'function',
    function: { name: 'lookup', arguments: `{"n":${answered + 1}}` },
  };
  const calls = tools?.length > 0 && answered < TOOL_STEPS;
  const text = `done after ${answered}`;
  if (!stream)
    return {
      json: calls
        ? completion({ content: null, tool_calls: [call] }, 'tool_calls')
        : completion({ content: text }, 'stop'),
    };
  const body = calls
    ? chunk({ role: 'assistant', content: null, tool_calls: [{ index: 0, ...call }] }) + chunk({}, 'tool_calls')
    : chunk({ role: 'assistant', content: text }) + chunk({}, 'stop');
  return { sse: `${body}data: [DONE]\n\n` };
}

agentsTracingOff();
const world = clientOnFakeOpenAI(reply);
const lookup = { lookup: tool({ inputSchema: z.object({ n: z.number() }), execute: async ({ n }) => `result ${n}` }) };
/** The tool, as the openai client sends it. */
const tools = [{ type: 'function' as const, name: 'lookup', strict: false, parameters: { type: 'object' } }];
const output = (n: number) => ({ type: 'function_call_output' as const, call_id: `call_${n}`, output: `result ${n}` });
/** What the AI SDK sends at step `n` under `conversation`: its message, then every tool output so far. */
const resentStep = (first: string, n: number) => [
  { role: 'user' as const, content: first },
  ...Array.from({ length: n - 1 }, (_, index) => output(index + 1)),
];
const sessionOf = (responseId: string) => /^resp_(conv_[0-9a-f]{24})_/.exec(responseId)![1];

/** A conversation's items, oldest first: [type, text, call id or output]. */
async function itemsOf(conversation: string): Promise<unknown[][]> {
  const items = await world.client.conversations.items.list(conversation, { order: 'asc', limit: 100 });
  return items.data.map((item: any) =>
    item.type === 'message'
      ? ['message', item.role, item.content[0].text]
      : [item.type, item.call_id, item.output ?? item.arguments],
  );
}

/** The conversation a loop of TOOL_STEPS calls (then an answer) leaves after `first`: each item once. */
const loopItems = (first: string) => [
  ['message', 'user', first],
  ...Array.from({ length: TOOL_STEPS }, (_, index) => [
    ['function_call', `call_${index + 1}`, `{"n":${index + 1}}`],
    ['function_call_output', `call_${index + 1}`, `result ${index + 1}`],
  ]).flat(),
  ['message', 'assistant', `done after ${TOOL_STEPS}`],
];

const spoken = (message: { role: string }) => message.role !== 'system';

/** The prompt of each request whose first message was `first`, instructions left out: [role, text or call ids]. */
const prompts = (first: string) =>
  world.provider.requests
    .filter((request) => request.body.messages.find(spoken)?.content === first)
    .map((request) =>
      request.body.messages
        .filter(spoken)
        .map((message: any) => [
          message.role,
          message.content ?? message.tool_calls.map((call: { id: string }) => call.id).join(),
        ]),
    );

/** The prompt of a loop's step `step` (1-based) after `first`. */
const stepPrompt = (first: string, step: number) => [
  ['user', first],
  ...Array.from({ length: step - 1 }, (_, index) => [
    ['assistant', `call_${index + 1}`],
    ['tool', `result ${index + 1}`],
  ]).flat(),
];

describe('a tool loop under conversation that resends its items', () => {
  it.each([
    ['generateText', false],
    ['streamText', true],
  ])("the AI SDK's %s: every step in the conversation, each item stored once", async (_, stream) => {
    const sent: { input: unknown[] }[] = [];
    const openai = createOpenAI({
      apiKey: TOKEN,
      baseURL: world.tailgate.baseURL,
      fetch: async (url, init) => {
        sent.push(JSON.parse(String(init?.body)));
        return fetch(url, init);
      },
    });
    const conversation = (await world.client.conversations.create({})).id;
    const prompt = `look it up (${stream ? 'streamed' : 'generated'})`;
    const loop = {
      model: openai('gpt-4o-mini'),
      system: 'Be brief.',
      prompt,
      tools: lookup,
      stopWhen: stepCountIs(TOOL_STEPS + 2),
      providerOptions: { openai: { conversation } },
    };
    const result = stream ? streamText(loop) : await generateText(loop);
    expect(await result.text).toBe(`done after ${TOOL_STEPS}`);
    const steps = await result.steps;
    expect(steps).toHaveLength(TOOL_STEPS + 1);
    expect(steps.map((step) => sessionOf(step.response.id))).toEqual(Array(TOOL_STEPS + 1).fill(conversation));
    // The SDK resent its instructions, message and every tool output so far on each step...
    expect(sent.map((body) => body.input.length)).toEqual(
      Array.from({ length: TOOL_STEPS + 1 }, (_, step) => step + 2),
    );
    // ...and the conversation holds each once, so each step's prompt is the loop so far.
    expect(await itemsOf(conversation)).toEqual(loopItems(prompt));
    const instructions = world.provider.requests
      .filter((request) => request.body.messages.find(spoken)?.content === prompt)
      .map((request) => request.body.messages.filter((message: { role: string }) => !spoken(message)));
    expect(instructions).toEqual(Array(TOOL_STEPS + 1).fill([{ role: 'system', content: 'Be brief.' }]));
    expect(prompts(prompt)).toEqual(Array.from({ length: TOOL_STEPS + 1 }, (_, step) => stepPrompt(prompt, step + 1)));
  });

  it('the openai client sending only its new items under conversation: each stored as sent', async () => {
    const { client } = world;
    const conversation = (await client.conversations.create({})).id;
    const first = 'look it up (new items)';
    let response = await client.responses.create({ model: 'gpt-4o-mini', conversation, tools, input: first });
    for (let step = 1; step <= TOOL_STEPS; step++) {
      const input = [{ type: 'function_call_output' as const, call_id: `call_${step}`, output: `result ${step}` }];
      response = await client.responses.create({ model: 'gpt-4o-mini', conversation, tools, input });
    }
    expect(response.output_text).toBe(`done after ${TOOL_STEPS}`);
    expect(await itemsOf(conversation)).toEqual(loopItems(first));
    expect(prompts(first)).toEqual(Array.from({ length: TOOL_STEPS + 1 }, (_, step) => stepPrompt(first, step + 1)));
    // Its same message sent again with a new one after a response: both stored, as sent.
    const again = await client.responses.create({
      model: 'gpt-4o-mini',
      conversation,
      input: [
        { role: 'user', content: first },
        { role: 'user', content: 'and more' },
      ],
    });
    expect(again.conversation!.id).toBe(conversation);
    expect((await itemsOf(conversation)).slice(-3, -1)).toEqual([loopItems(first)[0], ['message', 'user', 'and more']]);
  });

  it("another end user's request resending a loop's items is stored as sent", async () => {
    const { client } = world;
    const conversation = (await client.conversations.create({})).id;
    const input = 'look it up';
    await client.responses.create({ model: 'gpt-4o-mini', conversation, tools, input, user: 'alice' });
    // Alice's loop would resend her message with the output; Bob's request holds the same items.
    await client.responses.create({
      model: 'gpt-4o-mini',
      conversation,
      tools,
      input: resentStep(input, 2),
      user: 'bob',
    });
    const [message, call, answer] = loopItems(input);
    expect((await itemsOf(conversation)).slice(0, 4)).toEqual([message, call, message, answer]);
  });

  it("a request in the loop's scope resending its items, not answering its call next, is stored as sent", async () => {
    const { client } = world;
    const conversation = (await client.conversations.create({})).id;
    const input = 'look it up (same scope)';
    await client.responses.create({ model: 'gpt-4o-mini', conversation, tools, input });
    // No user, safety_identifier or metadata: one scope. A step of the loop would answer call_1
    // first; this request sends the loop's message again, then a message of its own.
    const other = [
      { role: 'user' as const, content: input },
      { role: 'user' as const, content: 'and mine?' },
    ];
    await client.responses.create({ model: 'gpt-4o-mini', conversation, tools, input: other });
    const [message, call] = loopItems(input);
    expect((await itemsOf(conversation)).slice(0, 4)).toEqual([
      message,
      call,
      message,
      ['message', 'user', 'and mine?'],
    ]);
  });

  it('a step whose streamed attempt failed, resent again, goes on: each item stored once', async () => {
    const { client } = world;
    const conversation = (await client.conversations.create({})).id;
    const first = 'look it up (retried)';
    for (const n of [1, 2])
      await client.responses.create({ model: 'gpt-4o-mini', conversation, tools, input: resentStep(first, n) });
    failing = true;
    try {
      const failed = await client.responses.create({
        model: 'gpt-4o-mini',
        conversation,
        tools,
        input: resentStep(first, 3),
        stream: true,
      });
      for await (const event of failed) expect(event.type).not.toBe('response.completed');
    } finally {
      failing = false;
    }
    for (const n of [3, 4])
      await client.responses.create({ model: 'gpt-4o-mini', conversation, tools, input: resentStep(first, n) });
    expect(await itemsOf(conversation)).toEqual(loopItems(first).slice(0, 8));
    expect(prompts(first).at(-1)).toEqual(stepPrompt(first, 4));
  });

  it('a step retried under its Idempotency-Key is answered with its stored response', async () => {
    const { client } = world;
    const conversation = (await client.conversations.create({})).id;
    const first = 'look it up (keyed)';
    await client.responses.create({ model: 'gpt-4o-mini', conversation, tools, input: first });
    const body = { model: 'gpt-4o-mini', conversation, tools, input: resentStep(first, 2) };
    const headers = { 'idempotency-key': 'conversation-step-2' };
    const answered = await client.responses.create(body, { headers });
    const retried = await client.responses.create(body, { headers });
    expect(retried.id).toBe(answered.id);
    // Once the loop went on too.
    await client.responses.create({ ...body, input: resentStep(first, 3) });
    expect((await client.responses.create(body, { headers })).id).toBe(answered.id);
    expect(await itemsOf(conversation)).toEqual(loopItems(first).slice(0, 6));
  });

  it("@openai/agents' run under conversationId, which sends only its new items: each stored once", async () => {
    const conversation = (await world.client.conversations.create({})).id;
    const agentTool = agentsTool({
      name: 'lookup',
      description: 'Looks it up',
      parameters: z.object({ n: z.number() }),
      execute: async ({ n }) => `result ${n}`,
    });
    const agent = new Agent({ name: 'looker', model: 'gpt-4o-mini', tools: [agentTool] });
    const provider = new OpenAIProvider({ openAIClient: world.client, useResponses: true });
    const runner = new Runner({ modelProvider: provider, tracingDisabled: true });
    const first = 'look it up (agents)';
    const result = await runner.run(agent, first, { conversationId: conversation, maxTurns: TOOL_STEPS + 2 });
    expect(result.finalOutput).toBe(`done after ${TOOL_STEPS}`);
    expect(await itemsOf(conversation)).toEqual(loopItems(first));
    expect(prompts(first)).toEqual(Array.from({ length: TOOL_STEPS + 1 }, (_, step) => stepPrompt(first, step + 1)));
  });

  it('a step an abort notice refused, resent again, is refused again: its items stored once', async () => {
    const { client } = world;
    const conversation = (await client.conversations.create({})).id;
    const first = 'look it up (aborted)';
    await client.responses.create({ model: 'gpt-4o-mini', conversation, tools, input: first });
    await tailgatePost(world.tailgate.baseURL, `/sessions/${conversation}/inbox`, { name: 'abort', content: 'stop' });
    const step = { model: 'gpt-4o-mini', conversation, tools, input: resentStep(first, 2) };
    for (let attempt = 0; attempt < 2; attempt++) {
      const refused = await client.responses.create(step).catch((error: unknown) => error);
      expect(refused).toMatchObject({ status: 409, code: 'aborted' });
    }
    expect(await itemsOf(conversation)).toEqual(loopItems(first).slice(0, 3));
  });
});

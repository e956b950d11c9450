import { Agent, MaxTurnsExceededError, OpenAIProvider, Runner, RunState, tool } from '@openai/agents';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { RecordedRequest } from '../support/fake-providers/fake-provider-server.ts';
import { chatCompletion as completion, clientOnFakeOpenAI, tailgateGet, TOKEN } from './server.ts';
import { agentsTracingOff } from './agents-tracing.ts';

// @openai/agents runs as agent builders write them (streamed, parallel calls, a failing tool,
// approvals resumed from a serialized RunState by another client, a handoff to another model,
// maxTurns), each in its three modes of keeping history: every run stays one conversation that
// stores each item once, and every prompt answers each call. The model is an OpenAI one on a
// loopback fake provider scripted by its prompt's last user message.

const chunk = (delta: object, finish: string | null = null) => {
  const choices = [{ index: 0, delta, finish_reason: finish }];
  const body = { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices };
  return `data: ${JSON.stringify(body)}\n\n`;
};

type Call = { id: string; name: string; args: string };

/** The model's answer: `calls`, else `text`, as JSON or streamed. */
function answer(stream: boolean, calls: Call[] | undefined, text: string) {
  const toolCalls = calls?.map((call) => ({
    id: call.id,
    type: 'function',
    function: { name: call.name, arguments: call.args },
  }));
  if (!stream)
    return {
      json: toolCalls
        ? completion({ content: null, tool_calls: toolCalls }, 'tool_calls')
        : completion({ content: text }, 'stop'),
    };
  const body = toolCalls
    ? chunk({ role: 'assistant', content: null, tool_calls: toolCalls.map((call, index) => ({ index, ...call })) }) +
      chunk({}, 'tool_calls')
    : chunk({ role: 'assistant', content: text }) + chunk({}, 'stop');
  return { sse: `${body}data: [DONE]\n\n` };
}

/**
 * The script, by the first word of the last user message: `parallel` calls lookup, broken and
 * lookup at once; `approve` calls lookup and danger at once; `loop` calls lookup at its first
 * three steps; `handoff` calls the transfer tool offered. Once a step's calls are answered, a
 * text answer naming the steps since that message and the instructions.
 */
function reply(request: RecordedRequest) {
  const { messages, stream, tools } = request.body;
  const at = messages.findLastIndex((message: { role: string }) => message.role === 'user');
  const word = String(messages[at].content).split(' ')[0] ?? '';
  const steps = messages.slice(at).filter((message: { tool_calls?: unknown }) => message.tool_calls).length;
  const call = (n: number, name: string, args = `{"n":${n}}`) => ({ id: `call_${word}_${steps}_${n}`, name, args });
  const transfer = (tools ?? [])
    .map((offered: any) => offered.function.name)
    .find((name: string) => name.startsWith('transfer_to'));
  const script: Record<string, Call[] | undefined> = {
    parallel: steps === 0 ? [call(1, 'lookup'), call(2, 'broken', '{}'), call(3, 'lookup')] : undefined,
    approve: steps === 0 ? [call(1, 'lookup'), call(2, 'danger', '{"what":"it"}')] : undefined,
    loop: steps < 3 ? [call(steps, 'lookup')] : undefined,
    handoff: steps === 0 && transfer ? [call(1, transfer, '{}')] : undefined,
  };
  const instructions = messages.find((message: { role: string }) => message.role === 'system')?.content ?? 'none';
  return answer(stream, script[word], `done after ${steps} (${instructions})`);
}

agentsTracingOff();
const world = clientOnFakeOpenAI(reply);
const lookup = tool({
  name: 'lookup',
  description: 'Looks it up',
  parameters: z.object({ n: z.number() }),
  execute: async ({ n }) => `result ${n}`,
});
const broken = tool({
  name: 'broken',
  description: 'Fails',
  parameters: z.object({}),
  execute: async () => {
    throw new Error('out of order');
  },
});
const danger = tool({
  name: 'danger',
  description: 'Asks first',
  parameters: z.object({ what: z.string() }),
  needsApproval: true,
  execute: async ({ what }) => `did ${what}`,
});

/** A runner on its own client, as another process would have. */
const runner = () =>
  new Runner({
    modelProvider: new OpenAIProvider({
      openAIClient: new OpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL, maxRetries: 0 }),
      useResponses: true,
    }),
    tracingDisabled: true,
  });

async function sessionIds(): Promise<string[]> {
  const listed = await tailgateGet(world.tailgate.baseURL, '/sessions?limit=100');
  return listed.sessions.map((row: { id: string }) => row.id);
}

/** A conversation's items, oldest first: [type, call_id or role, text, output or arguments]. */
async function itemsOf(sessionId: string): Promise<unknown[][]> {
  const listed = await tailgateGet(world.tailgate.baseURL, `/sessions/${sessionId}/items?limit=100`);
  return listed.items
    .reverse()
    .map((item: any) => [item.type, item.call_id ?? item.role, item.content ?? item.output ?? item.arguments]);
}

const sessionOf = (responseId: string) => /^resp_(conv_[0-9a-f]{24})_/.exec(responseId)![1]!;

/**
 * Checks that the run whose last response is `lastResponseId` kept one conversation, holding
 * `held` then `items`, and that no other conversation was made since `before` (the sessions
 * before the run).
 */
async function oneConversation(before: string[], lastResponseId: string, held: unknown[][], items: unknown[][]) {
  const sessionId = sessionOf(lastResponseId);
  const made = (await sessionIds()).filter((id) => !before.includes(id));
  expect(made).toEqual(held.length === 0 && !before.includes(sessionId) ? [sessionId] : []);
  expect(await itemsOf(sessionId)).toEqual([...held, ...items]);
}

/** Every prompt the provider got answers each call before the next message (no call without its output). */
function promptsWhole(): void {
  for (const request of world.provider.requests) {
    const open = new Set<string>();
    for (const message of request.body.messages) {
      if (message.role === 'tool') open.delete(message.tool_call_id);
      else expect([...open]).toEqual([]);
      for (const call of message.tool_calls ?? []) open.add(call.id);
    }
    expect([...open]).toEqual([]);
  }
}

/** Runs a streamed run's events to its end. */
async function drained<T extends { completed: Promise<void> }>(result: T & AsyncIterable<unknown>): Promise<T> {
  for await (const _ of result);
  await result.completed;
  return result;
}

type Mode = 'resending its history' | 'conversationId' | 'previousResponseId';
const MODES: Mode[] = ['resending its history', 'conversationId', 'previousResponseId'];

/**
 * The run options of `mode`, the items its conversation holds before the run (`held`), and the
 * sessions there are then (`before`).
 */
async function modeOptions(mode: Mode): Promise<{ options: object; held: unknown[][]; before: string[] }> {
  let options = {};
  let held: unknown[][] = [];
  if (mode === 'conversationId') options = { conversationId: (await world.client.conversations.create({})).id };
  if (mode === 'previousResponseId') {
    options = {
      previousResponseId: (await world.client.responses.create({ model: 'gpt-4o-mini', input: 'hello' })).id,
    };
    held = [
      ['message', 'user', 'hello'],
      ['message', 'assistant', 'done after 0 (none)'],
    ];
  }
  return { options, held, before: await sessionIds() };
}

/** The calls `call_<word>_0_<n>` of a run's first step with their arguments, then their outputs, as stored. */
function firstStep(word: string, calls: [args: string, output: unknown][]): unknown[][] {
  const id = (index: number) => `call_${word}_0_${index + 1}`;
  return [
    ...calls.map(([args], index) => ['function_call', id(index), args]),
    ...calls.map(([, output], index) => ['function_call_output', id(index), output]),
  ];
}

describe('@openai/agents runs', () => {
  it.each(MODES)('streamed, three calls at once, one tool failing, %s: one conversation', async (mode) => {
    const { options, held, before } = await modeOptions(mode);
    const agent = new Agent({ name: 'a', model: 'gpt-4o-mini', instructions: 'Be brief.', tools: [lookup, broken] });
    const result = await drained(await runner().run(agent, `parallel ${mode}`, { ...options, stream: true }));
    expect(result.finalOutput).toBe('done after 1 (Be brief.)');
    await oneConversation(before, result.lastResponseId!, held, [
      ['message', 'user', `parallel ${mode}`],
      ...firstStep('parallel', [
        ['{"n":1}', 'result 1'],
        ['{}', expect.stringContaining('An error occurred while running the tool')],
        ['{"n":3}', 'result 3'],
      ]),
      ['message', 'assistant', 'done after 1 (Be brief.)'],
    ]);
    promptsWhole();
  });

  it.each(MODES)('a call awaiting approval, resumed from its serialized state by another client, %s', async (mode) => {
    const { options, held, before } = await modeOptions(mode);
    const agent = new Agent({ name: 'a', model: 'gpt-4o-mini', tools: [lookup, danger] });
    const interrupted = await drained(await runner().run(agent, `approve ${mode}`, { ...options, stream: true }));
    expect(interrupted.interruptions.map((item) => item.name)).toEqual(['danger']);
    const saved = interrupted.state.toString();
    // Later, elsewhere: the state is read back, approved and run again (its conversation with it).
    const state = await RunState.fromString(agent, saved);
    state.approve(state.getInterruptions()[0]!);
    const resumed = await runner().run(agent, state);
    expect(resumed.finalOutput).toBe('done after 1 (none)');
    await oneConversation(before, resumed.lastResponseId!, held, [
      ['message', 'user', `approve ${mode}`],
      ...firstStep('approve', [
        ['{"n":1}', 'result 1'],
        ['{"what":"it"}', 'did it'],
      ]),
      ['message', 'assistant', 'done after 1 (none)'],
    ]);
    promptsWhole();
  });

  it.each(MODES)('a handoff to an agent on another model with other instructions, %s', async (mode) => {
    const { options, held, before } = await modeOptions(mode);
    const echo = new Agent({ name: 'echoer', model: 'echo', instructions: 'Echo it.' });
    const agent = new Agent({ name: 'a', model: 'gpt-4o-mini', instructions: 'Hand off.', handoffs: [echo] });
    const result = await drained(await runner().run(agent, `handoff ${mode}`, { ...options, stream: true }));
    expect(result.lastAgent?.name).toBe('echoer');
    expect(result.finalOutput).toBe(`echo: handoff ${mode}`);
    await oneConversation(before, result.lastResponseId!, held, [
      ['message', 'user', `handoff ${mode}`],
      ...firstStep('handoff', [['{}', '{"assistant":"echoer"}']]),
      ['message', 'assistant', `echo: handoff ${mode}`],
    ]);
    promptsWhole();
  });

  it.each(MODES)('maxTurns exceeded, then the run resumed from its state, %s', async (mode) => {
    const { options, held, before } = await modeOptions(mode);
    const agent = new Agent({ name: 'a', model: 'gpt-4o-mini', tools: [lookup] });
    const exceeded = await runner()
      .run(agent, `loop ${mode}`, { ...options, maxTurns: 2 })
      .catch((error: unknown) => error);
    expect(exceeded).toBeInstanceOf(MaxTurnsExceededError);
    const resumed = await runner().run(agent, (exceeded as MaxTurnsExceededError).state!, { maxTurns: 5 });
    expect(resumed.finalOutput).toBe('done after 3 (none)');
    const step = (n: number) => [
      ['function_call', `call_loop_${n}_${n}`, `{"n":${n}}`],
      ['function_call_output', `call_loop_${n}_${n}`, `result ${n}`],
    ];
    await oneConversation(before, resumed.lastResponseId!, held, [
      ['message', 'user', `loop ${mode}`],
      ...step(0),
      ...step(1),
      ...step(2),
      ['message', 'assistant', 'done after 3 (none)'],
    ]);
    promptsWhole();
  });
});

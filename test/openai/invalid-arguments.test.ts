import { createOpenAI } from '@ai-sdk/openai';
import { generateText, type ModelMessage, stepCountIs, streamText, tool } from 'ai';
import type OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { RecordedRequest } from '../support/fake-providers/fake-provider-server.ts';
import { chatCompletion as completion, clientOnFakeOpenAI, tailgateGet, TOKEN } from './server.ts';

// A model's call whose arguments are not a JSON object (cut short, or a bare value): the AI SDK
// takes it for an invalid tool input, answers it with an error and resends it with `{}` as its
// arguments; the openai client resends it as it came. Either way the loop stays one
// conversation (lib/openai/history-items.ts), and each item is stored once.

/** The arguments the model calls `lookup` with, by the tag its prompt's last user message ends with. */
const ARGUMENTS: Record<string, string> = { cut: '{"n": 1', bare: '"one"' };

const chunk = (delta: object, finish: string | null = null) => {
  const choices = [{ index: 0, delta, finish_reason: finish }];
  const body = { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices };
  return `data: ${JSON.stringify(body)}\n\n`;
};

/** A call of `lookup` with the tagged arguments while the prompt holds no tool result, else a text answer. */
function reply(request: RecordedRequest) {
  const { messages, stream } = request.body;
  const last = messages.findLast((message: { role: string }) => message.role === 'user');
  const tag = String(last.content).split(' ').at(-1)!;
  const answered = !(tag in ARGUMENTS) || messages.some((message: { role: string }) => message.role === 'tool');
  const call = { id: `call_${tag}`, type: 'function', function: { name: 'lookup', arguments: ARGUMENTS[tag] } };
  const text = `answered ${messages.length}`;
  if (!stream)
    return {
      json: answered
        ? completion({ content: text }, 'stop')
        : completion({ content: null, tool_calls: [call] }, 'tool_calls'),
    };
  const body = answered
    ? chunk({ role: 'assistant', content: text }) + chunk({}, 'stop')
    : chunk({ role: 'assistant', content: null, tool_calls: [{ index: 0, ...call }] }) + chunk({}, 'tool_calls');
  return { sse: `${body}data: [DONE]\n\n` };
}

const world = clientOnFakeOpenAI(reply);
const lookup = { lookup: tool({ inputSchema: z.object({ n: z.number() }), execute: async ({ n }) => `result ${n}` }) };
/** The tool, as the openai client sends it. */
const tools = [{ type: 'function' as const, name: 'lookup', strict: false, parameters: { type: 'object' } }];

async function sessionIds(): Promise<Set<string>> {
  const listed = await tailgateGet(world.tailgate.baseURL, '/sessions?limit=100');
  return new Set(listed.sessions.map((row: { id: string }) => row.id));
}

/** The sessions created since `before`, each as its items [type, call_id, arguments, output or text], oldest first */
async function sessionsSince(before: Set<string>): Promise<unknown[][][]> {
  const fresh = [...(await sessionIds())].filter((id) => !before.has(id));
  return Promise.all(
    fresh.map(async (id) => {
      const listed = await tailgateGet(world.tailgate.baseURL, `/sessions/${id}/items?limit=100`);
      return listed.items
        .reverse()
        .map((item: any) => [item.type, item.call_id ?? null, item.arguments ?? item.output ?? item.content]);
    }),
  );
}

describe('a call whose arguments are not a JSON object', () => {
  it.each([
    ['cut short', 'cut', false],
    ['a bare value', 'bare', false],
    ['cut short, streamed', 'cut', true],
  ])("the AI SDK's loop after a call %s, then its next turn: one conversation", async (_, tag, stream) => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL });
    const before = await sessionIds();
    const prompt = `look it up ${stream ? 'streamed' : 'generated'} ${tag}`;
    const loop = { model: openai('gpt-4o-mini'), prompt, tools: lookup, stopWhen: stepCountIs(3) };
    const result = stream ? streamText(loop) : await generateText(loop);
    expect(await result.text).toBe('answered 3');
    const messages: ModelMessage[] = [
      { role: 'user', content: prompt },
      ...(await result.responseMessages),
      { role: 'user', content: 'and now?' },
    ];
    expect((await generateText({ model: openai('gpt-4o-mini'), messages, tools: lookup })).text).toBe('answered 5');
    const [items, ...others] = await sessionsSince(before);
    expect(others).toEqual([]);
    expect(items!.map((item) => item.slice(0, 2))).toEqual([
      ['message', null],
      ['function_call', `call_${tag}`],
      ['function_call_output', `call_${tag}`],
      ['message', null],
      ['message', null],
      ['message', null],
    ]);
    // The call is stored as the model made it.
    expect(items![1]![2]).toBe(ARGUMENTS[tag]);
  });

  it("the AI SDK's loop under previousResponseId after a call cut short: in that response's conversation", async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL });
    const start = await world.client.responses.create({ model: 'gpt-4o-mini', input: 'hello' });
    const before = await sessionIds();
    const result = await generateText({
      model: openai('gpt-4o-mini'),
      prompt: 'look it up after a response cut',
      tools: lookup,
      stopWhen: stepCountIs(3),
      providerOptions: { openai: { previousResponseId: start.id } },
    });
    expect(result.text).toBe('answered 5');
    const conversation = /^resp_(conv_[0-9a-f]{24})_/;
    expect(result.steps.map((step) => conversation.exec(step.response.id)![1])).toEqual(
      Array(2).fill(start.conversation!.id),
    );
    expect(await sessionsSince(before)).toEqual([]);
  });

  it('the openai client resending the call as it came: one conversation', async () => {
    const before = await sessionIds();
    const input = 'the openai client resends cut';
    const first = await world.client.responses.create({ model: 'gpt-4o-mini', input, tools });
    const call = first.output[0]!;
    expect(call).toMatchObject({ type: 'function_call', arguments: ARGUMENTS.cut });
    const output = { type: 'function_call_output' as const, call_id: 'call_cut', output: 'not JSON' };
    const second = await world.client.responses.create({
      model: 'gpt-4o-mini',
      tools,
      input: [{ role: 'user', content: input }, call as OpenAI.Responses.ResponseFunctionToolCall, output],
    });
    expect(second.conversation!.id).toBe(first.conversation!.id);
    expect(await sessionsSince(before)).toHaveLength(1);
  });
});

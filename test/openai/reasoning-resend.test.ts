import { createOpenAI } from '@ai-sdk/openai';
import { generateText, stepCountIs, tool } from 'ai';
import OpenAI from 'openai';
import type { ResponseInputItem, ResponseReasoningItem } from 'openai/resources/responses/responses';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  fixture,
  startFakeProvider,
  type FakeProvider,
  type RecordedRequest,
} from '../support/fake-providers/fake-provider-server.ts';
import { recordedThinking, thinksToCall } from '../support/fake-providers/thinking.ts';
import { startTailgate, TOKEN } from './server.ts';

// A `store: false` tool loop keeps the model's thinking: the reasoning items come with their
// `encrypted_content` when the request includes "reasoning.encrypted_content", and the next
// step, which sends them back, gives the provider the thinking blocks with their signatures.

const answer = (request: RecordedRequest, name: string) =>
  request.body?.stream ? { sse: fixture(`${name}.sse`) } : { json: JSON.parse(fixture(`${name}.json`)) };

let anthropic: FakeProvider;
let tailgate: Awaited<ReturnType<typeof startTailgate>>;
let client: OpenAI;

beforeAll(async () => {
  anthropic = await startFakeProvider((request) =>
    answer(request, thinksToCall(request) ? 'anthropic-message-thinking-tool-use' : 'anthropic-message-text'),
  );
  tailgate = await startTailgate({
    ANTHROPIC_API_KEY: 'test-key',
    ANTHROPIC_BASE_URL: anthropic.baseURL,
    MODEL_MAX_RETRIES: '0',
    // gpt-5: a name the AI SDK takes for a reasoning model (it then asks for the payload itself).
    MODEL_ALIASES: 'claude-wire=anthropic:claude-sonnet-4-5,gpt-5=anthropic:claude-sonnet-4-5',
  });
  client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
});
afterAll(async () => {
  await tailgate.close();
  await anthropic.close();
});

const { thinking, signature, redacted, callId } = recordedThinking;
const tools = [
  {
    type: 'function' as const,
    name: 'get_weather',
    strict: false,
    parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
  },
];
const payloads = [
  JSON.stringify({ anthropic: { signature } }),
  JSON.stringify({ anthropic: { redactedData: redacted } }),
];

/** The thinking blocks the provider got back before the call, in the assistant message of its last request. */
function thinkingSentBack(): unknown[] {
  const messages = anthropic.requests.at(-1)!.body.messages as { role: string; content: { type: string }[] }[];
  const assistant = messages.find((message) => message.role === 'assistant')!;
  return assistant.content.filter((block) => block.type === 'thinking' || block.type === 'redacted_thinking');
}

const request = {
  model: 'claude-wire',
  tools,
  reasoning: { effort: 'medium' as const },
  store: false,
};

describe('store: false reasoning across a tool loop', () => {
  it('returns the payload only when included, and the next call gets the thinking blocks back', async () => {
    const plain = await client.responses.create({ ...request, input: 'Weather in Paris?' });
    const plainReasoning = plain.output.filter((item) => item.type === 'reasoning');
    expect(plainReasoning).toHaveLength(2);
    // As OpenAI answers without the include: the summary, no payload.
    for (const item of plainReasoning) expect(item).not.toHaveProperty('encrypted_content');

    const first = await client.responses.create({
      ...request,
      input: 'Weather in Paris?',
      include: ['reasoning.encrypted_content'],
    });
    const [thought, redactedThought, call] = first.output as [
      ResponseReasoningItem,
      ResponseReasoningItem,
      OpenAI.Responses.ResponseFunctionToolCall,
    ];
    expect(thought).toMatchObject({
      type: 'reasoning',
      summary: [{ type: 'summary_text', text: thinking }],
      encrypted_content: payloads[0],
    });
    expect(redactedThought).toMatchObject({ type: 'reasoning', summary: [], encrypted_content: payloads[1] });
    expect(call).toMatchObject({ type: 'function_call', call_id: callId });

    const second = await client.responses.create({
      ...request,
      include: ['reasoning.encrypted_content'],
      input: [
        { role: 'user', content: 'Weather in Paris?' },
        ...(first.output as ResponseInputItem[]),
        { type: 'function_call_output', call_id: callId, output: '18C, sunny' },
      ],
    });
    expect(second.status).toBe('completed');
    const body = anthropic.requests.at(-1)!.body;
    expect(body.thinking?.type).toBe('enabled');
    expect(thinkingSentBack()).toEqual([
      { type: 'thinking', thinking, signature },
      { type: 'redacted_thinking', data: redacted },
    ]);
  });

  it('streams the payload in the reasoning items, and a resent summary without it goes without thinking', async () => {
    const stream = client.responses.stream({
      ...request,
      input: 'Weather in Paris?',
      include: ['reasoning.encrypted_content'],
    });
    const done: ResponseReasoningItem[] = [];
    for await (const event of stream)
      if (event.type === 'response.output_item.done' && event.item.type === 'reasoning') done.push(event.item);
    const response = await stream.finalResponse();
    // The recorded stream thinks in one block (no redacted one).
    expect(done.map((item) => item.encrypted_content)).toEqual([payloads[0]]);
    expect(response.output.filter((item) => item.type === 'reasoning')).toEqual(done);

    // Resent without its payload (as returned without the include), the reasoning cannot go back:
    // the call continues the loop without thinking, as Anthropic asks, rather than failing.
    const call = response.output.find((item) => item.type === 'function_call')!;
    const next = await client.responses.create({
      ...request,
      input: [
        { role: 'user', content: 'Weather in Paris?' },
        ...done.map((item) => ({ ...item, encrypted_content: null })),
        { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
        { type: 'function_call_output', call_id: callId, output: '18C, sunny' },
      ],
    });
    expect(next.status).toBe('completed');
    expect(anthropic.requests.at(-1)!.body.thinking).toBeUndefined();
  });

  it("the AI SDK's store: false loop keeps thinking at its second step", async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL });
    const sent = anthropic.requests.length;
    const result = await generateText({
      model: openai('gpt-5'),
      prompt: 'Weather in Paris?',
      tools: {
        get_weather: tool({ inputSchema: z.object({ location: z.string() }), execute: async () => '18C, sunny' }),
      },
      providerOptions: { openai: { store: false, reasoningEffort: 'medium' } },
      stopWhen: stepCountIs(3),
    });
    expect(result.steps).toHaveLength(2);
    expect(anthropic.requests).toHaveLength(sent + 2);
    expect(anthropic.requests.at(-1)!.body.thinking?.type).toBe('enabled');
    expect(thinkingSentBack()).toEqual([
      { type: 'thinking', thinking, signature },
      { type: 'redacted_thinking', data: redacted },
    ]);
  });
});

import { createOpenAI } from '@ai-sdk/openai';
import { generateText, stepCountIs, tool } from 'ai';
import type OpenAI from 'openai';
import type { ResponseInputItem, ResponseReasoningItem } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { recordedThinking, recordedTool } from '../support/fake-providers/thinking.ts';
import { clientOnThinkingAnthropic, TOKEN } from './server.ts';

// A `store: false` tool loop keeps the model's thinking: the reasoning items come with their
// `encrypted_content` when the request includes "reasoning.encrypted_content", and the next
// step, which sends them back, gives the provider the thinking blocks with their signatures.

const world = clientOnThinkingAnthropic();

const { thinking, signature, redacted, callId } = recordedThinking;
const tools = [recordedTool];
const payloads = [
  JSON.stringify({ anthropic: { signature } }),
  JSON.stringify({ anthropic: { redactedData: redacted } }),
];

/** The thinking blocks the provider got back before the call, in the assistant message of its last request. */
function thinkingSentBack(): unknown[] {
  const messages = world.provider.requests.at(-1)!.body.messages as { role: string; content: { type: string }[] }[];
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
    const plain = await world.client.responses.create({ ...request, input: 'Weather in Paris?' });
    const plainReasoning = plain.output.filter((item) => item.type === 'reasoning');
    expect(plainReasoning).toHaveLength(2);
    // As OpenAI answers without the include: the summary, no payload.
    for (const item of plainReasoning) expect(item).not.toHaveProperty('encrypted_content');

    const first = await world.client.responses.create({
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

    const second = await world.client.responses.create({
      ...request,
      include: ['reasoning.encrypted_content'],
      input: [
        { role: 'user', content: 'Weather in Paris?' },
        ...(first.output as ResponseInputItem[]),
        { type: 'function_call_output', call_id: callId, output: '18C, sunny' },
      ],
    });
    expect(second.status).toBe('completed');
    const body = world.provider.requests.at(-1)!.body;
    expect(body.thinking?.type).toBe('enabled');
    expect(thinkingSentBack()).toEqual([
      { type: 'thinking', thinking, signature },
      { type: 'redacted_thinking', data: redacted },
    ]);
  });

  it('streams the payload in the reasoning items, and a resent summary without it goes without thinking', async () => {
    const stream = world.client.responses.stream({
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
    const next = await world.client.responses.create({
      ...request,
      input: [
        { role: 'user', content: 'Weather in Paris?' },
        ...done.map((item) => ({ ...item, encrypted_content: null })),
        { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
        { type: 'function_call_output', call_id: callId, output: '18C, sunny' },
      ],
    });
    expect(next.status).toBe('completed');
    expect(world.provider.requests.at(-1)!.body.thinking).toBeUndefined();

    // A payload tailgate did not give (OpenAI's own, from a history brought over) is not sent: the same.
    const foreign = await world.client.responses.create({
      ...request,
      input: [
        { role: 'user', content: 'Weather in Paris?' },
        ...done.map((item) => ({ ...item, encrypted_content: 'gAAAAABo-openai-payload==' })),
        { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
        { type: 'function_call_output', call_id: callId, output: '18C, sunny' },
      ],
    });
    expect(foreign.status).toBe('completed');
    expect(world.provider.requests.at(-1)!.body.thinking).toBeUndefined();
    expect(thinkingSentBack()).toEqual([]);
  });

  it("takes a stored response's reasoning back by reference, with its payload", async () => {
    const stored = await world.client.responses.create({ ...request, store: true, input: 'Weather in Paris?' });
    // A stored response's reasoning items carry no payload: its conversation keeps it.
    expect(stored.output[0]).not.toHaveProperty('encrypted_content');
    const references = stored.output.map((item) => ({ type: 'item_reference' as const, id: item.id! }));
    const next = await world.client.responses.create({
      ...request,
      input: [
        { role: 'user', content: 'Weather in Paris?' },
        ...references,
        { type: 'function_call_output', call_id: callId, output: '18C, sunny' },
      ],
    });
    expect(next.status).toBe('completed');
    expect(thinkingSentBack()).toEqual([
      { type: 'thinking', thinking, signature },
      { type: 'redacted_thinking', data: redacted },
    ]);
    // A reasoning id the stored item does not have names nothing.
    const missing = `${references[1]!.id.slice(0, -2)}_3`;
    await expect(
      world.client.responses.create({
        ...request,
        input: [
          { type: 'item_reference', id: missing },
          { role: 'user', content: 'Hi' },
        ],
      }),
    ).rejects.toMatchObject({ status: 404, param: 'input[0].id' });
  });

  it("the AI SDK's store: false loop keeps thinking at its second step", async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL });
    const sent = world.provider.requests.length;
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
    expect(world.provider.requests).toHaveLength(sent + 2);
    expect(world.provider.requests.at(-1)!.body.thinking?.type).toBe('enabled');
    expect(thinkingSentBack()).toEqual([
      { type: 'thinking', thinking, signature },
      { type: 'redacted_thinking', data: redacted },
    ]);
  });
});

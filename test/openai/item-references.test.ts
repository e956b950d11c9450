import { createOpenAI } from '@ai-sdk/openai';
import { generateText, stepCountIs, tool } from 'ai';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { chatCompletion as completion, clientOnFakeOpenAI, TOKEN } from './server.ts';

/**
 * `item_reference` input items: the AI SDK (`store: true`, its default) sends a stored
 * response's output back as references to it, in a chat that resends its messages and in a
 * tool loop whose model wrote text before its call.
 */

// An OpenAI model on a loopback fake provider: with tools offered and the user last, a preamble
// and a tool call (as Claude often answers); else text.
const world = clientOnFakeOpenAI((request) => {
  const { messages, tools } = request.body;
  if (messages.at(-1).role === 'user' && tools?.length) {
    const call = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } };
    return { json: completion({ content: 'Let me check.', tool_calls: [call] }, 'tool_calls') };
  }
  return { json: completion({ content: 'It is sunny.' }, 'stop') };
});

const conversationOf = (responseId: string) => /^resp_(conv_[0-9a-f]{24})_/.exec(responseId)![1];

describe('item_reference input items', () => {
  it('a second generateText with the first answer in its messages continues the conversation', async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL });
    const first = await generateText({ model: openai('echo'), prompt: 'hello' });
    expect(first.text).toBe('echo: hello');
    const second = await generateText({
      model: openai('echo'),
      messages: [{ role: 'user', content: 'hello' }, ...first.response.messages, { role: 'user', content: 'again' }],
    });
    expect(second.text).toBe('echo: again');
    expect(conversationOf(second.response.id)).toBe(conversationOf(first.response.id));
  });

  it("the AI SDK's tool loop runs when the model says something before its tool call", async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL });
    const result = await generateText({
      model: openai('gpt-4o-mini'),
      prompt: 'weather in Paris?',
      tools: { get_weather: tool({ inputSchema: z.object({ city: z.string() }), execute: async () => '18C' }) },
      stopWhen: stepCountIs(3),
    });
    expect(result.steps).toHaveLength(2);
    expect(result.text).toBe('It is sunny.');
    expect(conversationOf(result.steps[1]!.response.id)).toBe(conversationOf(result.steps[0]!.response.id));
    // The second step's prompt held the preamble, the call and its output, as the model made them.
    const sent = JSON.stringify(world.provider.requests.at(-1)!.body.messages);
    expect(sent).toContain('Let me check.');
    expect(sent).toContain('18C');
  });

  it('a reference to no stored item is a 404 naming it', async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'hi' });
    const stored = first.output[0]!.id!;
    const unknown = stored.replace(/_\d+$/, '_99');
    const error = await world.client.responses
      .create({
        model: 'echo',
        input: [
          { role: 'user', content: 'hi' },
          { type: 'item_reference', id: unknown },
          { role: 'user', content: 'more' },
        ],
      })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect(error).toMatchObject({ param: 'input[1].id' });
    const garbled = await world.client.responses
      .create({ model: 'echo', input: [{ type: 'item_reference', id: 'msg_nothing' }] })
      .catch((caught: unknown) => caught);
    expect(garbled).toBeInstanceOf(OpenAI.NotFoundError);
  });

  it('a reference to a compaction item (cmp_...) that names no compaction is a 404 naming it', async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'hello there' });
    const conversation = conversationOf(first.id);
    const refused = async (id: string) =>
      world.client.responses
        .create({
          model: 'echo',
          input: [
            { role: 'user', content: 'hi' },
            { type: 'item_reference', id },
          ],
        })
        .catch((caught: unknown) => caught);
    // A conversation never compacted, and one that does not exist.
    for (const id of [`cmp_${conversation}_2`, `cmp_conv_${'0'.repeat(24)}_2`]) {
      const error = await refused(id);
      expect(error, id).toBeInstanceOf(OpenAI.NotFoundError);
      expect(error, id).toMatchObject({ param: 'input[1].id' });
    }
    // Compacted: its compaction item stands, another start seq names none.
    const compacted = await world.client.responses.compact({ model: 'echo', previous_response_id: first.id });
    const item = compacted.output.find((entry) => entry.type === 'compaction')!;
    expect(item.id).toMatch(new RegExp(`^cmp_${conversation}_\\d+$`));
    const startSeq = Number(/_(\d+)$/.exec(item.id!)![1]);
    const other = await refused(`cmp_${conversation}_${startSeq + 1}`);
    expect(other).toBeInstanceOf(OpenAI.NotFoundError);
    expect(other).toMatchObject({ param: 'input[1].id' });
    const taken = await world.client.responses.create({
      model: 'echo',
      input: [
        { type: 'item_reference', id: item.id! },
        { role: 'user', content: 'after' },
      ],
    });
    expect(taken.output_text).toBe('echo: after');
  });
});

import { describe, expect, it } from 'vitest';
import { fixture } from '../support/fake-providers/fake-provider-server.ts';
import { clientOnFakeOpenAI, tailgatePost } from './server.ts';

// An OpenAI model on a loopback fake provider (the recorded text answer): what its request held.
const world = clientOnFakeOpenAI(() => ({ text: fixture('openai-chat-text.json') }));

const parameters = {
  type: 'object',
  properties: { city: { type: 'string' } },
  required: ['city'],
  additionalProperties: false,
};

describe('a strict function tool', () => {
  it('reaches the model strict, and a response echoes it strict; a tool without it is not', async () => {
    const tools = [
      { type: 'function' as const, name: 'get_weather', strict: true, parameters },
      { type: 'function' as const, name: 'get_time', strict: false, parameters },
    ];
    const response = await world.client.responses.create({ model: 'gpt-4o-mini', input: 'weather?', tools });
    const sent = world.provider.requests.at(-1)!.body.tools;
    expect(sent.map((tool: any) => tool.function.strict)).toEqual([true, undefined]);
    expect(response.tools.map((tool) => (tool as { strict: boolean }).strict)).toEqual([true, false]);
    expect((await world.client.responses.retrieve(response.id)).tools[0]).toMatchObject({ strict: true });
  });

  it('reaches the model strict from a chat completion', async () => {
    await world.client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'weather?' }],
      tools: [{ type: 'function', function: { name: 'get_weather', strict: true, parameters } }],
    });
    expect(world.provider.requests.at(-1)!.body.tools[0].function.strict).toBe(true);
  });

  it('reaches the model from a native turn as from a response: the prefix stays the same across both', async () => {
    const tools = [
      { type: 'function' as const, name: 'get_weather', strict: true, parameters },
      { type: 'function' as const, name: 'get_time', strict: false, parameters },
    ];
    await world.client.responses.create({ model: 'gpt-4o-mini', input: 'weather?', tools });
    const fromResponse = world.provider.requests.at(-1)!.body.tools;
    const session = await tailgatePost(world.tailgate.baseURL, '/sessions', { model: 'openai:gpt-4o-mini', tools });
    const { id } = (await session.json()) as { id: string };
    const turn = await tailgatePost(world.tailgate.baseURL, `/sessions/${id}/turns`, { input: 'weather?' });
    expect(turn.status).toBe(200);
    expect(world.provider.requests.at(-1)!.body.tools).toEqual(fromResponse);
  });
});

import { describe, expect, it } from 'vitest';
import { clientOnTailgate, tailgateGet } from './server.ts';

// A response branching off an older one (previous_response_id not the newest) whose input
// answers a call of that older response, or makes a call whose id a later turn opened: its
// calls are judged against the history it branches from, not the conversation's newest turn.
const world = clientOnTailgate();

const weather = {
  type: 'function' as const,
  name: 'get_weather',
  strict: false,
  parameters: { type: 'object', properties: { city: { type: 'string' } } },
};

async function contentsOf(sessionId: string): Promise<unknown[]> {
  const listed = await tailgateGet(world.tailgate.baseURL, `/sessions/${sessionId}/items?limit=100`);
  return listed.items.reverse().map((item: any) => [item.type, item.content ?? item.output ?? item.arguments]);
}

/** A conversation whose second response made a call (the first made none). */
async function callInSecond() {
  const { client } = world;
  const first = await client.responses.create({ model: 'echo', input: 'hello', tools: [weather] });
  const second = await client.responses.create({
    model: 'echo',
    previous_response_id: first.id,
    input: 'call get_weather {"city":"Rome"}',
    tools: [weather],
  });
  const call = second.output[0]!;
  if (call.type !== 'function_call') throw new Error('expected a function call');
  return { first, call };
}

describe('a branch answering the older response it continues', () => {
  it("answers its previous response's call again, in a new conversation, once the call was answered", async () => {
    const { client } = world;
    const first = await client.responses.create({
      model: 'echo',
      input: 'call get_weather {"city":"Oslo"}',
      tools: [weather],
    });
    const call = first.output[0]!;
    if (call.type !== 'function_call') throw new Error('expected a function call');
    const answer = { type: 'function_call_output' as const, call_id: call.call_id, output: '-2C' };
    const second = await client.responses.create({ model: 'echo', previous_response_id: first.id, input: [answer] });
    expect(second.conversation!.id).toBe(first.conversation!.id);
    // The step again from the same response (a regenerate, or a retry without an Idempotency-Key).
    const again = await client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: [{ ...answer, output: '-3C' }],
    });
    expect(again.conversation!.id).not.toBe(first.conversation!.id);
    expect(again.previous_response_id).toBe(first.id);
    expect(await contentsOf(again.conversation!.id)).toEqual([
      ['message', 'call get_weather {"city":"Oslo"}'],
      ['function_call', '{"city":"Oslo"}'],
      ['function_call_output', '-3C'],
      ['message', 'echo: call get_weather {"city":"Oslo"}'],
    ]);
    expect(await contentsOf(first.conversation!.id)).toHaveLength(4);
  });

  it("makes a call whose call_id is open in the conversation's newest turn", async () => {
    const { client } = world;
    const { first, call } = await callInSecond();
    // The second step resent from the first response with the call and its output (what the
    // AI SDK sends on a tool loop's next step with a fixed previousResponseId).
    const branched = await client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      tools: [weather],
      input: [
        { role: 'user', content: 'call get_weather {"city":"Rome"}' },
        { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
        { type: 'function_call_output', call_id: call.call_id, output: '21C' },
      ],
    });
    expect(branched.output_text).toBe('echo: call get_weather {"city":"Rome"}');
    expect(branched.previous_response_id).toBe(first.id);
  });

  it('an input invalid where it branches is a 400 that stores nothing, no conversation either', async () => {
    const { client } = world;
    const { first, call } = await callInSecond();
    const sessions = async () => (await tailgateGet(world.tailgate.baseURL, '/sessions?limit=100')).sessions.length;
    const before = await sessions();
    // The newest response's call answered from the first response, where it was never made.
    const refused = await client.responses
      .create({
        model: 'echo',
        previous_response_id: first.id,
        tools: [weather],
        input: [{ type: 'function_call_output', call_id: call.call_id, output: '21C' }],
      })
      .catch((error: unknown) => error);
    expect((refused as { status?: number }).status).toBe(400);
    expect(await sessions()).toBe(before);
    expect(await contentsOf(first.conversation!.id)).toHaveLength(4);
  });
});

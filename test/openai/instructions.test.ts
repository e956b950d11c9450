import { describe, expect, it } from 'vitest';
import { clientOnTailgate, tailgateGet } from './server.ts';

// A conversation keeps one system prompt: the instructions a request sets are its instructions
// from then on (lib/openai/create-response.ts), until a request sets others or clears them.
const world = clientOnTailgate();

const sessionOf = (conversation: { id: string } | null | undefined) =>
  tailgateGet(world.tailgate.baseURL, `/sessions/${conversation!.id}`);

describe('instructions of a conversation', () => {
  it('instructions: "" (or null) clears the ones an earlier request set; none sent keeps them', async () => {
    const { client } = world;
    const first = await client.responses.create({ model: 'echo', input: 'one', instructions: 'Be brief.' });
    const kept = await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'two' });
    expect(kept.instructions).toBe('Be brief.');
    const cleared = await client.responses.create({
      model: 'echo',
      previous_response_id: kept.id,
      input: 'three',
      instructions: '',
    });
    expect(cleared.instructions).toBeNull();
    expect((await sessionOf(first.conversation)).instructions).toBeNull();
    // The next turn's prompt has no system message, and the next response ran with none.
    const prompt = await tailgateGet(world.tailgate.baseURL, `/sessions/${first.conversation!.id}/prompt`);
    expect(prompt.items[0]).toMatchObject({ role: 'user', content: 'one' });
    const after = await client.responses.create({ model: 'echo', previous_response_id: cleared.id, input: 'four' });
    expect(after.instructions).toBeNull();
    expect((await client.responses.retrieve(after.id)).instructions).toBeNull();
    // null clears them as "" does.
    const again = await client.responses.create({
      model: 'echo',
      previous_response_id: after.id,
      input: 'five',
      instructions: 'Be long.',
    });
    const nulled = { model: 'echo', previous_response_id: again.id, input: 'six', instructions: null };
    expect((await client.responses.create(nulled)).instructions).toBeNull();
    expect((await sessionOf(first.conversation)).instructions).toBeNull();
  });
});

import OpenAI from 'openai';
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

  it('a branch runs with the instructions in force at the response it continues, not those set after it', async () => {
    const { client } = world;
    const first = await client.responses.create({ model: 'echo', input: 'one', instructions: 'Be brief.' });
    const second = await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'two' });
    await client.responses.create({
      model: 'echo',
      previous_response_id: second.id,
      input: 'three',
      instructions: 'Answer in French.',
    });
    // Off the second response, which ran with the first's instructions (kept: none were sent).
    const branch = await client.responses.create({ model: 'echo', previous_response_id: second.id, input: 'four' });
    expect(branch.conversation!.id).not.toBe(first.conversation!.id);
    expect(branch.instructions).toBe('Be brief.');
    expect((await sessionOf(branch.conversation)).instructions).toBe('Be brief.');
    expect((await sessionOf(first.conversation)).instructions).toBe('Answer in French.');
    // A branch off a response that ran with none runs with none; one that sends its own takes them.
    const cleared = await client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: 'five',
      instructions: '',
    });
    await client.responses.create({ model: 'echo', previous_response_id: cleared.id, input: 'six', instructions: 'x' });
    const bare = await client.responses.create({ model: 'echo', previous_response_id: cleared.id, input: 'seven' });
    expect(bare.instructions).toBeNull();
    expect((await sessionOf(bare.conversation)).instructions).toBeNull();
    const own = { model: 'echo', previous_response_id: second.id, input: 'eight', instructions: 'Be long.' };
    const owned = await client.responses.create(own);
    expect(owned.instructions).toBe('Be long.');
    expect((await sessionOf(owned.conversation)).instructions).toBe('Be long.');
  });

  it('a system or developer message after another item is a 400 whose message starts with its param', async () => {
    const { client } = world;
    const late = [
      { role: 'user' as const, content: 'one' },
      { role: 'developer' as const, content: 'Be brief.' },
    ];
    const refusals = await Promise.all([
      client.responses.create({ model: 'echo', input: late }).catch((error: unknown) => error),
      client.conversations
        .create({ items: late.map((item) => ({ type: 'message' as const, ...item })) })
        .catch((error: unknown) => error),
      client.chat.completions.create({ model: 'echo', messages: late }).catch((error: unknown) => error),
    ]);
    expect(refusals.map((error) => (error as InstanceType<typeof OpenAI.BadRequestError>).param)).toEqual([
      'input[1].role',
      'items[1].role',
      'messages[1].role',
    ]);
    for (const error of refusals) {
      const { param, message } = error as InstanceType<typeof OpenAI.BadRequestError>;
      expect(message.startsWith(`400 ${param}: a developer message must come before`), message).toBe(true);
    }
  });
});

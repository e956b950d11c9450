import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { clientOnTailgate, tailgateGet } from './server.ts';

// Deleting responses and items with the official `openai` client against the real app on a
// loopback Node server (echo model).
const world = clientOnTailgate();

async function texts(conversation: string): Promise<string[]> {
  const page = await world.client.conversations.items.list(conversation, { order: 'asc' });
  return page.data.map((item) =>
    item.type === 'message' ? item.content.map((part) => ('text' in part ? part.text : '')).join('') : item.type,
  );
}

async function failure(work: Promise<unknown>): Promise<unknown> {
  return work.then(
    () => 'succeeded',
    (error: unknown) => error,
  );
}

describe('the official openai client: deleting responses', () => {
  it('takes the newest response out: its conversation goes back to the response before it', async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'first question' });
    const conversation = first.conversation!.id;
    const second = await world.client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: 'second question',
    });
    // One that another response came after is refused, naming why; nothing changes.
    const refused = await failure(world.client.responses.delete(first.id));
    expect(refused).toBeInstanceOf(OpenAI.ConflictError);
    expect(refused).toMatchObject({ code: 'delete_refused' });
    expect((refused as Error).message).toMatch(/not the newest/);

    await world.client.responses.delete(second.id);
    expect(await failure(world.client.responses.retrieve(second.id))).toBeInstanceOf(OpenAI.NotFoundError);
    // A retry finds it gone.
    expect(await failure(world.client.responses.delete(second.id))).toBeInstanceOf(OpenAI.NotFoundError);
    expect(await world.client.responses.retrieve(first.id)).toMatchObject({ id: first.id, status: 'completed' });
    expect(await world.client.conversations.retrieve(conversation)).toMatchObject({ id: conversation });
    const kept = await texts(conversation);
    expect(kept).toHaveLength(2);
    expect(kept.join(' ')).not.toMatch(/second question/);
    const prompt = await tailgateGet(world.tailgate.baseURL, `/sessions/${conversation}/prompt?full=true`);
    expect(JSON.stringify(prompt.items)).not.toMatch(/second question/);
    expect(JSON.stringify(prompt.items)).toMatch(/first question/);

    // previous_response_id = the response before it continues the same conversation.
    const third = await world.client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: 'third question',
    });
    expect(third.conversation!.id).toBe(conversation);
    expect(third.previous_response_id).toBe(first.id);
    const now = await texts(conversation);
    expect(now).toHaveLength(4);
    expect(now.join(' ')).toMatch(/first question.*third question/);
    expect(now.join(' ')).not.toMatch(/second question/);
  });

  it("deleting a conversation's first response leaves it empty, and it goes on", async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'only question' });
    const conversation = first.conversation!.id;
    await world.client.responses.delete(first.id);
    expect(await world.client.conversations.retrieve(conversation)).toMatchObject({ id: conversation });
    expect(await texts(conversation)).toEqual([]);
    const next = await world.client.responses.create({ model: 'echo', conversation, input: 'a new start' });
    expect(next.conversation!.id).toBe(conversation);
    expect((await texts(conversation))[0]).toBe('a new start');
  });

  it('keeps a response whose conversation got items after it', async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'question' });
    const conversation = first.conversation!.id;
    await world.client.conversations.items.create(conversation, {
      items: [{ type: 'message', role: 'user', content: 'an aside' }],
    });
    const refused = await failure(world.client.responses.delete(first.id));
    expect(refused).toMatchObject({ status: 409, code: 'delete_refused' });
    expect(await world.client.responses.retrieve(first.id)).toMatchObject({ id: first.id });
  });
});

describe('the official openai client: deleting conversation items', () => {
  it('is refused with 400 unsupported naming why, and 404 for an item not there', async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'keep me' });
    const conversation = first.conversation!.id;
    const [item] = (await world.client.conversations.items.list(conversation, { order: 'asc' })).data;
    const refused = await failure(
      world.client.conversations.items.delete(item!.id!, { conversation_id: conversation }),
    );
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused).toMatchObject({ code: 'unsupported', param: 'item_id' });
    expect((refused as Error).message).toMatch(/append-only/);
    expect(await texts(conversation)).toHaveLength(2);
    const missing = await failure(
      world.client.conversations.items.delete(`msg_${conversation}_99`, { conversation_id: conversation }),
    );
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
  });
});

import OpenAI from 'openai';
import type { ResponseInputItem } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { clientOnTailgate, tailgateGet } from './server.ts';

// Under previous_response_id or conversation the server holds the history: an input item sent
// with the id of an item the conversation holds already is refused, as OpenAI refuses it (400,
// "Duplicate item found with id ..."), and nothing is stored. An item_reference adds the item it
// names as itself, and an id the conversation no longer holds (a deleted response's) is no duplicate.
const world = clientOnTailgate();

async function failure(work: Promise<unknown>): Promise<unknown> {
  return work.then(
    () => 'succeeded',
    (error: unknown) => error,
  );
}

async function itemTexts(client: OpenAI, conversation: string): Promise<string[]> {
  const listed = await client.conversations.items.list(conversation, { order: 'asc' });
  return listed.data.map((item) => JSON.stringify('content' in item ? item.content : item));
}

describe('an input item sent with the id of an item its conversation holds', () => {
  it('is refused under previous_response_id, naming its place in the input; nothing is stored', async () => {
    const { client } = world;
    const first = await client.responses.create({ model: 'echo', input: 'plain' });
    const conversation = first.conversation!.id;
    const before = await itemTexts(client, conversation);
    const resent = first.output[0]!;
    const error = await failure(
      client.responses.create({
        model: 'echo',
        previous_response_id: first.id,
        input: [...(first.output as ResponseInputItem[]), { role: 'user', content: 'next' }],
      }),
    );
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error).toMatchObject({
      status: 400,
      type: 'invalid_request_error',
      param: 'input[0].id',
      message: expect.stringContaining(`Duplicate item found with id ${resent.id}.`),
    });
    expect(await itemTexts(client, conversation)).toEqual(before);
    // An input item of the conversation (its first message) is one of its items too.
    const [question] = (await client.responses.inputItems.list(first.id)).data;
    const again = await failure(
      client.responses.create({
        model: 'echo',
        previous_response_id: first.id,
        input: [
          { role: 'user', content: 'new' },
          { ...(question as ResponseInputItem), id: question!.id } as ResponseInputItem,
        ],
      }),
    );
    expect(again).toMatchObject({ status: 400, param: 'input[1].id' });
    expect(await itemTexts(client, conversation)).toEqual(before);
    // Without the output resent, the conversation goes on.
    const next = await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'next' });
    expect(next.output_text).toBe('echo: next');
    expect(await itemTexts(client, conversation)).toHaveLength(4);
  });

  it('is refused under conversation; an item_reference to it is added as itself', async () => {
    const { client } = world;
    const first = await client.responses.create({ model: 'echo', input: 'plain' });
    const conversation = first.conversation!.id;
    const error = await failure(
      client.responses.create({
        model: 'echo',
        conversation,
        input: [{ role: 'user', content: 'next' }, ...(first.output as ResponseInputItem[])],
      }),
    );
    expect(error).toMatchObject({
      status: 400,
      type: 'invalid_request_error',
      param: 'input[1].id',
      message: expect.stringContaining(`Duplicate item found with id ${first.output[0]!.id}.`),
    });
    expect(await itemTexts(client, conversation)).toHaveLength(2);
    const referenced = await client.responses.create({
      model: 'echo',
      conversation,
      input: [
        { type: 'item_reference', id: first.output[0]!.id! },
        { role: 'user', content: 'next' },
      ],
    });
    expect(referenced.status).toBe('completed');
    expect(await itemTexts(client, conversation)).toHaveLength(5);
  });

  it('is refused under previous_response_id naming an older response (no branch made), not after it', async () => {
    const { client } = world;
    const first = await client.responses.create({ model: 'echo', input: 'first' });
    const conversation = first.conversation!.id;
    const second = await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'second' });
    const forks = async () => (await tailgateGet(world.tailgate.baseURL, `/sessions/${conversation}/forks`)).forks;
    const before = await forks();
    for (const resent of [first.output[0]!, (await client.responses.inputItems.list(first.id)).data[0]!]) {
      const error = await failure(
        client.responses.create({
          model: 'echo',
          previous_response_id: first.id,
          input: [{ role: 'user', content: 'branch' }, resent as ResponseInputItem],
        }),
      );
      expect(error).toMatchObject({
        status: 400,
        type: 'invalid_request_error',
        param: 'input[1].id',
        message: expect.stringContaining(`Duplicate item found with id ${resent.id}.`),
      });
    }
    expect(await forks()).toEqual(before);
    // The second response's output is no item of the branch at the first: it goes in as sent.
    const branched = await client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: [...(second.output as ResponseInputItem[]), { role: 'user', content: 'branch' }],
    });
    expect(branched.conversation!.id).not.toBe(conversation);
    expect(await itemTexts(client, branched.conversation!.id)).toHaveLength(5);
    expect(await forks()).toHaveLength(before.length + 1);
  });

  it("is refused in a branch's later steps under its parent's id of an inherited item", async () => {
    const { client } = world;
    const first = await client.responses.create({ model: 'echo', input: 'first' });
    const second = await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'second' });
    const branch = await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'branch' });
    const forked = branch.conversation!.id;
    expect(forked).not.toBe(first.conversation!.id);
    const before = await itemTexts(client, forked);
    // The first response's output is in the branch's history (as OpenAI's chain of the branch holds it).
    const [question] = (await client.responses.inputItems.list(first.id)).data;
    for (const resent of [first.output[0]!, question!]) {
      const error = await failure(
        client.responses.create({
          model: 'echo',
          previous_response_id: branch.id,
          input: [{ role: 'user', content: 'next' }, resent as ResponseInputItem],
        }),
      );
      expect(error).toMatchObject({
        status: 400,
        param: 'input[1].id',
        message: expect.stringContaining(`Duplicate item found with id ${resent.id}.`),
      });
    }
    expect(await itemTexts(client, forked)).toEqual(before);
    // The second response's output came after the branch's point: it is none of the branch's items.
    const next = await client.responses.create({
      model: 'echo',
      previous_response_id: branch.id,
      input: [{ role: 'user', content: 'next' }, ...(second.output as ResponseInputItem[])],
    });
    expect(next.conversation!.id).toBe(forked);
    expect(await itemTexts(client, forked)).toHaveLength(before.length + 3);
  });

  it('is none without an id: a history resent under previous_response_id is appended again', async () => {
    const { client } = world;
    const first = await client.responses.create({ model: 'echo', input: 'one' });
    const conversation = first.conversation!.id;
    const next = await client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: [
        { role: 'user', content: 'one' },
        { role: 'assistant', content: first.output_text },
        { role: 'user', content: 'two' },
      ],
    });
    expect(next.conversation!.id).toBe(conversation);
    const texts = await itemTexts(client, conversation);
    expect(texts).toHaveLength(6);
    expect(texts.slice(2, 4)).toEqual(texts.slice(0, 2));
  });

  it("is no duplicate once a delete took the item out, nor once another item took that item's seq", async () => {
    const { client } = world;
    const first = await client.responses.create({ model: 'echo', input: 'first' });
    const conversation = first.conversation!.id;
    const second = await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'second' });
    await client.responses.delete(second.id);
    const output = second.output as ResponseInputItem[];
    const third = await client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: [{ role: 'user', content: 'third' }, ...output],
    });
    expect(third.status).toBe('completed');
    // Seq 4 is held by the item the third response stored: the deleted item's id still names nothing.
    const fourth = await client.responses.create({
      model: 'echo',
      previous_response_id: third.id,
      input: [...output, { role: 'user', content: 'fourth' }],
    });
    expect(fourth.status).toBe('completed');
    expect(await itemTexts(client, conversation)).toHaveLength(8);
  });

  it('goes on in a loop that resends its whole history, without previous_response_id or conversation', async () => {
    const { client } = world;
    const first = await client.responses.create({ model: 'echo', input: 'plain' });
    const next = await client.responses.create({
      model: 'echo',
      input: [
        { role: 'user', content: 'plain' },
        ...(first.output as ResponseInputItem[]),
        { role: 'user', content: 'next' },
      ],
    });
    expect(next.conversation?.id).toBe(first.conversation!.id);
    expect(await itemTexts(client, first.conversation!.id)).toHaveLength(4);
  });
});

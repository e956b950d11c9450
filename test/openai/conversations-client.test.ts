import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { clientOnTailgate, tailgateGet as getJson, TOKEN } from './server.ts';

// The official `openai` client's Conversations API against the real app (echo model).
const world = clientOnTailgate();

function tailgateGet(path: string): Promise<any> {
  return getJson(world.tailgate.baseURL, path);
}

describe('the official openai client: conversations', () => {
  it(
    'creates a conversation with items, appends, lists in both orders and pages, and continues it with ' +
      'responses.create',
    async () => {
      const conversation = await world.client.conversations.create({
        metadata: { topic: 'weather' },
        items: [
          { type: 'message', role: 'system', content: 'Be brief.' },
          { type: 'message', role: 'user', content: 'Hello there' },
        ],
      });
      expect(conversation).toMatchObject({ object: 'conversation', metadata: { topic: 'weather' } });
      expect(conversation.id).toMatch(/^conv_[0-9a-f]{24}$/);
      const id = conversation.id;
      // The conversation is a session: the system message became its instructions.
      const session = await tailgateGet(`/sessions/${id}`);
      expect(session).toMatchObject({
        id,
        instructions: 'Be brief.',
        metadata: { topic: 'weather' },
        counts: { items: 1, turns: 0 },
      });

      const added = await world.client.conversations.items.create(id, {
        items: [
          { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
          { type: 'function_call_output', call_id: 'call_1', output: '18C, clear' },
        ],
      });
      expect(added.data.map((item) => item.id)).toEqual([`fc_${id}_2`, `fco_${id}_3`]);
      expect(added.data[1]).toMatchObject({ type: 'function_call_output', call_id: 'call_1', output: '18C, clear' });

      const response = await world.client.responses.create({ model: 'echo', conversation: id, input: 'And tomorrow?' });
      expect(response.output_text).toBe('echo: And tomorrow?');
      expect(response.conversation).toEqual({ id });
      // Its turn, input and output seqs, and the session's generation.
      expect(response.id).toMatch(new RegExp(`^resp_${id}_1_4_5_g[0-9a-f]{21}$`));

      const newest = await world.client.conversations.items.list(id);
      expect(newest.data.map((item) => item.id)).toEqual([
        `msg_${id}_5`,
        `msg_${id}_4`,
        `fco_${id}_3`,
        `fc_${id}_2`,
        `msg_${id}_1`,
      ]);
      expect(newest.data[0]).toMatchObject({
        type: 'message',
        role: 'assistant',
        content: [{ type: 'output_text', text: 'echo: And tomorrow?' }],
      });
      expect(newest.data[4]).toMatchObject({
        type: 'message',
        role: 'user',
        content: [{ type: 'input_text', text: 'Hello there' }],
      });

      const ascending = await world.client.conversations.items.list(id, { order: 'asc', limit: 2 });
      expect(ascending.data.map((item) => item.id)).toEqual([`msg_${id}_1`, `fc_${id}_2`]);
      expect(ascending.has_more).toBe(true);
      const next = await world.client.conversations.items.list(id, { order: 'asc', limit: 2, after: `fc_${id}_2` });
      expect(next.data.map((item) => item.id)).toEqual([`fco_${id}_3`, `msg_${id}_4`]);
      // The client's auto-pagination follows last_id with `after` to the end.
      const all: string[] = [];
      for await (const item of world.client.conversations.items.list(id, { order: 'desc', limit: 2 }))
        all.push(item.id!);
      expect(all).toEqual(newest.data.map((item) => item.id));

      const one = await world.client.conversations.items.retrieve(`fco_${id}_3`, { conversation_id: id });
      expect(one).toMatchObject({ type: 'function_call_output', id: `fco_${id}_3`, output: '18C, clear' });
      await expect(
        world.client.conversations.items.retrieve(`msg_${id}_3`, { conversation_id: id }),
      ).rejects.toBeInstanceOf(OpenAI.NotFoundError);
      await expect(
        world.client.conversations.items.retrieve(`msg_${id}_99`, { conversation_id: id }),
      ).rejects.toBeInstanceOf(OpenAI.NotFoundError);
      const foreignAfter = await world.client.conversations.items
        .list(id, { after: 'msg_other_1' })
        .catch((error: unknown) => error);
      expect(foreignAfter).toBeInstanceOf(OpenAI.BadRequestError);
      expect(foreignAfter).toMatchObject({ param: 'after' });
    },
  );

  it('retrieves, updates metadata and deletes a conversation', async () => {
    const conversation = await world.client.conversations.create();
    expect(conversation.metadata).toEqual({});
    const updated = await world.client.conversations.update(conversation.id, { metadata: { owner: 'ci' } });
    expect(updated).toMatchObject({ id: conversation.id, metadata: { owner: 'ci' } });
    expect((await world.client.conversations.retrieve(conversation.id)).metadata).toEqual({ owner: 'ci' });
    // The client's type lets the update's metadata be null: it clears them.
    expect((await world.client.conversations.update(conversation.id, { metadata: null })).metadata).toEqual({});
    expect((await world.client.conversations.retrieve(conversation.id)).metadata).toEqual({});
    expect(await world.client.conversations.delete(conversation.id)).toEqual({
      id: conversation.id,
      object: 'conversation.deleted',
      deleted: true,
    });
    const gone = await world.client.conversations.retrieve(conversation.id).catch((error: unknown) => error);
    expect(gone).toBeInstanceOf(OpenAI.NotFoundError);
    expect(gone).toMatchObject({ type: 'invalid_request_error', param: 'conversation_id' });
    await expect(world.client.conversations.items.list(conversation.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });

  it('replays a retried create with the same Idempotency-Key instead of making a second conversation', async () => {
    const create = async () => {
      const response = await fetch(`${world.tailgate.baseURL}/conversations`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${TOKEN}`,
          'content-type': 'application/json',
          'idempotency-key': 'conversation-retry-1',
        },
        body: JSON.stringify({ items: [{ type: 'message', role: 'user', content: 'once' }] }),
      });
      expect(response.status).toBe(200);
      return (await response.json()) as { id: string };
    };
    const first = await create();
    const again = await create();
    expect(again.id).toBe(first.id);
    expect((await tailgateGet(`/sessions/${first.id}`)).counts.items).toBe(1);
  });

  it('refuses system messages among appended items, unknown fields and include values, naming them', async () => {
    const { id } = await world.client.conversations.create();
    const system = await world.client.conversations.items
      .create(id, { items: [{ type: 'message', role: 'system', content: 'x' }] })
      .catch((error: unknown) => error);
    expect(system).toBeInstanceOf(OpenAI.BadRequestError);
    expect(system).toMatchObject({ param: 'items[0].role' });
    expect((system as Error).message).toMatch(/^400 items\[0\]\.role: /);
    // A system message after another item is named in `items`, the field the request sent.
    const late = [
      { type: 'message' as const, role: 'user' as const, content: 'hi' },
      { type: 'message' as const, role: 'system' as const, content: 'x' },
    ];
    for (const refused of [
      world.client.conversations.create({ items: late }),
      world.client.conversations.items.create(id, { items: late }),
    ]) {
      const error = await refused.catch((caught: unknown) => caught);
      expect(error).toMatchObject({ status: 400, param: 'items[1].role' });
      expect((error as Error).message).toMatch(/^400 items\[1\]\.role: /);
    }
    const include = await world.client.conversations.items
      .list(id, { include: ['message.input_image.image_url'] })
      .catch((error: unknown) => error);
    expect(include).toMatchObject({ status: 400, param: 'include[]' });
    const unknown = await world.client.conversations
      .create({ items: [], extra: 1 } as never)
      .catch((error: unknown) => error);
    expect(unknown).toMatchObject({ status: 400, param: 'extra' });
  });

  it('names an output answering no open call by its place in `items`, a leading system message counted', async () => {
    const { id } = await world.client.conversations.create();
    const orphan = { type: 'function_call_output' as const, call_id: 'call_none', output: 'o' };
    const user = { type: 'message' as const, role: 'user' as const, content: 'hi' };
    const system = { type: 'message' as const, role: 'system' as const, content: 'Be brief.' };
    for (const [refused, param] of [
      [world.client.conversations.create({ items: [orphan] }), 'items[0].call_id'],
      [world.client.conversations.create({ items: [system, user, orphan] }), 'items[2].call_id'],
      [world.client.conversations.items.create(id, { items: [user, orphan] }), 'items[1].call_id'],
    ] as const) {
      const error = await refused.catch((caught: unknown) => caught);
      expect(error).toMatchObject({ status: 400, param });
      expect((error as Error).message).toContain(` ${param}: no open function_call`);
    }
  });

  it("answers an unknown path under the OpenAI-compatible API in OpenAI's error shape", async () => {
    for (const path of ['/conversations/x/items/y/z', '/responses/a/b/c', '/chat/nothing']) {
      const response = await fetch(`${world.tailgate.baseURL}${path}`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(response.status).toBe(404);
      expect(await response.json()).toEqual({
        error: {
          message: expect.stringContaining(path),
          type: 'invalid_request_error',
          param: null,
          code: 'not_found',
        },
      });
    }
    const unauthenticated = await fetch(`${world.tailgate.baseURL}/chat/nothing`);
    expect(unauthenticated.status).toBe(401);
    expect(((await unauthenticated.json()) as { error: unknown }).error).toMatchObject({
      type: 'authentication_error',
      code: 'unauthorized',
    });
  });

  it('takes reasoning items appended alone and leaves them out: nothing is appended', async () => {
    const conversation = await world.client.conversations.create({
      items: [{ type: 'message', role: 'user', content: 'Hello there' }],
    });
    const added = await world.client.conversations.items.create(conversation.id, {
      items: [
        {
          type: 'reasoning',
          id: 'rs_1',
          summary: [{ type: 'summary_text', text: 'Thinking.' }],
          encrypted_content: 'x',
        },
      ],
    });
    expect(added).toMatchObject({ object: 'list', data: [], has_more: false });
    const session = await tailgateGet(`/sessions/${conversation.id}`);
    expect(session.counts).toMatchObject({ items: 1 });
    // An unknown conversation is still a 404.
    await expect(
      world.client.conversations.items.create('conv_unknown', {
        items: [{ type: 'reasoning', id: 'rs_1', summary: [] }],
      }),
    ).rejects.toMatchObject({ status: 404 });
  });
});

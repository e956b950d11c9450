import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { clientOnTailgate, tailgateGet, TOKEN } from './server.ts';

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

  it("a deleted response's id names nothing once a new response took its place", async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'first question' });
    const second = await world.client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: 'second question',
    });
    await world.client.responses.delete(second.id);
    const third = await world.client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: 'third question',
    });
    expect(third.id).not.toBe(second.id);
    // A late retry of the delete, and a read of the old id, find nothing: the new response stays.
    expect(await failure(world.client.responses.delete(second.id))).toBeInstanceOf(OpenAI.NotFoundError);
    expect(await failure(world.client.responses.retrieve(second.id))).toBeInstanceOf(OpenAI.NotFoundError);
    const after = await failure(
      world.client.responses.create({ model: 'echo', previous_response_id: second.id, input: 'late' }),
    );
    expect(after).toMatchObject({ status: 400, code: 'previous_response_not_found' });
    expect(await world.client.responses.retrieve(third.id)).toMatchObject({
      id: third.id,
      status: 'completed',
      output_text: 'echo: third question',
    });
    expect(await texts(first.conversation!.id)).toEqual([
      'first question',
      'echo: first question',
      'third question',
      'echo: third question',
    ]);
    const fourth = await world.client.responses.create({
      model: 'echo',
      previous_response_id: third.id,
      input: 'fourth question',
    });
    expect(fourth.conversation!.id).toBe(first.conversation!.id);
    await world.client.responses.delete(fourth.id);
    await world.client.responses.delete(third.id);
    expect(await texts(first.conversation!.id)).toEqual(['first question', 'echo: first question']);
  });

  it("a response whose turn tailgate's own DELETE /v1/sessions/{id}/turns/{n} took out is gone with it", async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'first', temperature: 0.5 });
    const conversation = first.conversation!.id;
    const deleteTurn = () =>
      fetch(`${world.tailgate.baseURL}/sessions/${conversation}/turns/1`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${TOKEN}` },
      });
    expect((await deleteTurn()).status).toBe(200);
    expect(await failure(world.client.responses.retrieve(first.id))).toBeInstanceOf(OpenAI.NotFoundError);
    const next = await world.client.responses.create({
      model: 'echo',
      conversation,
      input: 'again',
      temperature: 0.25,
    });
    expect(next.id).not.toBe(first.id);
    expect(await world.client.responses.retrieve(next.id)).toMatchObject({ id: next.id, temperature: 0.25 });
    // A response object written after the delete removed it (the turn's create answering as the
    // delete ran): the old id still names nothing, and the turn taking the number keeps its own.
    const { store } = world.tailgate;
    const key = (await store.list(`sessions/${conversation}/openai/`)).objects[0]!.key;
    const kept = (await store.get(key))!.body;
    expect((await deleteTurn()).status).toBe(200);
    await store.put(key, kept);
    expect(await failure(world.client.responses.retrieve(next.id))).toBeInstanceOf(OpenAI.NotFoundError);
    const last = await world.client.responses.create({ model: 'echo', conversation, input: 'last', temperature: 0.75 });
    expect(await world.client.responses.retrieve(last.id)).toMatchObject({ id: last.id, temperature: 0.75 });
  });

  it('a kept response object that is not one (edited, cut short) is rebuilt from the session', async () => {
    const created = await world.client.responses.create({ model: 'echo', input: 'kept', temperature: 0.5 });
    const { store } = world.tailgate;
    const key = (await store.list(`sessions/${created.conversation!.id}/openai/`)).objects[0]!.key;
    for (const body of [JSON.stringify({ id: created.id }), '{"id":', '']) {
      await store.put(key, body);
      expect(await world.client.responses.retrieve(created.id)).toMatchObject({
        id: created.id,
        status: 'completed',
        output_text: 'echo: kept',
      });
    }
  });

  it("a deleted session's response ids name nothing in the session created again under its id", async () => {
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const base = world.tailgate.baseURL;
    const id = `agent-${crypto.randomUUID()}`;
    const create = () => fetch(`${base}/sessions`, { method: 'POST', headers, body: JSON.stringify({ id }) });
    expect((await create()).status).toBe(201);
    const old = await world.client.responses.create({ model: 'echo', conversation: id, input: 'old one' });
    expect((await fetch(`${base}/sessions/${id}`, { method: 'DELETE', headers })).status).toBe(204);
    expect((await create()).status).toBe(201);
    const again = await world.client.responses.create({ model: 'echo', conversation: id, input: 'new one' });
    // The same turn number and seqs, in another incarnation.
    expect(again.id).not.toBe(old.id);
    expect(await failure(world.client.responses.retrieve(old.id))).toBeInstanceOf(OpenAI.NotFoundError);
    const continued = await failure(
      world.client.responses.create({ model: 'echo', previous_response_id: old.id, input: 'continue old' }),
    );
    expect(continued).toMatchObject({ status: 400, code: 'previous_response_not_found' });
    expect(await failure(world.client.responses.delete(old.id))).toBeInstanceOf(OpenAI.NotFoundError);
    expect(await texts(id)).toEqual(['new one', 'echo: new one']);
  });

  it("a deleted first response's id names nothing once the conversation starts again", async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'only question' });
    const conversation = first.conversation!.id;
    await world.client.responses.delete(first.id);
    const next = await world.client.responses.create({ model: 'echo', conversation, input: 'a new start' });
    expect(next.id).not.toBe(first.id);
    expect(await failure(world.client.responses.retrieve(first.id))).toBeInstanceOf(OpenAI.NotFoundError);
    expect(await failure(world.client.responses.delete(first.id))).toBeInstanceOf(OpenAI.NotFoundError);
    expect(await world.client.responses.retrieve(next.id)).toMatchObject({ id: next.id, status: 'completed' });
  });

  it('a resent history that holds a deleted response is not continued once another took its place', async () => {
    const tools = [{ type: 'function' as const, name: 'get_weather', strict: false, parameters: { type: 'object' } }];
    const ask = (city: string) => ({ role: 'user' as const, content: `call get_weather {"city":"${city}"}` });
    const call = (response: OpenAI.Responses.Response) => {
      const { call_id, name, arguments: args } = response.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
      return { type: 'function_call' as const, call_id, name, arguments: args };
    };
    const answer = (response: OpenAI.Responses.Response, output: string) => ({
      type: 'function_call_output' as const,
      call_id: call(response).call_id,
      output,
    });
    const first = await world.client.responses.create({ model: 'echo', input: [ask('Oslo')], tools });
    const conversation = first.conversation!.id;
    const history = [ask('Oslo'), call(first), answer(first, '-2C'), ask('Rome')];
    const second = await world.client.responses.create({ model: 'echo', input: history, tools });
    expect(second.conversation!.id).toBe(conversation);
    await world.client.responses.delete(second.id);
    const third = await world.client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: [answer(first, '-2C'), ask('Lima')],
      tools,
    });
    expect(third.conversation!.id).toBe(conversation);
    // The history of the deleted response is not this conversation's any more: a new one starts.
    const stale = await world.client.responses.create({
      model: 'echo',
      input: [...history, call(second), answer(second, '20C')],
      tools,
    });
    expect(stale.conversation!.id).not.toBe(conversation);
    expect((await texts(conversation)).join(' ')).not.toMatch(/20C|Rome/);
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

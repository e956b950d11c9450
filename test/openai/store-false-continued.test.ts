import OpenAI from 'openai';
import type { Response as OpenAIResponse } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';
import { clientOnTailgate, tailgatePost } from './server.ts';

// `store: false` off a stored response or conversation (the official client against the real app,
// echo model): the model runs on that conversation's history and the new input, nothing is stored.
const world = clientOnTailgate();

/** Every object the store holds, with its size and when it was written: any write changes it. */
async function stored() {
  await world.tailgate.settled();
  const listed = await world.tailgate.store.list('', { limit: 1000 });
  return listed.objects.map(({ key, size, uploaded }) => ({ key, size, uploaded }));
}

/** A token minted with `body` (scopes, session_id, budget), and a client on it. */
async function minted(body: Record<string, unknown>) {
  const answer = await tailgatePost(world.tailgate.baseURL, '/tokens', body);
  expect(answer.status).toBe(201);
  const { token } = (await answer.json()) as { token: string };
  return { token, client: new OpenAI({ apiKey: token, baseURL: world.tailgate.baseURL, maxRetries: 0 }) };
}

/** A conversation's items, oldest first. */
async function itemsOf(conversationId: string) {
  const page = await world.client.conversations.items.list(conversationId, { order: 'asc', limit: 100 });
  return page.data;
}

/** The prompt's size the response reports: its items and characters. */
const promptOf = (response: OpenAIResponse) => {
  const { context } = (response as unknown as { tailgate: { context: Record<string, unknown> } }).tailgate;
  return { items: context.items_in_prompt, chars: context.prompt_chars, input_tokens: response.usage?.input_tokens };
};

/** A stored conversation of two turns, its first under instructions. */
async function conversation() {
  const first = await world.client.responses.create({ model: 'echo', input: 'one', instructions: 'Be brief.' });
  const second = await world.client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'two' });
  return { first, second, conversationId: second.conversation!.id };
}

describe('store: false under previous_response_id or conversation', () => {
  it('runs on the stored history and the input, and stores nothing the next turn sees', async () => {
    const { second, conversationId } = await conversation();
    const before = await itemsOf(conversationId);
    const objects = await stored();
    const side = await world.client.responses.create({
      model: 'echo',
      store: false,
      previous_response_id: second.id,
      input: 'side question',
    });
    expect(side).toMatchObject({
      store: false,
      status: 'completed',
      previous_response_id: second.id,
      output_text: 'echo: side question',
    });
    expect(side.id).toMatch(/^resp_[0-9a-f]{24}$/);
    expect(await itemsOf(conversationId)).toEqual(before);
    expect(await stored()).toEqual(objects);
    const missing = await world.client.responses.retrieve(side.id).catch((error: unknown) => error);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    const chained = await world.client.responses
      .create({ model: 'echo', previous_response_id: side.id, input: 'on' })
      .catch((error: unknown) => error);
    // As OpenAI answers a previous_response_id it does not hold.
    expect(chained).toMatchObject({ status: 400, param: 'previous_response_id' });

    // The stored turn with the same body gets the prompt the side question got: the history, the
    // instructions, the input, and nothing of the side question.
    const next = await world.client.responses.create({
      model: 'echo',
      previous_response_id: second.id,
      input: 'side question',
    });
    expect(promptOf(side)).toEqual(promptOf(next));
    expect(promptOf(side).items).toBe(before.length + 2);
    expect(await itemsOf(conversationId)).toHaveLength(before.length + 2);
  });

  it('streams, storing nothing', async () => {
    const { second, conversationId } = await conversation();
    const before = await itemsOf(conversationId);
    const objects = await stored();
    const stream = await world.client.responses.create({
      model: 'echo',
      store: false,
      previous_response_id: second.id,
      input: 'streamed side',
      stream: true,
    });
    const types: string[] = [];
    let completed: OpenAIResponse | undefined;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.completed') completed = event.response;
    }
    expect(types[0]).toBe('response.created');
    expect(types).toContain('response.output_text.delta');
    expect(completed).toMatchObject({ store: false, output_text: 'echo: streamed side' });
    expect(await itemsOf(conversationId)).toEqual(before);
    expect(await stored()).toEqual(objects);
    const next = await world.client.responses.create({
      model: 'echo',
      previous_response_id: second.id,
      input: 'streamed side',
    });
    expect(promptOf(completed!)).toEqual(promptOf(next));
  });

  it('under an older response, runs on the history up to it, making no branch', async () => {
    const { first, second, conversationId } = await conversation();
    const before = await itemsOf(conversationId);
    const objects = await stored();
    const side = await world.client.responses.create({
      model: 'echo',
      store: false,
      previous_response_id: first.id,
      input: 'from the first',
    });
    expect(side.output_text).toBe('echo: from the first');
    expect(await stored()).toEqual(objects);
    expect(await itemsOf(conversationId)).toEqual(before);
    // The branch a stored create makes there sends the same prompt.
    const branch = await world.client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: 'from the first',
    });
    expect(branch.conversation!.id).not.toBe(conversationId);
    expect(promptOf(side)).toEqual(promptOf(branch));
    expect(promptOf(side).items).toBe(4);
    expect(second.id).not.toBe(first.id);
  });

  it('under conversation, runs on its history, storing nothing', async () => {
    const { conversationId } = await conversation();
    const before = await itemsOf(conversationId);
    const objects = await stored();
    const side = await world.client.responses.create({
      model: 'echo',
      store: false,
      conversation: conversationId,
      input: 'aside',
    });
    expect(side).toMatchObject({ store: false, conversation: { id: conversationId }, output_text: 'echo: aside' });
    expect(await itemsOf(conversationId)).toEqual(before);
    expect(await stored()).toEqual(objects);
    const next = await world.client.responses.create({ model: 'echo', conversation: conversationId, input: 'aside' });
    expect(promptOf(side)).toEqual(promptOf(next));
  });

  it("echoes the conversation's instructions and tools it ran with, as the stored create", async () => {
    const tools = [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: {} } }];
    const created = await tailgatePost(world.tailgate.baseURL, '/sessions', {
      model: 'echo',
      instructions: 'Be brief.',
      tools,
    });
    const { id } = (await created.json()) as { id: string };
    const first = await world.client.responses.create({ model: 'echo', conversation: id, input: 'one' });
    const asked = { model: 'echo', input: 'call get_weather {}' };
    for (const onto of [{ conversation: id }, { previous_response_id: first.id }]) {
      const side = await world.client.responses.create({ ...asked, ...onto, store: false });
      const next = await world.client.responses.create({ ...asked, ...onto });
      expect(side.output.map((item) => item.type)).toEqual(['function_call']);
      expect({ instructions: side.instructions, tools: side.tools }).toEqual({
        instructions: next.instructions,
        tools: next.tools,
      });
      expect(side.instructions).toBe('Be brief.');
      expect(side.tools.map((tool) => (tool as { name: string }).name)).toEqual(['get_weather']);
      await world.client.responses.delete(next.id);
    }
  });

  it('refuses an item sent with the id of one its conversation holds, as the stored create', async () => {
    const { first, second, conversationId } = await conversation();
    const objects = await stored();
    const sentBack = (response: OpenAIResponse) => [
      { ...(response.output[0] as { id: string }), type: 'message' as const },
      { role: 'user' as const, content: 'again' },
    ];
    const stray = { type: 'function_call_output' as const, call_id: 'call_none', output: 'x' };
    const onto = [
      { conversation: conversationId, input: sentBack(second) },
      { previous_response_id: second.id, input: sentBack(second) },
      // At an older response (a branch point): its output is the branch's history.
      { previous_response_id: first.id, input: sentBack(first) },
      // With an output answering no open call too: the id is refused first, as the stored create refuses it.
      { conversation: conversationId, input: [...sentBack(second), stray] },
      { previous_response_id: first.id, input: [...sentBack(first), stray] },
    ];
    for (const body of onto) {
      const asked = { model: 'echo', ...body } as OpenAI.Responses.ResponseCreateParamsNonStreaming;
      const refused = await world.client.responses.create({ ...asked, store: false }).catch((error: unknown) => error);
      const storedRefusal = await world.client.responses.create(asked).catch((error: unknown) => error);
      const answer = (error: unknown) => {
        const { status, code, param } = error as InstanceType<typeof OpenAI.APIError>;
        return { status, code, param };
      };
      expect(answer(storedRefusal)).toEqual({ status: 400, code: 'invalid_request', param: 'input[0].id' });
      expect(answer(refused)).toEqual(answer(storedRefusal));
    }
    expect(await stored()).toEqual(objects);
  });

  it("runs whatever the conversation's budget, which refuses the stored create", async () => {
    const created = await tailgatePost(world.tailgate.baseURL, '/sessions', {
      id: 'spent-side',
      budget: { max_turns: 1 },
    });
    expect(created.status).toBe(201);
    const first = await world.client.responses.create({ model: 'echo', conversation: 'spent-side', input: 'one' });
    for (const on of [{ conversation: 'spent-side' }, { previous_response_id: first.id }]) {
      const body = { model: 'echo', input: 'side question', ...on };
      const refused = await world.client.responses.create(body).catch((error: unknown) => error);
      expect(refused).toMatchObject({ status: 402, code: 'budget_exhausted' });
      const side = await world.client.responses.create({ ...body, store: false });
      expect(side).toMatchObject({ status: 'completed', output_text: 'echo: side question' });
    }
  });

  it("charges a budgeted token as a store: false response, and refuses a session's bound token", async () => {
    const { second, conversationId } = await conversation();
    const budgeted = await minted({ scopes: ['session:turn'], budget: { max_total_tokens: 100_000 } });
    const side = await budgeted.client.responses.create({
      model: 'echo',
      store: false,
      previous_response_id: second.id,
      input: 'charged',
    });
    const current = await fetch(`${world.tailgate.baseURL}/tokens/current`, {
      headers: { authorization: `Bearer ${budgeted.token}` },
    });
    const { usage } = (await current.json()) as { usage: { total_tokens: number } };
    expect(usage.total_tokens).toBe(side.usage!.total_tokens);

    // A bound token's turns count in its session's budget: it runs nothing unstored there.
    const objects = await stored();
    const bound = await minted({ scopes: ['session:turn'], session_id: conversationId });
    const refused = await bound.client.responses
      .create({ model: 'echo', store: false, previous_response_id: second.id, input: 'free?' })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect(await stored()).toEqual(objects);
  });

  it('refuses with 409 compaction_due where the next turn would compact first, storing nothing', async () => {
    const created = await tailgatePost(world.tailgate.baseURL, '/sessions', {
      model: 'echo',
      strategies: ['compact'],
      strategy_config: { context_limit: 1000 },
    });
    const { id } = (await created.json()) as { id: string };
    const long = (index: number) => ({ role: 'user' as const, content: `${index} ${'x'.repeat(400)}` });
    await world.client.conversations.items.create(id, { items: Array.from({ length: 12 }, (_, index) => long(index)) });
    const before = await itemsOf(id);
    const objects = await stored();
    const refused = await world.client.responses
      .create({ model: 'echo', store: false, conversation: id, input: 'aside' })
      .catch((error: unknown) => error);
    expect(refused).toMatchObject({ status: 409, code: 'compaction_due', param: 'store' });
    // Sent again, it is refused again: the client is told not to retry it.
    expect((refused as InstanceType<typeof OpenAI.APIError>).headers?.get('x-should-retry')).toBe('false');
    expect(await itemsOf(id)).toEqual(before);
    expect(await stored()).toEqual(objects);
    // The stored turn compacts there (its output ends with the compaction item).
    const next = await world.client.responses.create({ model: 'echo', conversation: id, input: 'aside' });
    expect(next.output.some((item) => item.type === 'compaction')).toBe(true);
  });

  it("sends the input's images and the stored ones, storing none", async () => {
    const stored1 = dataUrl('image/png', pngBytes(64, 32, 500, 1));
    const first = await world.client.responses.create({
      model: 'echo',
      input: [{ role: 'user', content: [{ type: 'input_image', image_url: stored1, detail: 'auto' }] }],
    });
    const objects = await stored();
    const side = await world.client.responses.create({
      model: 'echo',
      store: false,
      previous_response_id: first.id,
      input: [
        {
          role: 'user',
          content: [
            { type: 'input_text', text: 'and this?' },
            { type: 'input_image', image_url: dataUrl('image/png', pngBytes(16, 8, 300, 2)), detail: 'auto' },
          ],
        },
      ],
    });
    expect(side.output_text).toBe('echo: and this? [image/png 64x32, 1 KB] [image/png 16x8, 1 KB]');
    expect(await stored()).toEqual(objects);
  });
});

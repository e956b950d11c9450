import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { CountingStore } from '../support/counting-store.ts';
import { clientInProcess, clientOnTailgate, TOKEN } from './server.ts';

/**
 * `responses.inputTokens.count` of a stored conversation's next turn (previous_response_id,
 * conversation), of item references, and of a model whose provider has no key configured.
 */
const world = clientOnTailgate();
const refused = (promise: Promise<unknown>) => promise.catch((error: unknown) => error);
const count = async (body: OpenAI.Responses.InputTokenCountParams) =>
  (await world.client.responses.inputTokens.count(body)).input_tokens;

describe('responses.inputTokens.count of a stored conversation', () => {
  it("counts previous_response_id's history with the input, as the whole history sent counts", async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'hello world, how are you?' });
    const history = [
      { role: 'user' as const, content: 'hello world, how are you?' },
      { role: 'assistant' as const, content: first.output_text },
      { role: 'user' as const, content: 'and again' },
    ];
    const whole = await count({ model: 'echo', input: history });
    const alone = await count({ model: 'echo', input: 'and again' });
    expect(whole).toBeGreaterThan(alone);
    expect(await count({ model: 'echo', previous_response_id: first.id, input: 'and again' })).toBe(whole);
    // Without input: the history alone.
    expect(await count({ model: 'echo', previous_response_id: first.id })).toBe(
      await count({ model: 'echo', input: history.slice(0, 2) }),
    );
  });

  it("counts a conversation's items with the input", async () => {
    const conversation = await world.client.conversations.create({});
    await world.client.responses.create({ model: 'echo', conversation: conversation.id, input: 'first words here' });
    const counted = await count({ model: 'echo', conversation: conversation.id, input: 'second' });
    expect(counted).toBe(
      await count({
        model: 'echo',
        input: [
          { role: 'user', content: 'first words here' },
          { role: 'assistant', content: 'echo: first words here' },
          { role: 'user', content: 'second' },
        ],
      }),
    );
    const missing = await refused(count({ model: 'echo', conversation: 'conv_000000000000000000000000', input: 'x' }));
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect(missing).toMatchObject({ param: 'conversation' });
  });

  it('counts the items a step under conversation resent once, as a create stores them once', async () => {
    const conversation = await world.client.conversations.create({});
    const sent = [
      { role: 'user' as const, content: 'the first message of a loop' },
      { role: 'user' as const, content: 'and its second one' },
    ];
    await world.client.responses.create({ model: 'echo', conversation: conversation.id, input: sent });
    const next = { role: 'user' as const, content: 'the next step' };
    const resent = await count({ model: 'echo', conversation: conversation.id, input: [...sent, next] });
    expect(resent).toBe(await count({ model: 'echo', conversation: conversation.id, input: [next] }));
  });

  it('refuses previous_response_id and conversation both, as a create does', async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'one' });
    const both = await refused(
      count({ model: 'echo', previous_response_id: first.id, conversation: first.conversation!.id, input: 'x' }),
    );
    expect(both).toMatchObject({ status: 400, param: 'previous_response_id' });
  });

  it("refuses a tool_choice naming none of the conversation's tools, as a create does", async () => {
    const conversation = await world.client.conversations.create({});
    await world.client.responses.create({ model: 'echo', conversation: conversation.id, input: 'one' });
    const body = { model: 'echo', conversation: conversation.id, input: 'two' };
    const choice = { type: 'function' as const, name: 'missing' };
    const created = await refused(world.client.responses.create({ ...body, tool_choice: choice }));
    const counted = await refused(count({ ...body, tool_choice: choice }));
    expect(created).toMatchObject({ status: 400 });
    expect(counted).toMatchObject({ status: 400, message: (created as Error).message });
  });

  it('accepts a tool_choice naming a tool of the conversation an input resends whole, as a create does', async () => {
    const tool = { type: 'function' as const, name: 'get_weather', parameters: { type: 'object' }, strict: false };
    const ask = 'call get_weather {"city":"Suva"}';
    const first = await world.client.responses.create({ model: 'echo', input: ask, tools: [tool] });
    // The conversation's own tools, which a turn sent without tools offers.
    const patched = await fetch(`${world.tailgate.baseURL}/sessions/${first.conversation!.id}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ tools: [tool] }),
    });
    expect(patched.status).toBe(200);
    const call = first.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
    const body = {
      model: 'echo',
      input: [
        { role: 'user' as const, content: ask },
        call,
        { type: 'function_call_output' as const, call_id: call.call_id, output: '10C' },
      ],
      tool_choice: { type: 'function' as const, name: 'get_weather' },
    };
    const counted = await refused(count(body));
    const created = await world.client.responses.create(body);
    expect(created.conversation?.id).toBe(first.conversation!.id);
    expect(typeof counted, String(counted)).toBe('number');
  });

  it('counts the branch an older previous response makes, and refuses one that does not exist', async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'one' });
    await world.client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'two' });
    // The history up to that response, then the input: as the whole history sent counts.
    const history = [
      { role: 'user' as const, content: 'one' },
      { role: 'assistant' as const, content: first.output_text },
      { role: 'user' as const, content: 'three' },
    ];
    const older = await count({ model: 'echo', previous_response_id: first.id, input: 'three' });
    expect(older).toBe(await count({ model: 'echo', input: history }));
    const branched = await world.client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: 'three',
    });
    expect(branched.conversation!.id).not.toBe(first.conversation!.id);
    const unknown = await refused(count({ model: 'echo', previous_response_id: 'resp_nothing', input: 'x' }));
    expect(unknown).toMatchObject({ status: 400, code: 'previous_response_not_found' });
  });
});

describe('responses.inputTokens.count of the fields OpenAI takes beside the prompt', () => {
  it('takes a personality, which changes no prompt tailgate builds, and refuses a field OpenAI lacks', async () => {
    const body = { model: 'echo', input: 'how are you today?' };
    expect(await count({ ...body, personality: 'friendly' })).toBe(await count(body));
    expect(await count({ ...body, personality: 'a style of its own' })).toBe(await count(body));
    const unknown = await refused(count({ ...body, metadata: { a: 'b' } } as OpenAI.Responses.InputTokenCountParams));
    expect(unknown).toBeInstanceOf(OpenAI.BadRequestError);
  });
});

describe('responses.inputTokens.count of item references', () => {
  it('counts a referenced item as the item itself, and names an unknown reference', async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'say something long enough' });
    const referenced = await count({
      model: 'echo',
      input: [
        { role: 'user', content: 'say something long enough' },
        { type: 'item_reference', id: first.output[0]!.id! },
        { role: 'user', content: 'more' },
      ],
    });
    expect(referenced).toBe(
      await count({
        model: 'echo',
        input: [
          { role: 'user', content: 'say something long enough' },
          { role: 'assistant', content: first.output_text },
          { role: 'user', content: 'more' },
        ],
      }),
    );
    const unknown = first.output[0]!.id!.replace(/_\d+$/, '_99');
    const missing = await refused(
      count({
        model: 'echo',
        input: [
          { role: 'user', content: 'hi' },
          { type: 'item_reference', id: unknown },
        ],
      }),
    );
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect(missing).toMatchObject({ param: 'input[1].id' });
  });
});

describe('responses.inputTokens.count of a model whose provider has no key', () => {
  it('counts, where a create of that model is 503 not_configured', async () => {
    const model = 'anthropic:claude-sonnet-4-5';
    expect(await count({ model, input: 'hello world!' })).toBeGreaterThan(0);
    const created = await refused(world.client.responses.create({ model, input: 'hello world!' }));
    expect(created).toMatchObject({ status: 503 });
  });
});

it('a count of a stored conversation reads it and writes nothing', async () => {
  const store = new CountingStore(new MemoryStore());
  const app = createApp({
    store: () => store,
    readEnvironment: () => ({ API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' }),
    log: () => {},
    logLine: () => {},
  });
  const openai = clientInProcess(app, TOKEN);
  const first = await openai.responses.create({ model: 'echo', input: 'one' });
  const { id } = await openai.conversations.create({});
  await openai.responses.create({ model: 'echo', input: 'one', conversation: id });
  const counts = [];
  for (const body of [{ previous_response_id: first.id }, { conversation: id }]) {
    store.reset();
    await openai.responses.inputTokens.count({ model: 'echo', input: 'two', ...body });
    const { get, head, put, list, delete: deletes } = store.counts;
    counts.push({ get, head, put, list, delete: deletes });
  }
  // The conversation's record, its context and pending notices, its head with its newest turn as a
  // create reads it (the calls it leaves open, a dead turn); a response's generation besides.
  // The records listed are this process's, from the record cache (log/record-cache.ts), not got.
  expect(counts).toEqual([
    { get: 9, head: 0, put: 0, list: 5, delete: 0 },
    { get: 8, head: 0, put: 0, list: 5, delete: 0 },
  ]);
  // A response its conversation went on after: the branch a create would make is counted, not made.
  await openai.responses.create({ model: 'echo', previous_response_id: first.id, input: 'two' });
  store.reset();
  const branch = await openai.responses.inputTokens.count({
    model: 'echo',
    input: 'other',
    previous_response_id: first.id,
  });
  expect(branch.input_tokens).toBeGreaterThan(0);
  expect({ put: store.counts.put, delete: store.counts.delete }).toEqual({ put: 0, delete: 0 });
});

describe('responses.inputTokens.count of a conversation past the window', () => {
  // Prompts of at most 100 tokens (CONTEXT_LIMIT 120, RESPONSE_RESERVE 20).
  const small = clientOnTailgate({ CONTEXT_LIMIT: '120', RESPONSE_RESERVE: '20' });

  it('counts every item, before the prompt is fitted to the window, as a count of the items sent counts', async () => {
    const { id } = await small.client.conversations.create({});
    const words = (word: string) => Array.from({ length: 30 }, () => word).join(' ');
    for (const word of ['alpha', 'bravo', 'charlie'])
      await small.client.responses.create({ model: 'echo', conversation: id, input: words(word), truncation: 'auto' });
    const items = (await small.client.conversations.items.list(id, { order: 'asc' })).data;
    const input = items.map((item) => {
      const message = item as OpenAI.Conversations.Message;
      const text = message.content.map((part) => ('text' in part ? part.text : '')).join('');
      return { role: message.role as 'user' | 'assistant', content: text };
    });
    const sent = (
      await small.client.responses.inputTokens.count({
        model: 'echo',
        input: [...input, { role: 'user', content: 'x' }],
      })
    ).input_tokens;
    expect(sent).toBeGreaterThan(100);
    const counted = await small.client.responses.inputTokens.count({ model: 'echo', conversation: id, input: 'x' });
    expect(counted.input_tokens).toBe(sent);
  });

  it("refuses a tool_choice naming none of the conversation's tools there too, as a create does", async () => {
    const { id } = await small.client.conversations.create({});
    const words = Array.from({ length: 60 }, () => 'delta').join(' ');
    await small.client.responses.create({ model: 'echo', conversation: id, input: words, truncation: 'auto' });
    const body = {
      model: 'echo',
      conversation: id,
      input: 'x',
      tool_choice: { type: 'function' as const, name: 'missing' },
    };
    const created = await refused(small.client.responses.create(body));
    const counted = await refused(small.client.responses.inputTokens.count(body));
    expect(created).toMatchObject({ status: 400 });
    expect(counted).toMatchObject({ status: 400, message: (created as Error).message });
  });
});

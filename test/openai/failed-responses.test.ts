import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';
import { clientOnTailgate, sessionKeys, startTailgate, tailgateGet, TOKEN } from './server.ts';

// A response whose model call fails (502 model_error: "unreachable" points at a port nothing
// listens on), then the same request again once the model answers (here: echo).
let tailgate: Awaited<ReturnType<typeof startTailgate>>;
beforeAll(async () => {
  tailgate = await startTailgate({
    OPENAI_COMPATIBLE_BASE_URL: 'http://127.0.0.1:9/v1',
    MODEL_MAX_RETRIES: '0',
    MODEL_ALIASES: 'unreachable=openai-compatible:nothing',
  });
});
afterAll(() => tailgate.close());

const texts = (items: any[]) => items.map((item) => item.content?.[0]?.text ?? item.type);

describe('a failed response leaves nothing in its conversation', () => {
  it('conversation: a failed request (retried by the client as it does by default) stores no input', async () => {
    // The official client's defaults: 2 retries of a 5xx, no Idempotency-Key.
    const client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL });
    const conversation = await client.conversations.create({});
    await client.responses.create({ model: 'echo', conversation: conversation.id, input: 'hi' });
    const failed = await client.responses
      .create({ model: 'unreachable', conversation: conversation.id, input: 'next' })
      .catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(OpenAI.InternalServerError);
    await client.responses.create({ model: 'echo', conversation: conversation.id, input: 'next' });
    const items = await client.conversations.items.list(conversation.id, { order: 'asc' });
    expect(texts(items.data)).toEqual(['hi', 'echo: hi', 'next', 'echo: next']);
  });

  it('a resent whole history (a client tool loop) still continues its conversation after a failed step', async () => {
    const client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
    const first = await client.responses.create({ model: 'echo', input: 'hi' });
    const input = [
      { role: 'user' as const, content: 'hi' },
      ...(first.output as OpenAI.Responses.ResponseInputItem[]),
      { role: 'user' as const, content: 'next' },
    ];
    await client.responses.create({ model: 'unreachable', input }).catch(() => undefined);
    const retried = await client.responses.create({ model: 'echo', input });
    expect(retried.conversation!.id).toBe(first.conversation!.id);
  });

  it('a resent whole history after a failed streamed step continues its conversation after them', async () => {
    const client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
    const first = await client.responses.create({ model: 'echo', input: 'hi stream' });
    const input = [
      { role: 'user' as const, content: 'hi stream' },
      ...(first.output as OpenAI.Responses.ResponseInputItem[]),
      { role: 'user' as const, content: 'next' },
    ];
    for (let attempt = 0; attempt < 2; attempt++) {
      const failed = await client.responses.create({ model: 'unreachable', input, stream: true });
      const types: string[] = [];
      for await (const event of failed) types.push(event.type);
      expect(types.at(-1)).toBe('response.failed');
    }
    // A resend that does not hold the failed steps' input starts a new conversation.
    const edited = [...input.slice(0, -1), { role: 'user' as const, content: 'something else' }];
    const moved = await client.responses.create({ model: 'echo', input: edited });
    expect(moved.conversation!.id).not.toBe(first.conversation!.id);
    const retried = await client.responses.create({ model: 'echo', input });
    expect(retried.conversation!.id).toBe(first.conversation!.id);
    expect(retried.output_text).toBe('echo: next');
    // The failed turns stay (their ids were given out), each with its input.
    const items = await client.conversations.items.list(first.conversation!.id, { order: 'asc' });
    expect(texts(items.data)).toEqual(['hi stream', 'echo: hi stream', 'next', 'next', 'next', 'echo: next']);
  });

  it('a resent tool step after failed streamed attempts continues its conversation, outputs stored once', async () => {
    // The AI SDK's streamText with streamRetries sends a step whose stream failed again: the same
    // resent history, whose new items answer the calls the failed attempt stored as its input.
    const client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
    const tools = [{ type: 'function' as const, name: 'get_weather', strict: false, parameters: { type: 'object' } }];
    const first = await client.responses.create({ model: 'echo', input: 'call get_weather {"city":"Oslo"}', tools });
    const call = first.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
    const input = [
      { role: 'user' as const, content: 'call get_weather {"city":"Oslo"}' },
      ...(first.output as OpenAI.Responses.ResponseInputItem[]),
      { type: 'function_call_output' as const, call_id: call.call_id, output: '-3C' },
    ];
    for (let attempt = 0; attempt < 2; attempt++) {
      const failed = await client.responses.create({ model: 'unreachable', input, tools, stream: true });
      const types: string[] = [];
      for await (const event of failed) types.push(event.type);
      expect(types.at(-1)).toBe('response.failed');
    }
    // One not streamed fails too: taken out, as any failed response.
    await expect(client.responses.create({ model: 'unreachable', input, tools })).rejects.toThrow(/502/);
    const retried = await client.responses.create({ model: 'echo', input, tools });
    expect(retried.conversation!.id).toBe(first.conversation!.id);
    expect(retried.output_text).toBe('echo: call get_weather {"city":"Oslo"}');
    const items = await client.conversations.items.list(first.conversation!.id, { order: 'asc' });
    expect(items.data.map((item) => item.type)).toEqual([
      'message',
      'function_call',
      'function_call_output',
      'message',
    ]);
    // The response names what it was sent, each item once, and goes on as any other.
    expect((await client.responses.retrieve(retried.id)).status).toBe('completed');
    const listed = await client.responses.inputItems.list(retried.id, { order: 'asc' });
    expect(listed.data.map((item) => item.type)).toEqual(['message', 'function_call', 'function_call_output']);
    const next = await client.responses.create({ model: 'echo', previous_response_id: retried.id, input: 'thanks' });
    expect(next.conversation!.id).toBe(first.conversation!.id);
  });

  it('a resent whole history whose failed streamed step sent an image continues its conversation', async () => {
    const client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
    const first = await client.responses.create({ model: 'echo', input: 'hi image' });
    const look = [
      { type: 'input_text' as const, text: 'look' },
      { type: 'input_image' as const, image_url: dataUrl('image/png', pngBytes(8, 8)), detail: 'auto' as const },
    ];
    const input = [
      { role: 'user' as const, content: 'hi image' },
      ...(first.output as OpenAI.Responses.ResponseInputItem[]),
      { role: 'user' as const, content: look },
    ];
    const failed = await client.responses.create({ model: 'unreachable', input, stream: true });
    for await (const event of failed) expect(event.type).not.toBe('response.completed');
    // Its input is stored with the image as a blob reference: the resend still holds that step.
    const retried = await client.responses.create({ model: 'echo', input });
    expect(retried.conversation!.id).toBe(first.conversation!.id);
  });

  it('previous_response_id: a retry after a failed step continues the conversation, not a fork of it', async () => {
    const client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
    const first = await client.responses.create({ model: 'echo', input: 'hi' });
    const asked = { input: 'next', previous_response_id: first.id };
    await client.responses.create({ model: 'unreachable', ...asked }).catch(() => undefined);
    const retried = await client.responses.create({ model: 'echo', ...asked });
    expect(retried.conversation!.id).toBe(first.conversation!.id);
    const items = await client.conversations.items.list(first.conversation!.id, { order: 'asc' });
    expect(texts(items.data)).toEqual(['hi', 'echo: hi', 'next', 'echo: next']);
  });

  it('previous_response_id: a retry of failed streamed attempts answering calls continues it', async () => {
    const client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
    const tools = [{ type: 'function' as const, name: 'get_weather', strict: false, parameters: { type: 'object' } }];
    const first = await client.responses.create({ model: 'echo', input: 'call get_weather {"city":"Rome"}', tools });
    const call = first.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
    const answer = [{ type: 'function_call_output' as const, call_id: call.call_id, output: '21C' }];
    const failedStep = async () => {
      const asked = { previous_response_id: first.id, input: answer, tools, stream: true as const };
      const failed = await client.responses.create({ model: 'unreachable', ...asked });
      for await (const event of failed) expect(event.type).not.toBe('response.completed');
    };
    for (let attempt = 0; attempt < 2; attempt++) await failedStep();
    const second = await client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: answer,
      tools,
    });
    expect(second.conversation!.id).toBe(first.conversation!.id);
    const items = await client.conversations.items.list(first.conversation!.id, { order: 'asc' });
    expect(texts(items.data)).toEqual([
      'call get_weather {"city":"Rome"}',
      'function_call',
      'function_call_output',
      'echo: call get_weather {"city":"Rome"}',
    ]);
  });

  it('a fixed previous_response_id: a retried loop step whose streamed attempts failed stays in the loop', async () => {
    // The AI SDK's loop under providerOptions.openai.previousResponseId: every step names the
    // same response and resends every item since it (lib/openai/resent-after.ts).
    const client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
    const tools = [{ type: 'function' as const, name: 'get_weather', strict: false, parameters: { type: 'object' } }];
    const first = await client.responses.create({ model: 'echo', input: 'template' });
    const ask = { role: 'user' as const, content: 'call get_weather {"city":"Bern"}' };
    const step = (model: string, input: OpenAI.Responses.ResponseInputItem[], stream = false) =>
      client.responses.create({ model, previous_response_id: first.id, input, tools, stream });
    const called = (await step('echo', [ask])) as OpenAI.Responses.Response;
    const call = called.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
    const input = [
      ask,
      ...(called.output as OpenAI.Responses.ResponseInputItem[]),
      { type: 'function_call_output' as const, call_id: call.call_id, output: '9C' },
    ];
    for (let attempt = 0; attempt < 2; attempt++) {
      const failed = (await step('unreachable', input, true)) as AsyncIterable<{ type: string }>;
      for await (const event of failed) expect(event.type).not.toBe('response.completed');
    }
    const retried = (await step('echo', input)) as OpenAI.Responses.Response;
    expect(retried.conversation!.id).toBe(first.conversation!.id);
    const listed = await client.responses.inputItems.list(retried.id, { order: 'asc' });
    expect(listed.data.map((item) => item.type)).toEqual(['message', 'function_call', 'function_call_output']);
    // The loop's next step goes on after it, in the same conversation.
    const next = [...input, ...(retried.output as OpenAI.Responses.ResponseInputItem[])];
    const thanked = (await step('echo', [...next, { role: 'user', content: 'thanks' }])) as OpenAI.Responses.Response;
    expect(thanked.conversation!.id).toBe(first.conversation!.id);
    const items = await client.conversations.items.list(first.conversation!.id, { order: 'asc' });
    // Each item once: the call answered by the output the first failed attempt stored.
    expect(texts(items.data).slice(2, 5)).toEqual([ask.content, 'function_call', 'function_call_output']);
    expect(texts(items.data).slice(5)).toEqual(['echo: call get_weather {"city":"Bern"}', 'thanks', 'echo: thanks']);
  });

  it('a loop under an older response: a retried step whose streamed attempts failed stays in its branch', async () => {
    const client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
    const tools = [{ type: 'function' as const, name: 'get_weather', strict: false, parameters: { type: 'object' } }];
    const first = await client.responses.create({ model: 'echo', input: 'template' });
    await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'moved on' });
    const ask = { role: 'user' as const, content: 'call get_weather {"city":"Graz"}' };
    const step = (model: string, input: OpenAI.Responses.ResponseInputItem[], stream = false) =>
      client.responses.create({ model, previous_response_id: first.id, input, tools, stream });
    const called = (await step('echo', [ask])) as OpenAI.Responses.Response;
    const branch = called.conversation!.id;
    expect(branch).not.toBe(first.conversation!.id);
    const call = called.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
    const input = [
      ask,
      ...(called.output as OpenAI.Responses.ResponseInputItem[]),
      { type: 'function_call_output' as const, call_id: call.call_id, output: '7C' },
    ];
    const failed = (await step('unreachable', input, true)) as AsyncIterable<{ type: string }>;
    for await (const event of failed) expect(event.type).not.toBe('response.completed');
    const retried = (await step('echo', input)) as OpenAI.Responses.Response;
    expect(retried.conversation!.id).toBe(branch);
    const items = await client.conversations.items.list(branch, { order: 'asc' });
    expect(items.data.filter((item) => item.type === 'function_call_output')).toHaveLength(1);
    expect(texts(items.data).at(-1)).toBe('echo: call get_weather {"city":"Graz"}');
  });

  it('a background resend of a failed streamed tool step answers no response id it cannot read', async () => {
    const client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
    const tools = [{ type: 'function' as const, name: 'get_weather', strict: false, parameters: { type: 'object' } }];
    const first = await client.responses.create({ model: 'echo', input: 'call get_weather {"city":"Kyiv"}', tools });
    const call = first.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
    const input = [
      { role: 'user' as const, content: 'call get_weather {"city":"Kyiv"}' },
      ...(first.output as OpenAI.Responses.ResponseInputItem[]),
      { type: 'function_call_output' as const, call_id: call.call_id, output: '4C' },
    ];
    const failed = await client.responses.create({ model: 'unreachable', input, tools, stream: true });
    for await (const event of failed) expect(event.type).not.toBe('response.completed');
    // Not taken again in the background (its id would name no input): refused as answering the call twice.
    const queued = await client.responses
      .create({ model: 'echo', input, tools, background: true })
      .catch((error: unknown) => error);
    expect(queued).toBeInstanceOf(OpenAI.BadRequestError);
  });

  it('a conversation survives more failed responses than a fork chain may be deep (8)', async () => {
    // The official client's defaults: 2 retries of a 5xx, so 3 failed requests are 9 failed turns.
    const client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL });
    const conversation = await client.conversations.create({});
    await client.responses.create({ model: 'echo', conversation: conversation.id, input: 'hi' });
    for (let attempt = 0; attempt < 3; attempt++) {
      const failed = await client.responses
        .create({ model: 'unreachable', conversation: conversation.id, input: 'next' })
        .catch((error: unknown) => error);
      expect(failed).toBeInstanceOf(OpenAI.InternalServerError);
    }
    await client.responses.create({ model: 'echo', conversation: conversation.id, input: 'next' });
    const items = await client.conversations.items.list(conversation.id, { order: 'asc' });
    expect(texts(items.data)).toEqual(['hi', 'echo: hi', 'next', 'echo: next']);
  });

  it('is taken out in a conversation stored before configs named the generations of its ids', async () => {
    const client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
    const conversation = await client.conversations.create({});
    await client.responses.create({ model: 'echo', conversation: conversation.id, input: 'hi' });
    // The config as such a session has it: no `rewound`.
    const key = `sessions/${conversation.id}/session.json`;
    const stored = await tailgate.store.get(key);
    const { rewound: _, ...config } = JSON.parse(new TextDecoder().decode(stored!.body));
    await tailgate.store.put(key, JSON.stringify(config), { contentType: 'application/json' });
    await client.responses
      .create({ model: 'unreachable', conversation: conversation.id, input: 'next' })
      .catch(() => undefined);
    await client.responses.create({ model: 'echo', conversation: conversation.id, input: 'next' });
    const items = await client.conversations.items.list(conversation.id, { order: 'asc' });
    expect(texts(items.data)).toEqual(['hi', 'echo: hi', 'next', 'echo: next']);
  });
});

describe('a failed first response of a new conversation', () => {
  it('leaves no conversation behind, its turn taken out or refused when claimed; its resend starts one', async () => {
    const client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
    const sessions = async () => (await tailgateGet(tailgate.baseURL, '/sessions?limit=100')).sessions.length;
    // A token whose budget one turn spends: its next turns are refused when claimed (402).
    const minted = await fetch(`${tailgate.baseURL}/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ scopes: ['session:turn'], budget: { max_turns: 1 } }),
    });
    const spent = new OpenAI({
      apiKey: ((await minted.json()) as { token: string }).token,
      baseURL: tailgate.baseURL,
      maxRetries: 0,
    });
    await spent.responses.create({ model: 'echo', input: 'spend it' });
    const before = await sessionKeys(tailgate);
    const listed = await sessions();

    const failed = await client.responses
      .create({ model: 'unreachable', input: 'hi' })
      .catch((error: unknown) => error);
    expect(failed).toBeInstanceOf(OpenAI.InternalServerError);
    for (const extra of [{}, { stream: true }, { background: true }]) {
      const refused = await spent.responses
        .create({ model: 'echo', input: 'hi', ...extra })
        .catch((error: unknown) => error);
      expect(refused).toMatchObject({ status: 402, code: 'budget_exhausted' });
    }
    expect(await sessionKeys(tailgate)).toEqual(before);
    expect(await sessions()).toBe(listed);
    const resent = await client.responses.create({ model: 'echo', input: 'hi' });
    expect(resent.output_text).toBe('echo: hi');
    expect(await sessions()).toBe(listed + 1);
  });
});

describe('a streamed response refused before its first event (400, no id given out)', () => {
  // A prompt over the context window is refused (context_length_exceeded) once its turn is claimed.
  const world = clientOnTailgate({ CONTEXT_LIMIT: '120', RESPONSE_RESERVE: '20' });
  const long = 'x'.repeat(2000);

  it('leaves no conversation behind when it started one, as one not streamed', async () => {
    const listed = async () => (await tailgateGet(world.tailgate.baseURL, '/sessions?limit=100')).sessions.length;
    const before = await sessionKeys(world.tailgate);
    const count = await listed();
    for (const stream of [false, true]) {
      const refused = await world.client.responses
        .create({ model: 'echo', input: long, stream })
        .catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
      expect(refused).toMatchObject({ code: 'context_length_exceeded' });
    }
    expect(await sessionKeys(world.tailgate)).toEqual(before);
    expect(await listed()).toBe(count);
  });

  it('leaves nothing in the conversation it continues', async () => {
    const { client } = world;
    const conversation = await client.conversations.create({});
    await client.responses.create({ model: 'echo', conversation: conversation.id, input: 'hi' });
    const refused = await client.responses
      .create({ model: 'echo', conversation: conversation.id, input: long, stream: true })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    await client.responses.create({ model: 'echo', conversation: conversation.id, input: 'next' });
    const items = await client.conversations.items.list(conversation.id, { order: 'asc' });
    expect(texts(items.data)).toEqual(['hi', 'echo: hi', 'next', 'echo: next']);
  });
});

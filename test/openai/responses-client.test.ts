import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { clientOnTailgate, MESSAGE_EVENTS, sessionKeys, tailgateGet as getJson, TOKEN } from './server.ts';

// The official `openai` client against the real app on a loopback Node server (echo model).
const world = clientOnTailgate({ MODEL_ALIASES: 'gpt-4.1-mini=echo' });

const weather = {
  type: 'function' as const,
  name: 'get_weather',
  strict: false,
  parameters: { type: 'object', properties: { city: { type: 'string' } } },
};

/** Request options sending an Idempotency-Key (the official client sends none of its own). */
function keyed(key: string) {
  return { headers: { 'Idempotency-Key': key } };
}

function tailgateGet(path: string): Promise<any> {
  return getJson(world.tailgate.baseURL, path);
}

describe('the official openai client: responses', () => {
  it('chains three turns with previous_response_id, answering a tool call with function_call_output', async () => {
    const first = await world.client.responses.create({
      model: 'echo',
      input: 'call get_weather {"city":"Paris"}',
      tools: [weather],
      instructions: 'Be brief.',
    });
    expect(first).toMatchObject({
      object: 'response',
      status: 'completed',
      model: 'echo',
      instructions: 'Be brief.',
      previous_response_id: null,
    });
    // The session's id, the turn, its input and output seqs, and the session's generation.
    expect(first.id).toMatch(/^resp_conv_[0-9a-f]{24}_1_1_2_g[0-9a-f]{21}$/);
    const generation = first.id.slice(first.id.lastIndexOf('_') + 1);
    const call = first.output[0]!;
    expect(call).toMatchObject({
      type: 'function_call',
      name: 'get_weather',
      arguments: '{"city":"Paris"}',
      status: 'completed',
    });
    expect(call.id).toMatch(/^fc_conv_[0-9a-f]{24}_2$/);
    expect(first.usage).toMatchObject({
      input_tokens: expect.any(Number),
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: expect.any(Number),
    });
    const sessionId = first.conversation!.id;

    const second = await world.client.responses.create({
      model: 'gpt-4.1-mini',
      previous_response_id: first.id,
      tools: [weather],
      input: [{ type: 'function_call_output', call_id: (call as { call_id: string }).call_id, output: '18C, clear' }],
    });
    expect(second.id).toBe(`resp_${sessionId}_2_3_4_${generation}`);
    expect(second.previous_response_id).toBe(first.id);
    expect(second.output_text).toBe('echo: call get_weather {"city":"Paris"}');
    expect(second.output[0]).toMatchObject({ type: 'message', role: 'assistant', id: `msg_${sessionId}_4` });

    const third = await world.client.responses.create({
      model: 'echo',
      previous_response_id: second.id,
      input: 'and tomorrow?',
    });
    expect(third.output_text).toBe('echo: and tomorrow?');
    expect((third as unknown as { tailgate: { turn: number; session_id: string } }).tailgate).toMatchObject({
      turn: 3,
      session_id: sessionId,
    });

    // The whole conversation is one session.
    const session = await tailgateGet(`/sessions/${sessionId}`);
    expect(session.counts).toMatchObject({ turns: 3, items: 6, tool_calls: 1 });
    expect(session.instructions).toBe('Be brief.');

    // Read back: the response and its input items.
    const read = await world.client.responses.retrieve(second.id);
    expect(read).toMatchObject({
      id: second.id,
      status: 'completed',
      output_text: 'echo: call get_weather {"city":"Paris"}',
    });
    expect(read.output).toEqual(second.output);
    const items = await world.client.responses.inputItems.list(second.id);
    expect(items.data).toEqual([
      {
        type: 'function_call_output',
        id: `fco_${sessionId}_3`,
        call_id: (call as { call_id: string }).call_id,
        output: '18C, clear',
        status: 'completed',
      },
    ]);

    // Two responses off an older one branch the conversation: each goes to a new conversation,
    // a fork sharing the history up to that response, and each chain goes on by itself.
    const left = await world.client.responses.create({ model: 'echo', previous_response_id: second.id, input: 'left' });
    const right = await world.client.responses.create({
      model: 'echo',
      previous_response_id: second.id,
      input: 'right',
    });
    const branches = [left.conversation!.id, right.conversation!.id];
    expect(new Set([sessionId, ...branches]).size).toBe(3);
    const leftNext = await world.client.responses.create({ model: 'echo', previous_response_id: left.id, input: 'l2' });
    const rightNext = await world.client.responses.create({
      model: 'echo',
      previous_response_id: right.id,
      input: 'r2',
    });
    expect([leftNext.output_text, rightNext.output_text]).toEqual(['echo: l2', 'echo: r2']);
    expect([leftNext.conversation!.id, rightNext.conversation!.id]).toEqual(branches);
    for (const [branch, word] of [
      [branches[0]!, 'left'],
      [branches[1]!, 'right'],
    ] as const) {
      const forked = await tailgateGet(`/sessions/${branch}`);
      expect(forked).toMatchObject({ instructions: 'Be brief.', counts: { turns: 4 }, forked_from: { id: sessionId } });
      const contents = (await world.client.conversations.items.list(branch, { order: 'asc' })).data.map((item) =>
        item.type === 'message' ? (item.content[0] as { text: string }).text : item.type,
      );
      expect(contents.slice(-4)).toEqual([word, `echo: ${word}`, `${word[0]}2`, `echo: ${word[0]}2`]);
      expect(contents.slice(0, -4)).toEqual([
        'call get_weather {"city":"Paris"}',
        'function_call',
        'function_call_output',
        'echo: call get_weather {"city":"Paris"}',
      ]);
    }
    // The older chain is as it was.
    expect((await tailgateGet(`/sessions/${sessionId}`)).counts.turns).toBe(3);
    expect((await world.client.responses.retrieve(third.id)).output).toEqual(third.output);
  });

  it('answers a keyed retry of a chained response with the stored one, before judging branching', async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'start' });
    const body = { model: 'echo', previous_response_id: first.id, input: 'go on', instructions: 'be brief' };
    const second = await world.client.responses.create(body, keyed('chained-retry'));
    const sessionId = first.conversation!.id;
    // The retry continues what is now an older response: it gets the stored answer, not a 409.
    const retried = await world.client.responses.create(body, keyed('chained-retry'));
    expect(retried.id).toBe(second.id);
    expect(retried.output_text).toBe('echo: go on');
    // So does a streamed one.
    const streamedBody = { ...body, previous_response_id: second.id, input: 'more', stream: true as const };
    const completed = async () => {
      const events = await world.client.responses.create(streamedBody, keyed('chained-stream'));
      for await (const event of events) if (event.type === 'response.completed') return event.response;
      throw new Error('no response.completed');
    };
    const third = await completed();
    expect((await completed()).id).toBe(third.id);
    // Another request under the key is 422; a new key on the older response is still a branch.
    const reused = await world.client.responses
      .create({ ...body, input: 'something else' }, keyed('chained-retry'))
      .catch((error: unknown) => error);
    expect(reused).toMatchObject({ status: 422, code: 'idempotency_key_reused' });
    const branch = await world.client.responses.create({ ...body, instructions: 'be long' }, keyed('chained-new'));
    expect(branch.conversation!.id).not.toBe(sessionId);
    // Its retry finds the branch its first attempt made, and is replayed there.
    const branchRetried = await world.client.responses.create(
      { ...body, instructions: 'be long' },
      keyed('chained-new'),
    );
    expect(branchRetried.id).toBe(branch.id);
    const forked = await tailgateGet(`/sessions/${branch.conversation!.id}`);
    expect(forked).toMatchObject({ instructions: 'be long', counts: { turns: 2 } });
    const session = await tailgateGet(`/sessions/${sessionId}`);
    expect(session.counts.turns).toBe(3);
    expect(session.instructions).toBe('be brief');
  });

  it('streams a response with responses.stream and create({stream: true}), in the official event order', async () => {
    const stream = world.client.responses.stream({ model: 'echo', input: 'stream this please' });
    const types: string[] = [];
    const deltas: string[] = [];
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.output_text.delta') deltas.push(event.delta);
    }
    const final = await stream.finalResponse();
    expect(final.output_text).toBe('echo: stream this please');
    expect(deltas.join('')).toBe('echo: stream this please');
    expect(types[0]).toBe('response.created');
    expect(types.filter((type) => type !== 'response.output_text.delta')).toEqual([
      'response.created',
      'response.in_progress',
      ...MESSAGE_EVENTS,
      'response.completed',
    ]);

    const raw = await world.client.responses.create({
      model: 'echo',
      previous_response_id: final.id,
      input: 'call get_weather {"city":"Oslo"}',
      tools: [weather],
      stream: true,
    });
    const events: any[] = [];
    for await (const event of raw) events.push(event);
    expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, index) => index));
    expect(events.map((event) => event.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    const completed = events.at(-1).response;
    expect(completed.id).toBe(events[0].response.id);
    expect(completed.previous_response_id).toBe(final.id);
    expect(completed.output[0]).toMatchObject({ type: 'function_call', arguments: '{"city":"Oslo"}' });
  });

  it('with store: false runs on the input alone and stores nothing', async () => {
    const keys = () => sessionKeys(world.tailgate);
    const before = await keys();
    const response = await world.client.responses.create({
      model: 'echo',
      store: false,
      input: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: [{ type: 'input_text', text: 'nothing kept' }] },
      ],
    });
    expect(response).toMatchObject({
      store: false,
      conversation: null,
      output_text: 'echo: nothing kept',
      instructions: 'Be brief.',
    });
    expect(response.id).toMatch(/^resp_[0-9a-f]{24}$/);
    expect(await keys()).toEqual(before);
    const missing = await world.client.responses.retrieve(response.id).catch((error: unknown) => error);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
  });

  it(
    'raises the typed errors: unknown model (404 model_not_found), unsupported fields (400 naming them), ' +
      'unknown ids',
    async () => {
      const unknown = await world.client.responses
        .create({ model: 'gpt-unknown', input: 'hi' })
        .catch((error: unknown) => error);
      expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
      expect(unknown).toMatchObject({
        status: 404,
        code: 'model_not_found',
        param: 'model',
        type: 'invalid_request_error',
      });
      // A name that is a property of every object is no alias either.
      for (const model of ['toString', 'constructor', '__proto__'])
        expect(
          await world.client.responses.create({ model, input: 'hi' }).catch((error: unknown) => error),
        ).toMatchObject({
          status: 404,
          code: 'model_not_found',
        });
      expect(await world.client.models.retrieve('toString').catch((error: unknown) => error)).toMatchObject({
        status: 404,
        code: 'model_not_found',
      });

      const background = await world.client.responses
        .create({ model: 'echo', input: 'hi', background: true, store: false })
        .catch((error: unknown) => error);
      expect(background).toBeInstanceOf(OpenAI.BadRequestError);
      expect(background).toMatchObject({ status: 400, param: 'background' });

      const include = await world.client.responses
        .create({ model: 'echo', input: 'hi', include: ['file_search_call.results'] })
        .catch((error: unknown) => error);
      expect(include).toMatchObject({ status: 400, param: 'include[0]' });

      // OpenAI's metadata is at most 16 pairs, on a response as on a conversation (which the
      // response's new conversation takes it as).
      const metadata = Object.fromEntries(Array.from({ length: 17 }, (_, index) => [`key${index}`, 'value']));
      const tooMuch = await world.client.responses
        .create({ model: 'echo', input: 'hi', metadata })
        .catch((error: unknown) => error);
      expect(tooMuch).toBeInstanceOf(OpenAI.BadRequestError);
      expect(tooMuch).toMatchObject({ status: 400, param: 'metadata' });

      // input_items adds no include field (an input image's URL: tailgate lists its blob), as a
      // conversation's item list does not: a 400 naming it, not the items without it.
      const listed = await world.client.responses.create({ model: 'echo', input: 'hi' });
      const itemsInclude = await world.client.responses.inputItems
        .list(listed.id, { include: ['message.input_image.image_url'] })
        .catch((error: unknown) => error);
      expect(itemsInclude).toBeInstanceOf(OpenAI.BadRequestError);
      expect(itemsInclude).toMatchObject({ status: 400, param: 'include[]' });

      const builtIn = await world.client.responses
        .create({ model: 'echo', input: 'hi', tools: [{ type: 'web_search' }] })
        .catch((error: unknown) => error);
      expect(builtIn).toBeInstanceOf(OpenAI.BadRequestError);
      expect(builtIn).toMatchObject({ param: 'tools[0].type' });

      const choice = await world.client.responses
        .create({ model: 'echo', input: 'hi', tools: [weather], tool_choice: { type: 'function', name: 'other' } })
        .catch((error: unknown) => error);
      expect(choice).toMatchObject({ status: 400, param: 'tool_choice' });

      const badInput = await world.client.responses
        .create({
          model: 'echo',
          input: [{ role: 'user', content: [{ type: 'input_image', detail: 'auto', file_id: 'file_1' }] }],
        })
        .catch((error: unknown) => error);
      expect(badInput).toBeInstanceOf(OpenAI.BadRequestError);
      // Files API uploads are not supported: the refusal names the field, as an input_file's does.
      expect(badInput).toMatchObject({
        param: 'input[0].content[0].file_id',
        message: '400 input[0].content[0].file_id: this field is not supported by tailgate',
      });
      // No union's branches are listed beside the issue answered.
      expect(JSON.stringify((badInput as { error: unknown }).error)).not.toContain('invalid_union');

      // An item of a type tailgate does not take is refused by its type, in a short message.
      const builtInCall = await world.client.responses
        .create({
          model: 'echo',
          input: [
            { type: 'web_search_call', id: 'ws_1', status: 'completed', action: { type: 'search', query: 'x' } },
            { role: 'user', content: 'hi' },
          ],
        })
        .catch((error: unknown) => error);
      expect(builtInCall).toMatchObject({
        status: 400,
        param: 'input[0].type',
        message:
          '400 input[0].type: input items of type "web_search_call" are not supported (tailgate takes message, ' +
          'function_call, function_call_output, compaction, reasoning, item_reference)',
      });
      expect(JSON.stringify((builtInCall as { error: unknown }).error)).not.toContain('invalid_union');

      // A reasoning item sent back is taken and left out (the conversation keeps the model's reasoning).
      const withReasoning = await world.client.responses.create({
        model: 'echo',
        input: [
          { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'Hmm.' }], encrypted_content: null },
          { role: 'user', content: 'hi' },
        ],
      });
      expect(withReasoning.output_text).toBe('echo: hi');

      const previous = await world.client.responses
        .create({ model: 'echo', input: 'hi', previous_response_id: 'resp_nope_9_1_2' })
        .catch((error: unknown) => error);
      // OpenAI answers a previous_response_id naming no response with a 400, not a 404.
      expect(previous).toBeInstanceOf(OpenAI.BadRequestError);
      expect(previous).toMatchObject({
        status: 400,
        code: 'previous_response_not_found',
        param: 'previous_response_id',
        type: 'invalid_request_error',
      });

      const conversation = await world.client.responses
        .create({ model: 'echo', input: 'hi', conversation: 'no-such-session' })
        .catch((error: unknown) => error);
      expect(conversation).toBeInstanceOf(OpenAI.NotFoundError);

      const auth = await new OpenAI({ apiKey: 'wrong', baseURL: world.tailgate.baseURL, maxRetries: 0 }).responses
        .create({ model: 'echo', input: 'hi' })
        .catch((error: unknown) => error);
      expect(auth).toBeInstanceOf(OpenAI.AuthenticationError);
    },
  );

  it(
    'continues a session created on /v1/sessions as a conversation, delivering its inbox notices and refusing ' +
      'after an abort',
    async () => {
      const id = `conv-inbox-${Date.now()}`;
      const post = (path: string, body: unknown) =>
        fetch(`${world.tailgate.baseURL}${path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
      expect((await post('/sessions', { id })).status).toBe(201);
      expect(
        (await post(`/sessions/${id}/inbox`, { name: '0001-budget.md', content: 'Budget left: 2 USD' })).status,
      ).toBe(201);
      const response = await world.client.responses.create({
        model: 'echo',
        conversation: { id },
        input: 'What next?',
      });
      expect(response.output_text).toBe('echo: Budget left: 2 USD');
      expect(
        (response as unknown as { tailgate: { context: { notices_delivered: string[] } } }).tailgate.context
          .notices_delivered,
      ).toEqual(['0001-budget.md']);
      expect(response.conversation).toEqual({ id });

      expect((await post(`/sessions/${id}/inbox`, { name: 'abort', content: 'budget exhausted' })).status).toBe(201);
      const aborted = await world.client.responses
        .create({ model: 'echo', previous_response_id: response.id, input: 'go on' })
        .catch((error: unknown) => error);
      expect(aborted).toBeInstanceOf(OpenAI.ConflictError);
      expect(aborted).toMatchObject({ code: 'aborted' });
      // The answer tells the client not to retry (the official ones obey x-should-retry).
      expect((aborted as { headers?: Headers }).headers?.get('x-should-retry')).toBe('false');
    },
  );

  it("refuses a tool_choice naming a function the turn does not offer: without tools, the conversation's", async () => {
    const keys = () => sessionKeys(world.tailgate);
    const before = await keys();
    const forced = (name: string) => ({ type: 'function' as const, name });
    for (const store of [true, false]) {
      const refused = await world.client.responses
        .create({ model: 'echo', input: 'hi', store, tool_choice: forced('no_such_tool') })
        .catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
      expect(refused).toMatchObject({ status: 400, param: 'tool_choice' });
    }
    // The refused request started no conversation.
    expect(await keys()).toEqual(before);

    const id = `conv-tools-${Date.now()}`;
    const created = await fetch(`${world.tailgate.baseURL}/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id, tools: [{ type: 'function', name: 'get_weather' }] }),
    });
    expect(created.status).toBe(201);
    const first = await world.client.responses.create({
      model: 'echo',
      conversation: id,
      input: 'hi',
      tool_choice: forced('get_weather'),
    });
    expect(first.tool_choice).toEqual(forced('get_weather'));
    for (const after of [{ conversation: id }, { previous_response_id: first.id }]) {
      const refused = await world.client.responses
        .create({ model: 'echo', input: 'again', ...after, tool_choice: forced('no_such_tool') })
        .catch((error: unknown) => error);
      expect(refused).toMatchObject({ status: 400, param: 'tool_choice' });
    }
    expect((await tailgateGet(`/sessions/${id}`)).counts.turns).toBe(1);
  });

  it("replays a keyed retry whose tool_choice the conversation's tools lost since; a new key is refused", async () => {
    const id = `conv-tools-retry-${Date.now()}`;
    const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const created = await fetch(`${world.tailgate.baseURL}/sessions`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ id, tools: [{ type: 'function', name: 'get_weather' }] }),
    });
    expect(created.status).toBe(201);
    const tool_choice = { type: 'function' as const, name: 'get_weather' };
    const body = { model: 'echo', conversation: id, input: 'hi', tool_choice, instructions: 'Be brief.' };
    const first = await world.client.responses.create(body, keyed(`tools-retry-${id}`));
    const background = await world.client.responses.create({ ...body, background: true }, keyed(`tools-bg-${id}`));
    // The conversation's tools change: a retry of either request is answered as it was first.
    const patched = await fetch(`${world.tailgate.baseURL}/sessions/${id}`, {
      method: 'PATCH',
      headers: admin,
      body: JSON.stringify({ tools: [], instructions: 'Be long.' }),
    });
    expect(patched.status).toBe(200);
    const retried = await world.client.responses.create(body, keyed(`tools-retry-${id}`));
    expect(retried.id).toBe(first.id);
    expect(retried.output_text).toBe(first.output_text);
    const retriedBackground = await world.client.responses.create(
      { ...body, background: true },
      keyed(`tools-bg-${id}`),
    );
    expect(retriedBackground.id).toBe(background.id);
    // A new key runs a new turn, which the conversation's tools refuse; it stores nothing.
    const refused = await world.client.responses
      .create(body, keyed(`tools-new-${id}`))
      .catch((error: unknown) => error);
    expect(refused).toMatchObject({ status: 400, param: 'tool_choice' });
    const session = await tailgateGet(`/sessions/${id}`);
    expect(session.counts.turns).toBe(2);
    expect(session.instructions).toBe('Be long.');
  });

  it('deletes a response: GET is then 404', async () => {
    const response = await world.client.responses.create({ model: 'echo', input: 'to be deleted' });
    await world.client.responses.delete(response.id);
    const gone = await world.client.responses.retrieve(response.id).catch((error: unknown) => error);
    expect(gone).toBeInstanceOf(OpenAI.NotFoundError);
  });
});

describe('scoped tokens on the Responses API', () => {
  async function mint(body: unknown): Promise<string> {
    const response = await fetch(`${world.tailgate.baseURL}/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(201);
    return ((await response.json()) as { token: string }).token;
  }

  it(
    'a session:turn token bound to a conversation continues it, and may neither start another nor touch one it ' +
      'is not bound to',
    async () => {
      const admin = await world.client.responses.create({ model: 'echo', input: 'hello' });
      const other = await world.client.responses.create({ model: 'echo', input: 'elsewhere' });
      const bound = new OpenAI({
        apiKey: await mint({ scopes: ['session:turn'], session_id: admin.conversation!.id }),
        baseURL: world.tailgate.baseURL,
        maxRetries: 0,
      });
      const next = await bound.responses.create({ model: 'echo', previous_response_id: admin.id, input: 'more' });
      expect(next.output_text).toBe('echo: more');
      expect((await bound.responses.retrieve(next.id)).id).toBe(next.id);
      await expect(bound.responses.create({ model: 'echo', input: 'a new conversation' })).rejects.toBeInstanceOf(
        OpenAI.PermissionDeniedError,
      );
      await expect(
        bound.responses.create({ model: 'echo', previous_response_id: other.id, input: 'x' }),
      ).rejects.toBeInstanceOf(OpenAI.PermissionDeniedError);
      await expect(bound.responses.retrieve(other.id)).rejects.toBeInstanceOf(OpenAI.PermissionDeniedError);
      await expect(bound.responses.delete(next.id)).rejects.toBeInstanceOf(OpenAI.PermissionDeniedError);

      // A session:turn token bound to no session may start conversations.
      const unbound = new OpenAI({
        apiKey: await mint({ scopes: ['session:turn'] }),
        baseURL: world.tailgate.baseURL,
        maxRetries: 0,
      });
      expect((await unbound.responses.create({ model: 'echo', input: 'fresh' })).output_text).toBe('echo: fresh');
      const reader = new OpenAI({
        apiKey: await mint({ scopes: ['session:read'] }),
        baseURL: world.tailgate.baseURL,
        maxRetries: 0,
      });
      await expect(reader.responses.create({ model: 'echo', input: 'no' })).rejects.toBeInstanceOf(
        OpenAI.PermissionDeniedError,
      );
    },
  );
});

import { createOpenAI } from '@ai-sdk/openai';
import { generateText } from 'ai';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { fixture } from '../support/fake-providers/fake-provider-server.ts';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';
import { clientOnFakeOpenAI, TOKEN } from './server.ts';

// An `abort` notice must stop the agent even when its client retries the 409 by itself: the
// official client (default maxRetries: 2, no Idempotency-Key) and the AI SDK (which retries a
// 409 whatever the headers say) send the aborted request again.
const world = clientOnFakeOpenAI((request) =>
  request.body.stream ? { sse: fixture('openai-chat-text.sse') } : { text: fixture('openai-chat-text.json') },
);

const api = (path: string, init: { method?: string; body?: unknown } = {}) =>
  fetch(`${world.tailgate.baseURL}${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
  });

const sessionIds = async (): Promise<string[]> =>
  ((await (await api('/sessions?limit=100')).json()) as { sessions: { id: string }[] }).sessions
    .map((s) => s.id)
    .sort();

/** A conversation with one response, then an `abort` notice posted to it; what exists then. */
async function abortedConversation(client: OpenAI) {
  const first = await client.responses.create({ model: 'gpt-4o-mini', input: 'first' });
  const conversation = first.conversation!.id;
  const posted = await api(`/sessions/${conversation}/inbox`, {
    method: 'POST',
    body: { name: 'abort', content: 'runaway agent' },
  });
  expect(posted.status).toBe(201);
  return { first, conversation, calls: world.provider.requests.length, sessions: await sessionIds() };
}

/** The aborted request went no further: no model call, no branch, no new conversation, one aborted turn. */
async function stopped(before: Awaited<ReturnType<typeof abortedConversation>>) {
  expect(world.provider.requests.length).toBe(before.calls);
  expect(await sessionIds()).toEqual(before.sessions);
  const turns = (await (await api(`/sessions/${before.conversation}/turns`)).json()) as {
    turns: { status: string }[];
  };
  expect(turns.turns.map((turn) => turn.status)).toEqual(['aborted', 'completed']);
}

const defaultClient = () => new OpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL });
const noRetries = () => new OpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL, maxRetries: 0 });

describe('an abort notice stops the agent whatever its client retries', () => {
  it('previous_response_id with the official client at its default retries: 409 aborted, nothing runs', async () => {
    const client = defaultClient();
    const before = await abortedConversation(client);
    const refused = await client.responses
      .create({ model: 'gpt-4o-mini', input: 'second', previous_response_id: before.first.id })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.APIError);
    expect(refused).toMatchObject({ status: 409, code: 'aborted' });
    expect((refused as { headers?: Headers }).headers?.get('x-should-retry')).toBe('false');
    await stopped(before);
  });

  it('previous_response_id sent again by hand (or by a client ignoring the header) is refused again', async () => {
    const client = noRetries();
    const before = await abortedConversation(client);
    const asked = { model: 'gpt-4o-mini', input: 'second', previous_response_id: before.first.id };
    for (let attempt = 0; attempt < 3; attempt++) {
      const refused = await client.responses.create(asked).catch((error: unknown) => error);
      expect(refused).toMatchObject({ status: 409, code: 'aborted' });
    }
    await stopped(before);
    // A new request (another input) after the abort goes on as the branching rules say: a branch.
    const other = await client.responses.create({ ...asked, input: 'something else' });
    expect(other.conversation!.id).not.toBe(before.conversation);
  });

  it('a streamed request under previous_response_id at the default retries: 409 aborted, nothing runs', async () => {
    const client = defaultClient();
    const before = await abortedConversation(client);
    const refused = await client.responses
      .create({ model: 'gpt-4o-mini', input: 'second', previous_response_id: before.first.id, stream: true })
      .catch((error: unknown) => error);
    expect(refused).toMatchObject({ status: 409, code: 'aborted' });
    await stopped(before);
  });

  it('conversation with the official client at its default retries: 409 aborted, nothing runs', async () => {
    const client = defaultClient();
    const before = await abortedConversation(client);
    const refused = await client.responses
      .create({ model: 'gpt-4o-mini', input: 'second', conversation: before.conversation })
      .catch((error: unknown) => error);
    expect(refused).toMatchObject({ status: 409, code: 'aborted' });
    // Sent again by hand: refused again.
    const again = await noRetries()
      .responses.create({ model: 'gpt-4o-mini', input: 'second', conversation: before.conversation })
      .catch((error: unknown) => error);
    expect(again).toMatchObject({ status: 409, code: 'aborted' });
    await stopped(before);
  });

  it('a resent whole history with the official client at its default retries: 409 aborted, nothing runs', async () => {
    const client = defaultClient();
    const before = await abortedConversation(client);
    const input = [
      { role: 'user' as const, content: 'first' },
      ...(before.first.output as OpenAI.Responses.ResponseInputItem[]),
      { role: 'user' as const, content: 'second' },
    ];
    const refused = await client.responses.create({ model: 'gpt-4o-mini', input }).catch((error: unknown) => error);
    expect(refused).toMatchObject({ status: 409, code: 'aborted' });
    const again = await noRetries()
      .responses.create({ model: 'gpt-4o-mini', input })
      .catch((error: unknown) => error);
    expect(again).toMatchObject({ status: 409, code: 'aborted' });
    await stopped(before);
  });

  it('an input with an image, stored as a blob reference, is recognised: its retry is refused again', async () => {
    const before = await abortedConversation(defaultClient());
    const image = dataUrl('image/png', pngBytes(8, 8));
    const input = [
      {
        role: 'user' as const,
        content: [
          { type: 'input_text' as const, text: 'look' },
          { type: 'input_image' as const, image_url: image, detail: 'auto' as const },
        ],
      },
    ];
    const byConversation = { model: 'gpt-4o-mini', input, conversation: before.conversation };
    // The notice refuses the first; the others retry it, under the conversation and after its response.
    for (const asked of [
      byConversation,
      byConversation,
      { model: 'gpt-4o-mini', input, previous_response_id: before.first.id },
    ]) {
      const refused = await noRetries()
        .responses.create(asked)
        .catch((error: unknown) => error);
      expect(refused).toMatchObject({ status: 409, code: 'aborted' });
    }
    await stopped(before);
  });

  it('the AI SDK with previousResponseId at its default retries: 409 aborted, nothing runs', async () => {
    const before = await abortedConversation(defaultClient());
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL });
    const failed = await generateText({
      model: openai('gpt-4o-mini'),
      prompt: 'second',
      providerOptions: { openai: { previousResponseId: before.first.id } },
    }).catch((error: unknown) => error);
    // Retried twice, each answered as the first: a RetryError holding three 409 aborted.
    const errors = (failed as { errors?: unknown[] }).errors ?? [failed];
    expect(errors.length).toBe(3);
    for (const error of errors)
      expect(error).toMatchObject({ statusCode: 409, responseBody: expect.stringContaining('"aborted"') });
    await stopped(before);
  });
});

describe('chat completions under x-tailgate-session: the retry of a request an abort refused', () => {
  /** A session with an `abort` notice posted to it, and how many model calls were made then. */
  async function abortedSession(): Promise<{ id: string; calls: number; headers: Record<string, string> }> {
    const id = `chat-abort-${crypto.randomUUID()}`;
    expect((await api('/sessions', { method: 'POST', body: { id } })).status).toBe(201);
    const posted = await api(`/sessions/${id}/inbox`, { method: 'POST', body: { name: 'abort', content: 'stop now' } });
    expect(posted.status).toBe(201);
    return { id, calls: world.provider.requests.length, headers: { 'x-tailgate-session': id } };
  }
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'go on' },
  ];

  it('sent again by hand is refused again with the same error, nothing run, until the session moves on', async () => {
    const before = await abortedSession();
    const asked = { model: 'gpt-4o-mini', messages };
    const refusals: unknown[] = [];
    for (let attempt = 0; attempt < 3; attempt++)
      refusals.push(
        await noRetries()
          .chat.completions.create(asked, { headers: before.headers })
          .catch((error: unknown) => error),
      );
    for (const refused of refusals) {
      expect(refused).toBeInstanceOf(OpenAI.ConflictError);
      expect(refused).toMatchObject({ status: 409, code: 'aborted', message: '409 the turn was aborted: stop now' });
      expect((refused as { error: unknown }).error).toEqual((refusals[0] as { error: unknown }).error);
      expect((refused as { headers: Headers }).headers.get('x-should-retry')).toBe('false');
    }
    expect(world.provider.requests.length).toBe(before.calls);
    // Other messages are another request: answered.
    const other = await noRetries().chat.completions.create(
      { model: 'gpt-4o-mini', messages: [...messages, { role: 'user', content: 'something else' }] },
      { headers: before.headers },
    );
    expect(other.choices[0]!.finish_reason).toBe('stop');
    // Once the session took an item, the same messages are no retry any more.
    const appended = await api(`/sessions/${before.id}/items`, {
      method: 'POST',
      body: { items: [{ type: 'message', role: 'user', content: 'noted' }] },
    });
    expect(appended.status).toBe(201);
    const later = await noRetries().chat.completions.create(asked, { headers: before.headers });
    expect(later.choices[0]!.finish_reason).toBe('stop');
  });

  it('is no retry once the session took a turn, even one deleted since (its counts as they were)', async () => {
    const before = await abortedSession();
    const asked = { model: 'gpt-4o-mini', messages };
    const refused = await noRetries()
      .chat.completions.create(asked, { headers: before.headers })
      .catch((error: unknown) => error);
    expect(refused).toMatchObject({ status: 409, code: 'aborted' });
    await noRetries().responses.create({ model: 'gpt-4o-mini', input: 'resume', conversation: before.id });
    expect((await api(`/sessions/${before.id}/turns/1`, { method: 'DELETE' })).status).toBe(200);
    const later = await noRetries().chat.completions.create(asked, { headers: before.headers });
    expect(later.choices[0]!.finish_reason).toBe('stop');
  });

  /** The keys of the objects kept for the chat completions an abort refused (`id`'s, or any session's). */
  async function chatAbortKeys(id?: string): Promise<string[]> {
    const keys: string[] = [];
    for (const prefix of ['openai/chat-aborted/', 'sessions/']) {
      const listed = await world.tailgate.store.list(prefix);
      keys.push(...listed.objects.map((object) => object.key).filter((key) => key.includes('chat-aborted')));
    }
    return id === undefined ? keys : keys.filter((key) => key.startsWith(`sessions/${id}/`));
  }

  /** A chat completion under session `id` (no retries): its answer, or what it threw. */
  const chatUnder = (id: string, asked: OpenAI.Chat.ChatCompletionCreateParamsNonStreaming) =>
    noRetries()
      .chat.completions.create(asked, { headers: { 'x-tailgate-session': id } })
      .catch((error: unknown) => error);

  it("keeps one object per session, its latest abort's, deleted with the session", async () => {
    const before = await abortedSession();
    const first = { model: 'gpt-4o-mini', messages };
    expect(await chatUnder(before.id, first)).toMatchObject({ status: 409, code: 'aborted' });
    expect(await chatAbortKeys(before.id)).toHaveLength(1);
    // A second abort, of other messages, with the session as it stood: it takes the first's place.
    const posted = await api(`/sessions/${before.id}/inbox`, {
      method: 'POST',
      body: { name: 'abort', content: 'again' },
    });
    expect(posted.status).toBe(201);
    const second = { model: 'gpt-4o-mini', messages: [...messages, { role: 'user' as const, content: 'more' }] };
    expect(await chatUnder(before.id, second)).toMatchObject({
      status: 409,
      message: '409 the turn was aborted: again',
    });
    expect(await chatAbortKeys(before.id)).toHaveLength(1);
    // The latest abort's retry is refused again; the one before is no retry of it any more.
    expect(await chatUnder(before.id, second)).toMatchObject({
      status: 409,
      message: '409 the turn was aborted: again',
    });
    const answered = await noRetries().chat.completions.create(first, { headers: before.headers });
    expect(answered.choices[0]!.finish_reason).toBe('stop');

    expect((await api(`/sessions/${before.id}`, { method: 'DELETE' })).status).toBe(204);
    expect(await chatAbortKeys(before.id)).toEqual([]);
    // Nothing kept outside the sessions' own objects.
    expect((await chatAbortKeys()).filter((key) => !key.startsWith('sessions/'))).toEqual([]);
  });

  it("is kept by the sweep of the session's older generation a deleted fork read", async () => {
    const id = `chat-abort-${crypto.randomUUID()}`;
    expect((await api('/sessions', { method: 'POST', body: { id } })).status).toBe(201);
    await noRetries().responses.create({ model: 'gpt-4o-mini', input: 'first', conversation: id });
    // A fork reads the session's generation; the delete of its turn moves the session to the next.
    const forked = await api(`/sessions/${id}/fork`, { method: 'POST', body: { at_turn: 1 } });
    expect(forked.status).toBe(201);
    const fork = ((await forked.json()) as { id: string }).id;
    expect((await api(`/sessions/${id}/turns/1`, { method: 'DELETE' })).status).toBe(200);
    const posted = await api(`/sessions/${id}/inbox`, { method: 'POST', body: { name: 'abort', content: 'stop now' } });
    expect(posted.status).toBe(201);
    const refused = () => chatUnder(id, { model: 'gpt-4o-mini', messages });
    expect(await refused()).toMatchObject({ status: 409, code: 'aborted' });
    // The fork gone, the generation it read is swept from the session's objects: its abort stays.
    expect((await api(`/sessions/${fork}`, { method: 'DELETE' })).status).toBe(204);
    expect(await chatAbortKeys(id)).toHaveLength(1);
    expect(await refused()).toMatchObject({ status: 409, code: 'aborted' });
  });

  it('the AI SDK in chat mode at its default retries: 409 aborted each time, nothing runs', async () => {
    const before = await abortedSession();
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL, headers: before.headers });
    const failed = await generateText({
      model: openai.chat('gpt-4o-mini'),
      system: 'Be brief.',
      prompt: 'go on',
    }).catch((error: unknown) => error);
    const errors = (failed as { errors?: unknown[] }).errors ?? [failed];
    expect(errors.length).toBe(3);
    for (const error of errors)
      expect(error).toMatchObject({ statusCode: 409, responseBody: expect.stringContaining('"aborted"') });
    expect(world.provider.requests.length).toBe(before.calls);
  });
});

import OpenAI from 'openai';
import type { Response, ResponseStreamEvent } from 'openai/resources/responses/responses';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { SlowJournalStore } from '../support/slow-journal-store.ts';
import { compactingResponse, settledResponse, startTailgate, tailgateGet, TOKEN } from './server.ts';

// Background responses and resumable streams through the official `openai` client against the
// real app on a loopback Node server: the turn runs in the process, its events are journaled,
// and `responses.retrieve(id, {stream: true, starting_after})` resumes them. The model is a
// loopback OpenAI-compatible provider that streams slowly (so readers meet the turn live,
// across several journal batches), or hangs on `hang` (for a cancel); the journal's writes take
// a while to land (test/support/slow-journal-store.ts), so readers also meet a batch in flight.
let provider: FakeProvider;
let tailgate: Awaited<ReturnType<typeof startTailgate>>;
let client: OpenAI;
const WORDS = 40;
const journalStore = new SlowJournalStore(5);

/** A chat completion stream of `WORDS` words, one chunk each. */
function slowAnswer(): string {
  const chunk = (delta: object, finish: string | null = null) => {
    const choices = [{ index: 0, delta, finish_reason: finish }];
    return `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices })}\n\n`;
  };
  const words = Array.from({ length: WORDS }, (_, index) => chunk({ content: `w${index} ` }));
  return `${chunk({ role: 'assistant', content: '' })}${words.join('')}${chunk({}, 'stop')}data: [DONE]\n\n`;
}
const expectedText = Array.from({ length: WORDS }, (_, index) => `w${index} `).join('');

beforeAll(async () => {
  provider = await startFakeProvider((request) =>
    JSON.stringify(request.body).includes('hang')
      ? { hang: true }
      : JSON.stringify(request.body).includes('fail')
        ? { status: 500, json: { error: { message: 'down' } } }
        : { sse: slowAnswer(), gapMs: 40 },
  );
  tailgate = await startTailgate(
    {
      OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
      MODEL_ALIASES: 'slow=openai-compatible:fake',
      MODEL_MAX_RETRIES: '0',
      MODEL_TIMEOUT_MS: '600000',
      TURN_LEASE_MS: '3000',
    },
    journalStore,
  );
  client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
});
afterAll(async () => {
  await tailgate.close();
  await provider.close();
});

/** Reads a response's events after `after`, at most `limit` of them (then disconnects). */
async function readEvents(id: string, after: number | undefined, limit = Infinity): Promise<ResponseStreamEvent[]> {
  const query = after === undefined ? { stream: true as const } : { stream: true as const, starting_after: after };
  const stream = await client.responses.retrieve(id, query);
  const events: ResponseStreamEvent[] = [];
  for await (const event of stream) {
    events.push(event);
    if (events.length >= limit) break;
  }
  return events;
}

const textOf = (events: ResponseStreamEvent[]) =>
  events.map((event) => (event.type === 'response.output_text.delta' ? event.delta : '')).join('');

describe('the official openai client: background responses', () => {
  it('answers queued at once; retrieve follows it to completed with its output and usage', async () => {
    const created = await client.responses.create({ model: 'slow', input: 'later', background: true });
    expect(created).toMatchObject({ object: 'response', background: true, output: [], usage: null });
    expect(['queued', 'in_progress']).toContain(created.status);
    const ended = await settledResponse(client, created.id);
    expect(ended).toMatchObject({ id: created.id, status: 'completed', background: true, error: null });
    expect(ended.output_text).toBe(expectedText);
    expect(ended.usage).toMatchObject({ output_tokens: expect.any(Number) });
    // The next response continues the conversation as after any response.
    const next = await client.responses.create({ model: 'echo', input: 'after', previous_response_id: ended.id });
    expect(next.status).toBe('completed');
    const items = await client.conversations.items.list(ended.conversation!.id, { order: 'asc' });
    expect(items.data.map((item) => item.type)).toEqual(['message', 'message', 'message', 'message']);
  });

  it('replays from several starting_after points: the same events, numbered the same', async () => {
    const created = await client.responses.create({ model: 'slow', input: 'resume me', background: true });
    const whole = await readEvents(created.id, undefined);
    expect(whole.map((event) => event.sequence_number)).toEqual(whole.map((_, index) => index));
    expect(whole[0]).toMatchObject({ type: 'response.created', response: { id: created.id, background: true } });
    expect(whole.at(-1)).toMatchObject({ type: 'response.completed', response: { status: 'completed' } });
    expect(textOf(whole)).toBe(expectedText);
    for (const after of [0, 1, 5, Math.floor(whole.length / 2), whole.length - 2]) {
      const resumed = await readEvents(created.id, after);
      expect(resumed.map((event) => event.sequence_number)).toEqual(
        whole.slice(after + 1).map((e) => e.sequence_number),
      );
      expect(textOf(resumed)).toBe(textOf(whole.slice(after + 1)));
    }
    // The client's own resume helper: responses.stream({response_id, starting_after}).
    const helper = client.responses.stream({ response_id: created.id, starting_after: 10 });
    const seen: number[] = [];
    for await (const event of helper) seen.push(event.sequence_number);
    expect(seen[0]).toBe(11);
    expect((await helper.finalResponse()).output_text).toBe(expectedText);
  });

  it('a client reconnecting at random points, while the turn streams, gets every event once, in order', async () => {
    const readsBefore = journalStore.readsDuringWrite;
    const reader = async (seed: number) => {
      const created = await client.responses.create({ model: 'slow', input: 'live', background: true });
      const seen: ResponseStreamEvent[] = [];
      let state = seed;
      for (let connections = 0; connections < 300 && seen.at(-1)?.type !== 'response.completed'; connections++) {
        state = (state * 48271) % 2147483647;
        seen.push(...(await readEvents(created.id, seen.at(-1)?.sequence_number, 1 + (state % 7))));
      }
      expect(seen.map((event) => event.sequence_number)).toEqual(seen.map((_, index) => index));
      expect(textOf(seen)).toBe(expectedText);
      // The same events as a reader that never disconnected.
      const whole = await readEvents(created.id, undefined);
      expect(seen.slice(0, -1)).toEqual(whole.slice(0, -1));
    };
    await Promise.all([11, 23, 37].map(reader));
    // The readers met the journal while a batch of it was being written.
    expect(journalStore.readsDuringWrite).toBeGreaterThan(readsBefore);
  });

  it('streams with stream: true and keeps running when the client goes away', async () => {
    const stream = await client.responses.create({ model: 'slow', input: 'go on', background: true, stream: true });
    const first: ResponseStreamEvent[] = [];
    for await (const event of stream) {
      first.push(event);
      if (first.length === 4) break;
    }
    expect(first[0]).toMatchObject({
      type: 'response.created',
      sequence_number: 0,
      response: { background: true, status: 'queued' },
    });
    expect(first[1]).toMatchObject({ type: 'response.in_progress', response: { status: 'in_progress' } });
    const id = first[0]!.type === 'response.created' ? first[0]!.response.id : '';
    const ended = await settledResponse(client, id);
    expect(ended.status).toBe('completed');
    expect(ended.output_text).toBe(expectedText);
  });

  it('cancel stops a running response: its call is aborted, its notices go back, no output is stored', async () => {
    const conversation = await client.conversations.create({});
    const admin = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const base = tailgate.baseURL;
    await fetch(`${base}/sessions/${conversation.id}`, {
      method: 'PATCH',
      headers: admin,
      body: JSON.stringify({ strategies: ['inbox'] }),
    });
    await fetch(`${base}/sessions/${conversation.id}/inbox`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ name: 'note.md', content: 'remember this' }),
    });
    const calls = provider.requests.length;
    const created = await client.responses.create({
      model: 'slow',
      input: 'hang',
      background: true,
      conversation: conversation.id,
    });
    for (let polls = 0; polls < 600 && provider.requests.length === calls; polls++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await client.responses.retrieve(created.id)).status).toBe('in_progress');
    const cancelled = await client.responses.cancel(created.id);
    expect(cancelled).toMatchObject({ id: created.id, status: 'cancelled', background: true });
    await provider.requests.at(-1)!.closed;
    expect(await client.responses.retrieve(created.id)).toMatchObject({ status: 'cancelled', output: [] });
    // Cancelling again answers it as it stands.
    expect((await client.responses.cancel(created.id)).status).toBe('cancelled');
    const inbox = await tailgateGet(base, `/sessions/${conversation.id}/inbox`);
    expect(inbox.pending.map((notice: any) => notice.name)).toEqual(['note.md']);
    const items = await client.conversations.items.list(conversation.id);
    expect(items.data.map((item) => item.type === 'message' && item.role)).toEqual(['user']);
    // Its stream ends with the cancelled response.
    const events = await readEvents(created.id, undefined);
    expect(events.at(-1)).toMatchObject({ type: 'response.failed', response: { status: 'cancelled' } });
  });

  it('a background response that compacted ends with its compaction item, in retrieve and in its stream', async () => {
    const first = await compactingResponse(client, 'alpha');
    const created = await compactingResponse(client, 'bravo', { after: first.id, background: true });
    const ended = await settledResponse(client, created.id);
    const sessionId = first.conversation!.id;
    expect(ended.output.map((item) => item.type)).toEqual(['message', 'compaction']);
    expect(ended.output.at(-1)).toMatchObject({ type: 'compaction', id: `cmp_${sessionId}_3` });
    const events = await readEvents(created.id, undefined);
    expect(events.at(-1)).toMatchObject({ type: 'response.completed', response: { output: ended.output } });
  });

  it('keeps one Idempotency-Key to one background response: a retry answers it as it stands', async () => {
    const key = { headers: { 'Idempotency-Key': `bg-${Math.random()}` } };
    const body = { model: 'echo', input: 'once', background: true };
    const created = await client.responses.create(body, key);
    await settledResponse(client, created.id);
    const again = await client.responses.create(body, key);
    expect(again).toMatchObject({ id: created.id, status: 'completed', output_text: 'echo: once' });
    const items = await client.conversations.items.list(created.conversation!.id);
    expect(items.data).toHaveLength(2);
  });

  it('answers a retry under its Idempotency-Key while the response runs as it stands, streamed or not', async () => {
    const key = { headers: { 'Idempotency-Key': `bg-running-${Math.random()}` } };
    const body = { model: 'slow', input: 'hang on', background: true } as const;
    const calls = provider.requests.length;
    const created = await client.responses.create(body, key);
    for (let polls = 0; polls < 600 && provider.requests.length === calls; polls++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    const again = await client.responses.create(body, key);
    expect(again).toMatchObject({ id: created.id, status: 'in_progress', background: true, output: [] });
    expect(again.created_at).toBe(created.created_at);
    // Another request under the key is refused as a reuse, running or not.
    const reused = await client.responses.create({ ...body, input: 'hang on, other' }, key).catch((error) => error);
    expect(reused).toMatchObject({ status: 422, code: 'idempotency_key_reused' });
    const stream = await client.responses.create({ ...body, stream: true }, key);
    for await (const event of stream) {
      expect(event).toMatchObject({ type: 'response.created', sequence_number: 0, response: { id: created.id } });
      break;
    }
    await client.responses.cancel(created.id);
    // One turn ran: the retries stored nothing.
    const items = await client.conversations.items.list(created.conversation!.id);
    expect(items.data).toHaveLength(1);
    expect(provider.requests.length).toBe(calls + 1);
  });

  it('refuses a retry with background: true under the key of a foreground response still running', async () => {
    const key = { headers: { 'Idempotency-Key': `fg-running-${Math.random()}` } };
    const body = { model: 'slow', input: 'in the foreground' } as const;
    const calls = provider.requests.length;
    const first = (async () => {
      let completed: Response | undefined;
      for await (const event of await client.responses.create({ ...body, stream: true }, key))
        if (event.type === 'response.completed') completed = event.response;
      return completed!;
    })();
    for (let polls = 0; polls < 600 && provider.requests.length === calls; polls++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    const again = await client.responses
      .create({ ...body, stream: true, background: true }, key)
      .catch((error: unknown) => error);
    expect(again).toMatchObject({ status: 409, code: 'turn_in_progress' });
    // The first request is answered its own response, kept as such.
    const answered = await first;
    expect(answered).toMatchObject({ status: 'completed', background: false, output_text: expectedText });
    expect(await client.responses.retrieve(answered.id)).toMatchObject({ status: 'completed', background: false });
  });

  it('a background response whose model fails ends failed, in retrieve and in its stream', async () => {
    const created = await client.responses.create({ model: 'slow', input: 'fail now', background: true });
    const ended = await settledResponse(client, created.id);
    expect(ended).toMatchObject({ status: 'failed', output: [], error: { code: 'model_error' } });
    const events = await readEvents(created.id, undefined);
    expect(events.at(-1)).toMatchObject({ type: 'response.failed', response: { status: 'failed' } });
    expect(await client.responses.cancel(created.id)).toMatchObject({ status: 'failed' });
  });

  it('refuses background with store: false, and a stream of a response that was not in the background', async () => {
    const unstored = await client.responses
      .create({ model: 'echo', input: 'hi', background: true, store: false })
      .catch((error: unknown) => error);
    expect(unstored).toMatchObject({ status: 400, param: 'background' });
    const foreground = await client.responses.create({ model: 'echo', input: 'hi' });
    const streamed = await readEvents(foreground.id, undefined).catch((error: unknown) => error);
    expect(streamed).toBeInstanceOf(OpenAI.BadRequestError);
    expect(streamed).toMatchObject({ status: 400, param: 'stream' });
    expect(await client.responses.cancel(foreground.id).catch((error: unknown) => error)).toMatchObject({
      status: 400,
    });
    const unknown = await readEvents('resp_nothing_1_1_2', undefined).catch((error: unknown) => error);
    expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
    // Bad retrieve queries are 400s in OpenAI's shape, naming the parameter.
    const background = await client.responses.create({ model: 'echo', input: 'hi', background: true });
    for (const [query, param] of [
      ['stream=yes', 'stream'],
      ['stream=true&starting_after=x', 'starting_after'],
      ['starting_after=3', 'starting_after'],
      ['include=message.input_image.image_url', 'include'],
    ]) {
      const response = await fetch(`${tailgate.baseURL}/responses/${background.id}?${query}`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(response.status, query).toBe(400);
      expect(((await response.json()) as { error: unknown }).error, query).toMatchObject({
        type: 'invalid_request_error',
        param,
      });
    }
  });
});

import OpenAI from 'openai';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { sessionLogFor } from '../../functions/services.ts';
import { parseServiceConfig } from '../../lib/config.ts';
import { responseId } from '../../lib/openai/ids.ts';
import { idGeneration } from '../../lib/session/log/rewind.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { clientInProcess, long, startTailgate, TOKEN } from './server.ts';

// A streamed foreground response (`stream: true`, no `background`) whose client lost its stream
// resumes with the official client's `responses.retrieve(id, {stream: true, starting_after})`:
// its turn journaled its events, and the rest come numbered as its own stream numbered them,
// ending with the same terminal event. The model is a loopback OpenAI-compatible provider that
// streams a few words, then waits for the test's gate (so the turn runs while the client resumes).
let provider: FakeProvider;
let tailgate: Awaited<ReturnType<typeof startTailgate>>;
let client: OpenAI;
const WORDS = 12;
/** Provider chunks sent before the gate: the role chunk and the first words. */
const BEFORE_GATE = 8;
const gates = new Map<string, { promise: Promise<void>; open: () => void }>();

function gate(name: string) {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  gates.set(name, { promise, open });
  return gates.get(name)!;
}

/** A chat completion stream of `WORDS` words, one chunk each; `broken` stops before its end. */
function answer(broken = false): string {
  const chunk = (delta: object, finish: string | null = null) => {
    const choices = [{ index: 0, delta, finish_reason: finish }];
    return `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices })}\n\n`;
  };
  const words = Array.from({ length: WORDS }, (_, index) => chunk({ content: `w${index} ` }));
  if (broken) return `${chunk({ role: 'assistant', content: '' })}${words.join('')}data: {"broken\n\n`;
  return `${chunk({ role: 'assistant', content: '' })}${words.join('')}${chunk({}, 'stop')}data: [DONE]\n\n`;
}
/** The chat completion of a call not streamed: the same words at once. */
function whole() {
  const message = { role: 'assistant', refusal: null, content: expectedText };
  return {
    id: 'c',
    object: 'chat.completion',
    created: 1,
    model: 'm',
    choices: [{ index: 0, message, logprobs: null, finish_reason: 'stop' }],
    usage: { prompt_tokens: 10, completion_tokens: WORDS, total_tokens: 10 + WORDS },
  };
}
const expectedText = Array.from({ length: WORDS }, (_, index) => `w${index} `).join('');

beforeAll(async () => {
  provider = await startFakeProvider((request) => {
    const input = JSON.stringify(request.body);
    const name = [...gates.keys()].find((key) => input.includes(key));
    const until = name ? gates.get(name)!.promise : Promise.resolve();
    // A call not streamed (a response created without `stream`) is answered whole at the gate.
    if (!(request.body as { stream?: boolean }).stream) return { json: whole(), gate: until };
    return { sse: answer(input.includes('break')), pause: { after: BEFORE_GATE, until } };
  });
  tailgate = await startTailgate({
    OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
    MODEL_ALIASES: 'slow=openai-compatible:fake',
    MODEL_MAX_RETRIES: '0',
    TURN_LEASE_MS: '3000',
  });
  client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
});
afterAll(async () => {
  await tailgate.close();
  await provider.close();
});

/** Reads `stream` until `stop` says so after an event (then disconnects), or to its end. */
async function readUntil(
  stream: AsyncIterable<ResponseStreamEvent>,
  stop: (events: ResponseStreamEvent[]) => boolean = () => false,
): Promise<ResponseStreamEvent[]> {
  const events: ResponseStreamEvent[] = [];
  for await (const event of stream) {
    events.push(event);
    if (stop(events)) break;
  }
  return events;
}

const deltas = (events: ResponseStreamEvent[]) => events.filter((event) => event.type === 'response.output_text.delta');
const textOf = (events: ResponseStreamEvent[]) =>
  deltas(events)
    .map((event) => (event.type === 'response.output_text.delta' ? event.delta : ''))
    .join('');

/**
 * A streamed foreground response whose stream the client cuts after its `cut`th text delta, while
 * the provider waits at its gate: the events the client got, and the response's id.
 */
async function cutStream(name: string, input: string, cut: number) {
  const opened = gate(name);
  const stream = await client.responses.create({
    model: 'slow',
    input: `${name} ${input}`,
    instructions: 'answer in words',
    temperature: 0.5,
    metadata: { case: name },
    stream: true,
  });
  const first = await readUntil(stream, (events) => deltas(events).length === cut);
  const id = first[0]?.type === 'response.created' ? first[0].response.id : '';
  return { first, id, open: opened.open };
}

describe('the official openai client: resuming a streamed foreground response', () => {
  it('follows the rest of a cut stream after starting_after, numbered as its stream numbered them', async () => {
    const { first, id, open } = await cutStream('gate-a', 'resume me', 4);
    expect(first.map((event) => event.sequence_number)).toEqual(first.map((_, index) => index));
    // Running (the provider waits at its gate): retrieve answers it in progress.
    expect(await client.responses.retrieve(id)).toMatchObject({
      id,
      status: 'in_progress',
      background: false,
      output: [],
      completed_at: null,
      usage: null,
    });
    const resumed = await client.responses.retrieve(id, {
      stream: true,
      starting_after: first.at(-1)!.sequence_number,
    });
    const rest: ResponseStreamEvent[] = [];
    for await (const event of resumed) {
      // The first event came while the turn ran: the rest of it comes live.
      if (rest.length === 0) open();
      rest.push(event);
    }
    const whole = [...first, ...rest];
    expect(whole.map((event) => event.sequence_number)).toEqual(whole.map((_, index) => index));
    expect(textOf(whole)).toBe(expectedText);
    // It ends as the stream would have: response.completed with the object retrieve answers.
    const ended = await client.responses.retrieve(id);
    expect(ended).toMatchObject({ status: 'completed', temperature: 0.5, metadata: { case: 'gate-a' } });
    expect(whole.at(-1)).toEqual({ type: 'response.completed', sequence_number: whole.length - 1, response: ended });
    // A replay from the start is the whole stream, its response.created included; from any point, the rest.
    expect(await readUntil(await client.responses.retrieve(id, { stream: true }))).toEqual(whole);
    for (const after of [0, 1, 5, whole.length - 2]) {
      const replayed = await readUntil(await client.responses.retrieve(id, { stream: true, starting_after: after }));
      expect(replayed).toEqual(whole.slice(after + 1));
    }
  });

  it('gives an uninterrupted stream again whole, to its response.completed', async () => {
    gate('gate-b').open();
    const stream = await client.responses.create({ model: 'slow', input: 'gate-b whole', stream: true });
    const whole = await readUntil(stream);
    expect(whole.at(-1)?.type).toBe('response.completed');
    const id = whole[0]?.type === 'response.created' ? whole[0].response.id : '';
    expect(await readUntil(await client.responses.retrieve(id, { stream: true }))).toEqual(whole);
  });

  it('replays a streamed response that compacted with its compaction item, before its response.completed', async () => {
    const context_management = [{ type: 'compaction' as const, compact_threshold: 100 }];
    const first = await client.responses.create({ model: 'echo', input: long('alpha'), context_management });
    const stream = await client.responses.create({
      model: 'echo',
      input: long('bravo'),
      previous_response_id: first.id,
      context_management,
      stream: true,
    });
    const whole = await readUntil(stream);
    expect(whole.at(-2)).toMatchObject({ type: 'response.output_item.done', item: { type: 'compaction' } });
    const id = whole[0]?.type === 'response.created' ? whole[0].response.id : '';
    expect(await readUntil(await client.responses.retrieve(id, { stream: true, starting_after: 1 }))).toEqual(
      whole.slice(2),
    );
  });

  it('resumes a stream that failed after its first events to the same response.failed', async () => {
    const { first, id, open } = await cutStream('gate-c', 'break', 2);
    open();
    const rest = await readUntil(
      await client.responses.retrieve(id, { stream: true, starting_after: first.at(-1)!.sequence_number }),
    );
    const whole = [...first, ...rest];
    expect(whole.map((event) => event.sequence_number)).toEqual(whole.map((_, index) => index));
    const ended = await client.responses.retrieve(id);
    expect(ended).toMatchObject({ status: 'failed', error: { code: expect.any(String) } });
    expect(whole.at(-1)).toEqual({ type: 'response.failed', sequence_number: whole.length - 1, response: ended });
    expect(await readUntil(await client.responses.retrieve(id, { stream: true }))).toEqual(whole);
  });

  it('sends nothing more to a client at or past the terminal event of a response that ended', async () => {
    const completed = await readUntil(await client.responses.create({ model: 'echo', input: 'ended', stream: true }));
    const { first, id: failedId, open } = await cutStream('gate-e', 'break', 2);
    open();
    const failed = [
      ...first,
      ...(await readUntil(
        await client.responses.retrieve(failedId, { stream: true, starting_after: first.at(-1)!.sequence_number }),
      )),
    ];
    for (const whole of [completed, failed]) {
      const id = whole[0]?.type === 'response.created' ? whole[0].response.id : '';
      const last = whole.at(-1)!.sequence_number;
      expect(whole.at(-1)?.type).toMatch(/^response\.(completed|failed)$/);
      for (const after of [last, last + 1, last + 100]) {
        const raw = await fetch(`${tailgate.baseURL}/responses/${id}?stream=true&starting_after=${after}`, {
          headers: { authorization: `Bearer ${TOKEN}` },
        });
        expect(raw.status).toBe(200);
        // The stream ends with nothing in it: the client has had every event, its terminal one too.
        expect(await raw.text()).toBe('');
        expect(await readUntil(await client.responses.retrieve(id, { stream: true, starting_after: after }))).toEqual(
          [],
        );
      }
    }
    // A 200, not the 204 the native events route answers a reader that has its turn's end: the
    // official client refuses a stream without a body, where it ends the empty one above.
    const noContent = new OpenAI({
      apiKey: TOKEN,
      baseURL: tailgate.baseURL,
      maxRetries: 0,
      fetch: async () => new Response(null, { status: 204 }),
    });
    const refused = await readUntil(await noContent.responses.retrieve('resp_x', { stream: true, starting_after: 1 }))
      .then(() => undefined)
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.OpenAIError);
    expect(refused).toMatchObject({ message: 'Attempted to iterate over a response with no body' });
  });

  it('still refuses stream=true for a foreground response that was not streamed', async () => {
    const plain = await client.responses.create({ model: 'echo', input: 'not streamed' });
    const refused = await client.responses.retrieve(plain.id, { stream: true }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused).toMatchObject({ status: 400, param: 'stream' });
  });
});

describe('a resumed foreground stream whose response object was not kept', () => {
  it('ends, a few seconds after its turn ended, with the response as retrieve answers it', async () => {
    const store = new FaultyStore(new MemoryStore());
    const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '3000' };
    const app = createApp({ store: () => store, readEnvironment: () => environment, log: () => {} });
    const local = clientInProcess(app, TOKEN);
    // Its process could not write the object: GET rebuilds it from the conversation.
    store.failWhen(({ operation, key }) => operation === 'put' && key.includes('/openai/'));
    const whole = await readUntil(await local.responses.create({ model: 'echo', input: 'unkept', stream: true }));
    const id = whole[0]?.type === 'response.created' ? whole[0].response.id : '';
    const replayed = await readUntil(await local.responses.retrieve(id, { stream: true, starting_after: 1 }));
    expect(replayed.slice(0, -1)).toEqual(whole.slice(2, -1));
    expect(replayed.at(-1)).toEqual({
      type: 'response.completed',
      sequence_number: whole.length - 1,
      response: await local.responses.retrieve(id),
    });
    expect(textOf(replayed)).toBe('echo: unkept');
  });
});

/** An app in this process on `store`, with the gated provider, and an official client on it. */
function localApp(store: ObjectStore, env: Record<string, string> = {}, clock?: () => Date) {
  const environment = {
    API_TOKEN: TOKEN,
    DEFAULT_MODEL: 'echo',
    OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
    MODEL_ALIASES: 'slow=openai-compatible:fake',
    MODEL_MAX_RETRIES: '0',
    TURN_LEASE_MS: '3000',
    ...env,
  };
  const app = createApp({
    store: () => store,
    readEnvironment: () => environment,
    log: () => {},
    ...(clock ? { clock } : {}),
  });
  const local = clientInProcess(app, TOKEN);
  return { app, local };
}

/** An app whose conversation's first response (not streamed) waits at the gate until `opened.open()`. */
async function heldResponse() {
  const store = new MemoryStore();
  const { app, local } = localApp(store);
  const conversation = await local.conversations.create({});
  const opened = gate('unjournaled');
  const created = local.responses.create({ model: 'slow', input: 'unjournaled', conversation: conversation.id });
  return { store, app, local, conversation, opened, created };
}

describe('stream=true for a foreground response that was not streamed, while its turn runs', () => {
  it('stops waiting for its journal once its client went away', async () => {
    const { store, app, local, conversation, opened, created } = await heldResponse();
    // Its first response in the conversation: turn 1, its input seq 1, its output from seq 2.
    const scope = await sessionLogFor(store, parseServiceConfig({ API_TOKEN: TOKEN })).scope(conversation.id);
    const generation = idGeneration(scope, 1);
    const id = responseId({
      sessionId: conversation.id,
      turn: 1,
      inputSeq: 1,
      outputSeq: 2,
      ...(generation ? { generation } : {}),
    });
    while ((await local.responses.retrieve(id).catch(() => null))?.status !== 'in_progress')
      await new Promise((resolve) => setTimeout(resolve, 20));
    const leaving = new AbortController();
    const resumed = app.request(`/v1/responses/${id}?stream=true`, {
      headers: { authorization: `Bearer ${TOKEN}` },
      signal: leaving.signal,
    });
    leaving.abort();
    // Answered while the turn still runs (its provider waits at the gate): nobody reads it.
    expect((await resumed).status).toBe(499);
    opened.open();
    expect(await created).toMatchObject({ id, status: 'completed' });
    const refused = await local.responses.retrieve(id, { stream: true }).catch((error: unknown) => error);
    expect(refused).toMatchObject({ status: 400, param: 'stream' });
  });
});

describe('GET .../turns/{turn}/events of a turn not streamed, while it runs', () => {
  it('stops waiting for its journal once its client went away', async () => {
    const { app, conversation, opened, created } = await heldResponse();
    const turns = `/v1/sessions/${conversation.id}/turns`;
    const headers = { authorization: `Bearer ${TOKEN}` };
    while (
      ((await (await app.request(`${turns}/1`, { headers })).json()) as { status?: string }).status !== 'in_progress'
    )
      await new Promise((resolve) => setTimeout(resolve, 20));
    const leaving = new AbortController();
    const events = app.request(`${turns}/1/events`, { headers, signal: leaving.signal });
    leaving.abort();
    // Answered while the turn still runs (its provider waits at the gate): nobody reads it.
    expect((await events).status).toBe(499);
    opened.open();
    expect(await created).toMatchObject({ status: 'completed' });
    // Once it ended it reads as a turn without a journal.
    expect((await app.request(`${turns}/1/events`, { headers })).status).toBe(404);
  });
});

describe('a resumed foreground stream whose response object was not kept, resumed later', () => {
  it('ends at once with the response as retrieve answers it, whatever the lease', async () => {
    const store = new FaultyStore(new MemoryStore());
    let later = 0;
    const { local } = localApp(store, { TURN_LEASE_MS: '600000' }, () => new Date(Date.now() + later));
    store.failWhen(({ operation, key }) => operation === 'put' && key.includes('/openai/'));
    const whole = await readUntil(await local.responses.create({ model: 'echo', input: 'unkept later', stream: true }));
    const id = whole[0]?.type === 'response.created' ? whole[0].response.id : '';
    // Resumed an hour after its turn ended: its object is not coming.
    later = 3_600_000;
    const replayed = await readUntil(await local.responses.retrieve(id, { stream: true, starting_after: 1 }));
    expect(replayed.at(-1)).toEqual({
      type: 'response.completed',
      sequence_number: whole.length - 1,
      response: await local.responses.retrieve(id),
    });
  });
});

/**
 * A streamed response of the slow model whose first journal batch lands; then the store refuses
 * the puts `fails` names, and its client reads every word live before it lets its stream go.
 */
async function liveOnlyStream(name: string, fails: (call: { operation: string; key: string }) => boolean) {
  const store = new FaultyStore(new MemoryStore());
  const owner = localApp(store);
  const opened = gate(name);
  const stream = await owner.local.responses.create({ model: 'slow', input: `${name} live only`, stream: true });
  const seen: ResponseStreamEvent[] = [];
  const events = stream[Symbol.asyncIterator]();
  const readDeltas = async (count: number) => {
    while (deltas(seen).length < count) seen.push((await events.next()).value as ResponseStreamEvent);
  };
  await readDeltas(3);
  const journaled = async () => (await store.inner.list('')).objects.some((object) => object.key.includes('/events/'));
  while (!(await journaled())) await new Promise((resolve) => setTimeout(resolve, 50));
  store.failWhen(fails);
  opened.open();
  await readDeltas(WORDS);
  await events.return?.();
  const id = seen[0]?.type === 'response.created' ? seen[0].response.id : '';
  return { store, owner, id, after: seen.at(-1)!.sequence_number };
}

describe('a resumed foreground stream whose owner died after events it never journaled', () => {
  it('ends with response.failed for a client past every event its journal gives', async () => {
    // Its first batch lands (the events so far), then its process loses the store: nothing more of
    // it is written, neither a batch nor a renewal nor its completion. Its client sees more, live.
    const { store, id, after } = await liveOnlyStream('gate-d', ({ operation }) => operation === 'put');
    // A process an hour later finds its lease run out: the client resumes after the last event it saw.
    const { local } = localApp(store.inner, {}, () => new Date(Date.now() + 3_600_000));
    const rest = await readUntil(await local.responses.retrieve(id, { stream: true, starting_after: after }));
    const ended = await local.responses.retrieve(id);
    expect(ended).toMatchObject({ status: 'failed', error: { code: 'lease_expired' } });
    expect(rest).toEqual([{ type: 'response.failed', sequence_number: expect.any(Number), response: ended }]);
    // From the start it is the journal's stream: its response.failed once, at its end.
    const whole = await readUntil(await local.responses.retrieve(id, { stream: true }));
    expect(whole.at(-1)).toEqual(rest[0]);
    expect(whole.filter((event) => event.type === 'response.failed')).toHaveLength(1);
    expect(rest[0]!.sequence_number).toBeLessThan(after);
  });

  it('ends with response.failed for a client whose last event has the number its journal gives that end', async () => {
    const { store, id } = await liveOnlyStream('gate-f', ({ operation }) => operation === 'put');
    const { local } = localApp(store.inner, {}, () => new Date(Date.now() + 3_600_000));
    const whole = await readUntil(await local.responses.retrieve(id, { stream: true }));
    const end = whole.at(-1)!;
    expect(end).toMatchObject({ type: 'response.failed', response: { error: { code: 'lease_expired' } } });
    // Its owner streamed live past its journal: the event a client saw last may bear the number
    // the journal gives the end. No stream sent that end live before its owner died.
    const rest = await readUntil(
      await local.responses.retrieve(id, { stream: true, starting_after: end.sequence_number }),
    );
    expect(rest).toEqual([end]);
  });
});

describe('a resumed foreground stream whose owner died after its completion, before its last batch', () => {
  it('ends with response.completed for a client past every event its journal gives', async () => {
    // Its first batch lands, then no batch of its journal and no response object is written: its
    // completion lands, and its client sees every word live, then loses its stream before its end.
    const { store, owner, id, after } = await liveOnlyStream(
      'gate-c',
      ({ operation, key }) => operation === 'put' && /\/(events|openai)\//.test(key),
    );
    while ((await owner.local.responses.retrieve(id)).status === 'in_progress')
      await new Promise((resolve) => setTimeout(resolve, 20));
    const { local } = localApp(store.inner, {}, () => new Date(Date.now() + 3_600_000));
    // A process an hour later ends its journal as its owner would have: the client resumes after
    // the last event it saw, past every event the journal gives, and still learns how it ended.
    const rest = await readUntil(await local.responses.retrieve(id, { stream: true, starting_after: after }));
    const ended = await local.responses.retrieve(id);
    expect(ended).toMatchObject({ status: 'completed' });
    expect(rest).toEqual([{ type: 'response.completed', sequence_number: expect.any(Number), response: ended }]);
    expect(rest[0]!.sequence_number).toBeLessThan(after);
  });
});

describe('a retrieve with Last-Event-ID of a response still running', () => {
  it('answers once its next event comes, from the event after it', async () => {
    const { app, local } = localApp(new MemoryStore());
    const opened = gate('gate-g');
    const stream = await local.responses.create({ model: 'slow', input: 'gate-g last event id', stream: true });
    const first = await readUntil(stream, (events) => deltas(events).length === 2);
    const id = first[0]?.type === 'response.created' ? first[0].response.id : '';
    const lastEventId = String(first.at(-1)!.sequence_number);
    const headers = { authorization: `Bearer ${TOKEN}`, 'last-event-id': lastEventId };
    // The provider waits at its gate: no event after the reader's comes until it opens.
    const waiting = app.request(`/v1/responses/${id}?stream=true`, { headers });
    opened.open();
    const rest = await waiting;
    expect(rest.status).toBe(200);
    const ids = [...(await rest.text()).matchAll(/^id: (\d+)$/gm)].map((match) => Number(match[1]));
    expect(ids[0]).toBe(Number(lastEventId) + 1);
    expect(ids).toEqual(ids.map((_, index) => ids[0]! + index));
  });
});

/**
 * The SSE id of the last event of a raw retrieve of `id`'s events through `app` (an EventSource's
 * view), from `Last-Event-ID` `lastEventId`, and the status it was answered.
 */
async function eventSourceEnd(app: ReturnType<typeof localApp>['app'], id: string, lastEventId?: string) {
  const response = await app.request(`http://tailgate.test/v1/responses/${id}?stream=true`, {
    headers: {
      authorization: `Bearer ${TOKEN}`,
      ...(lastEventId !== undefined ? { 'last-event-id': lastEventId } : {}),
    },
  });
  const ids = [...(await response.text()).matchAll(/^id: (.*)$/gm)].map((match) => match[1]!);
  return { status: response.status, lastId: ids.at(-1) };
}

describe('an EventSource reconnecting after an end no stream sent live', () => {
  it('gets a 204 with the SSE id of a lease_expired end, which it got once', async () => {
    const { store, id } = await liveOnlyStream('gate-e', ({ operation }) => operation === 'put');
    const { app } = localApp(store.inner, {}, () => new Date(Date.now() + 3_600_000));
    const first = await eventSourceEnd(app, id, '0');
    expect(first.status).toBe(200);
    expect(await eventSourceEnd(app, id, first.lastId)).toEqual({ status: 204, lastId: undefined });
  });

  it('gets a 204 with the SSE id of the end of a response whose object was not kept', async () => {
    const store = new FaultyStore(new MemoryStore());
    let later = 0;
    const { app, local } = localApp(store, { TURN_LEASE_MS: '600000' }, () => new Date(Date.now() + later));
    store.failWhen(({ operation, key }) => operation === 'put' && key.includes('/openai/'));
    const whole = await readUntil(await local.responses.create({ model: 'echo', input: 'unkept again', stream: true }));
    const id = whole[0]?.type === 'response.created' ? whole[0].response.id : '';
    later = 3_600_000;
    const first = await eventSourceEnd(app, id, '1');
    expect(first.status).toBe(200);
    expect(await eventSourceEnd(app, id, first.lastId)).toEqual({ status: 204, lastId: undefined });
  });
});

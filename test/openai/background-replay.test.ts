import type { Response, ResponseStreamEvent } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { createApp, createTurnRunner, type AppOptions } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { parseSse } from '../http/http-suite.ts';
import { clientInProcess, compactingResponse } from './server.ts';

// Background responses streamed again (`GET /v1/responses/{id}?stream=true`) and retrieved:
// every replay and retrieve answers the same object and the same events, whatever happened
// since (time passing, a later compaction, a second delivery of the turn, a storage error).
// The turns run in-process through the queue consumer (createTurnRunner), each when the test
// says, and the app's clock is a fake one the test moves.
const TOKEN = 'replay-token';
const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '3000' };
type Completed = Extract<ResponseStreamEvent, { type: 'response.completed' }>;

function world(store: ObjectStore = new MemoryStore(), env: Record<string, string> = environment) {
  let now = Date.parse('2030-01-01T00:00:00Z');
  const sent: BackgroundTurn[] = [];
  const options: AppOptions = {
    store: () => store,
    readEnvironment: () => env,
    log: () => {},
    clock: () => new Date(now),
    queueTurn: () => async (run) => void sent.push(run),
  };
  const app = createApp(options);
  const client = clientInProcess(app, TOKEN);
  const runner = createTurnRunner(options);
  return {
    client,
    sent,
    /** A GET of the native API. */
    get: async (path: string) => app.request(path, { headers: { authorization: `Bearer ${TOKEN}` } }, env),
    advance: (seconds: number) => {
      now += seconds * 1000;
    },
    /** Runs the next queued background turn as the queue consumer would, and the work it left. */
    async consume(run = sent.shift()!) {
      const background: Promise<unknown>[] = [];
      const outcome = await runner(run, env, (task) => void background.push(task));
      while (background.length > 0) await Promise.all(background.splice(0));
      return outcome;
    },
    async replay(id: string): Promise<ResponseStreamEvent[]> {
      const events: ResponseStreamEvent[] = [];
      for await (const event of await client.responses.retrieve(id, { stream: true })) events.push(event);
      return events;
    },
  };
}

describe('a background response streamed again', () => {
  it("delivered twice, carries the answer once, as response.completed's output", async () => {
    const store = new FaultyStore(new MemoryStore());
    const { client, sent, consume, replay } = world(store);
    const created = await client.responses.create({ model: 'echo', input: 'hello there', background: true });
    // Its completion is not stored: the turn stays open, and the queue delivers it again.
    store.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.done'), { times: 2 });
    const run = sent[0]!;
    expect(await consume(run)).toEqual({ retryAfterSeconds: expect.any(Number) });
    expect(await consume(run)).toBe('done');
    const events = await replay(created.id);
    const completed = events.at(-1) as Completed;
    expect(completed.type).toBe('response.completed');
    expect(completed.response.output_text).toBe('echo: hello there');
    const deltas = events.flatMap((event) => (event.type === 'response.output_text.delta' ? [event.delta] : []));
    expect(deltas.join('')).toBe(completed.response.output_text);
    const done = events.filter((event) => event.type === 'response.output_item.done');
    expect(done.map((event) => event.item)).toEqual(completed.response.output);
    // Numbered the same on every connection.
    expect(await replay(created.id)).toEqual(events);
    const after = events[3]!.sequence_number;
    const resumed: ResponseStreamEvent[] = [];
    for await (const event of await client.responses.retrieve(created.id, { stream: true, starting_after: after }))
      resumed.push(event);
    expect(resumed).toEqual(events.slice(4));
  });

  it.each([
    ['function_call', 'call lookup {"q": "ab"}'],
    ['message', 'hello there'],
  ] as const)(
    'delivered again under a live reader, closes the %s its first run left open, then ends',
    async (type, input) => {
      const store = new FaultyStore(new MemoryStore());
      const { client, sent, consume, replay } = world(store);
      const tools = [{ type: 'function' as const, name: 'lookup', strict: false, parameters: { type: 'object' } }];
      const created = await client.responses.create({ model: 'echo', input, tools, background: true });
      // The first run's completion is not stored: it stops with its last item's done events held.
      store.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.done'), { times: 2 });
      const run = sent[0]!;
      expect(await consume(run)).toEqual({ retryAfterSeconds: expect.any(Number) });
      const stream = (await client.responses.retrieve(created.id, { stream: true }))[Symbol.asyncIterator]();
      const live: ResponseStreamEvent[] = [];
      // The reader follows the first run, then the queue delivers the turn again.
      while (live.at(-1)?.type !== 'response.output_item.added') live.push((await stream.next()).value);
      expect(await consume(run)).toBe('done');
      for (let next = await stream.next(); !next.done; next = await stream.next()) live.push(next.value);
      // The reader holds the first run's item: the second run's events are numbered, not sent.
      const [terminal, ...rest] = live.toReversed();
      expect(rest.toReversed().map((event) => event.sequence_number)).toEqual(rest.map((_, index) => index));
      expect(terminal!.sequence_number).toBeGreaterThan(rest.length);
      // Every item added is done before the end, and no output index is added twice.
      const open = new Map<number, string>();
      const indices = new Set<number>();
      for (const event of live) {
        if (event.type === 'response.output_item.added') {
          expect(indices.has(event.output_index)).toBe(false);
          indices.add(event.output_index);
          open.set(event.output_index, event.item.id!);
        } else if (event.type === 'response.output_item.done') {
          expect(open.get(event.output_index)).toBe(event.item.id);
          open.delete(event.output_index);
        }
      }
      expect(open.size).toBe(0);
      const done = live.filter((event) => event.type === 'response.output_item.done');
      const completed = terminal as Completed;
      expect(completed.type).toBe('response.completed');
      // The first run's item, cut by its end, then the response as a retrieve answers it.
      expect(done.map((event) => event.item)).toEqual([expect.objectContaining({ type, status: 'incomplete' })]);
      expect(completed.response.output).toEqual((await client.responses.retrieve(created.id)).output);
      // Resumed at any point of the first run, the stream goes on as the live one did.
      for (const after of live.slice(2, -1).map((event) => event.sequence_number)) {
        const resumed: ResponseStreamEvent[] = [];
        for await (const event of await client.responses.retrieve(created.id, { stream: true, starting_after: after }))
          resumed.push(event);
        expect(resumed).toEqual(live.slice(after + 1));
      }
      // From its start, the stream carries the second run's items only, as response.completed has
      // them, numbered as the journal numbers them: from the one after the first run's events.
      const replayed = await replay(created.id);
      expect(replayed.slice(0, 2)).toEqual(live.slice(0, 2));
      expect(replayed.at(-1)).toEqual(completed);
      const secondRun = replayed.slice(2, -1);
      expect(secondRun[0]!.sequence_number).toBe(rest.length);
      const items = secondRun.filter((event) => event.type === 'response.output_item.done').map((event) => event.item);
      expect(items).toEqual(completed.response.output);
      // Resumed inside the second run, it goes on as from its start.
      const inside = secondRun[0]!.sequence_number;
      const resumed: ResponseStreamEvent[] = [];
      for await (const event of await client.responses.retrieve(created.id, { stream: true, starting_after: inside }))
        resumed.push(event);
      expect(resumed).toEqual(replayed.slice(3));
    },
  );

  it.each([
    ['function_call', 'call lookup {"q": "ab"}'],
    ['message', 'hello there'],
  ] as const)(
    "followed across a second delivery by the openai client's stream helper, ends as retrieved (%s)",
    async (_, input) => {
      const store = new FaultyStore(new MemoryStore());
      const { client, sent, consume } = world(store);
      const tools = [{ type: 'function' as const, name: 'lookup', strict: false, parameters: { type: 'object' } }];
      const created = await client.responses.create({ model: 'echo', input, tools, background: true });
      store.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.done'), { times: 2 });
      const run = sent[0]!;
      expect(await consume(run)).toEqual({ retryAfterSeconds: expect.any(Number) });
      // The helper follows the first run live, then the queue delivers the turn again.
      const helper = client.responses.stream({ response_id: created.id });
      const events = helper[Symbol.asyncIterator]();
      const live: ResponseStreamEvent[] = [];
      while (live.at(-1)?.type !== 'response.output_item.added') live.push((await events.next()).value);
      expect(await consume(run)).toBe('done');
      for (let next = await events.next(); !next.done; next = await events.next()) live.push(next.value);
      const retrieved = await client.responses.retrieve(created.id);
      // The helper adds its parse (`parsed`, `parsed_arguments`) to the items.
      expect((await helper.finalResponse()).output).toMatchObject(retrieved.output);
      expect(live.at(-1)).toMatchObject({ type: 'response.completed', response: { output: retrieved.output } });
      const indices = live.flatMap((event) =>
        event.type === 'response.output_item.added' ? [event.output_index] : [],
      );
      expect(new Set(indices).size).toBe(indices.length);
      // Resumed inside the first run, by the helper or by a plain retrieve, it ends the same.
      for (const after of live.slice(2, -1).map((event) => event.sequence_number)) {
        const resumed = client.responses.stream({ response_id: created.id, starting_after: after });
        expect((await resumed.finalResponse()).output).toMatchObject(retrieved.output);
        const plain: ResponseStreamEvent[] = [];
        for await (const event of await client.responses.retrieve(created.id, { stream: true, starting_after: after }))
          plain.push(event);
        expect(plain).toEqual(live.slice(after + 1));
      }
    },
  );

  it('delivered three times, followed from its start during the second run, ends as retrieved', async () => {
    const store = new FaultyStore(new MemoryStore());
    const { client, sent, consume, replay } = world(store);
    const created = await client.responses.create({ model: 'echo', input: 'hello there', background: true });
    store.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.done'), { times: 4 });
    const run = sent[0]!;
    expect(await consume(run)).toEqual({ retryAfterSeconds: expect.any(Number) });
    expect(await consume(run)).toEqual({ retryAfterSeconds: expect.any(Number) });
    // The helper follows the second run (the first one's events are not sent), then the third comes.
    const helper = client.responses.stream({ response_id: created.id });
    const events = helper[Symbol.asyncIterator]();
    const live: ResponseStreamEvent[] = [];
    while (live.at(-1)?.type !== 'response.output_item.added') live.push((await events.next()).value);
    expect(await consume(run)).toBe('done');
    for (let next = await events.next(); !next.done; next = await events.next()) live.push(next.value);
    const retrieved = await client.responses.retrieve(created.id);
    expect((await helper.finalResponse()).output).toMatchObject(retrieved.output);
    const added = live.filter((event) => event.type === 'response.output_item.added');
    expect(added.map((event) => event.output_index)).toEqual([0]);
    // Resumed inside the second run, the stream goes on as the live one did; from the start, it
    // carries the third run's items only.
    const after = added[0]!.sequence_number;
    const resumed: ResponseStreamEvent[] = [];
    for await (const event of await client.responses.retrieve(created.id, { stream: true, starting_after: after }))
      resumed.push(event);
    expect(resumed).toEqual(live.slice(live.indexOf(added[0]!) + 1));
    const replayed = await replay(created.id);
    expect(replayed[2]!.sequence_number).toBeGreaterThan(live.at(-2)!.sequence_number);
    const done = replayed.filter((event) => event.type === 'response.output_item.done');
    expect(done.map((event) => event.item)).toEqual(retrieved.output);
  });

  it('retried with its Idempotency-Key, streams the first response object, created_at included', async () => {
    const { client, sent, advance, consume } = world();
    const request = { model: 'echo', input: 'hello', background: true, stream: true } as const;
    const headers = { headers: { 'idempotency-key': 'bg-stream-1' } };
    const read = async () => {
      const stream = await client.responses.create(request, headers);
      // The first runs its turn; the retry has none to run.
      if (sent.length > 0) expect(await consume()).toBe('done');
      const events: ResponseStreamEvent[] = [];
      for await (const event of stream) events.push(event);
      return events;
    };
    const [created] = (await read()) as [Extract<ResponseStreamEvent, { type: 'response.created' }>];
    advance(5);
    const again = await read();
    const retried = again[0] as Extract<ResponseStreamEvent, { type: 'response.created' }>;
    expect(retried.response.id).toBe(created.response.id);
    const kept = await client.responses.retrieve(created.response.id);
    expect(retried.response.created_at).toBe(kept.created_at);
    expect(retried.response.created_at).toBe(created.response.created_at);
    const done = again.at(-1) as Completed;
    expect(done.type).toBe('response.completed');
    expect(done.response.created_at).toBe(kept.created_at);
  });

  it('has the completed_at of when its turn ended, the same on every replay and retrieve', async () => {
    const { client, advance, consume, replay } = world();
    const created = await client.responses.create({ model: 'echo', input: 'hello', background: true });
    advance(3);
    expect(await consume()).toBe('done');
    const endedAt = created.created_at + 3;
    advance(7);
    const ended = await client.responses.retrieve(created.id);
    expect(ended.status).toBe('completed');
    expect(ended.completed_at).toBe(endedAt);
    const first = ((await replay(created.id)).at(-1) as Completed).response;
    expect(first.completed_at).toBe(endedAt);
    advance(11);
    expect(((await replay(created.id)).at(-1) as Completed).response.completed_at).toBe(endedAt);
    expect((await client.responses.retrieve(created.id)).completed_at).toBe(endedAt);
  });

  it('that compacted, answers its compaction item the same after a later compaction too', async () => {
    const { client, consume, replay } = world();
    const first = await compactingResponse(client, 'alpha');
    const second = await compactingResponse(client, 'bravo', { after: first.id, background: true });
    expect(await consume()).toBe('done');
    const ended: Response = await client.responses.retrieve(second.id);
    expect(ended.output.map((item) => item.type)).toEqual(['message', 'compaction']);
    const before = await replay(second.id);
    expect((before.at(-1) as Completed).response.output).toEqual(ended.output);
    const third = await compactingResponse(client, 'charlie', { after: second.id });
    expect(third.output.some((item) => item.type === 'compaction')).toBe(true);
    expect(await replay(second.id)).toEqual(before);
    expect((await client.responses.retrieve(second.id)).output).toEqual(ended.output);
  });

  it("whose runner died ends with response.failed once its lease ran out, as its turn's events do", async () => {
    const store = new FaultyStore(new MemoryStore());
    const { client, advance, consume, replay, get } = world(store);
    // Two responses, each of its own conversation, whose runners stop with the turn open and no
    // completion stored, and never come back.
    store.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.done'));
    const first = await client.responses.create({ model: 'echo', input: 'alpha', background: true });
    const second = await client.responses.create({ model: 'echo', input: 'bravo', background: true });
    expect(await consume()).toEqual({ retryAfterSeconds: expect.any(Number) });
    expect(await consume()).toEqual({ retryAfterSeconds: expect.any(Number) });
    store.heal();
    advance(4);
    const events = await replay(first.id);
    const deltas = events.flatMap((event) => (event.type === 'response.output_text.delta' ? [event.delta] : []));
    expect(deltas.join('')).toBe('echo: alpha');
    const failed = events.at(-1) as Extract<ResponseStreamEvent, { type: 'response.failed' }>;
    expect(failed.type).toBe('response.failed');
    expect(failed.response.error?.code).toBe('lease_expired');
    // The facade's message gives no native route to take the turn again; the native stream's does.
    expect(failed.response.error?.message).toMatch(/^the response did not complete before its lease expired/);
    expect(failed.response.error?.message).not.toContain('/v1/sessions');
    expect(await client.responses.retrieve(first.id)).toMatchObject({ status: 'failed' });
    const { session_id, turn } = (second as unknown as { tailgate: { session_id: string; turn: number } }).tailgate;
    const native = parseSse(await (await get(`/v1/sessions/${session_id}/turns/${turn}/events`)).text());
    expect(native[0]?.event).toBe('turn.started');
    expect(native.at(-1)).toMatchObject({ event: 'error', data: { error: { code: 'lease_expired' } } });
    expect(JSON.stringify(native.at(-1))).toContain(`POST /v1/sessions/${session_id}/turns`);
  });

  it('whose runner died, retrieved failed first, ends a resumed stream at once with that failure', async () => {
    // A lease of an hour, far past what the test may run: a stream waiting one after the close never ends here.
    const store = new FaultyStore(new MemoryStore());
    const { client, advance, consume } = world(store, { ...environment, TURN_LEASE_MS: String(3_600_000) });
    // Its runner stops with the turn open, its events journaled, and never comes back.
    store.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.done'));
    const created = await client.responses.create({ model: 'echo', input: 'alpha', background: true });
    expect(await consume()).toEqual({ retryAfterSeconds: expect.any(Number) });
    store.heal();
    advance(2 * 3600);
    // A retrieve finds its lease run out and closes it.
    const retrieved = await client.responses.retrieve(created.id);
    expect(retrieved).toMatchObject({ status: 'failed', error: { code: 'lease_expired' } });
    const resumed: ResponseStreamEvent[] = [];
    for await (const event of await client.responses.retrieve(created.id, { stream: true, starting_after: 1 }))
      resumed.push(event);
    const deltas = resumed.flatMap((event) => (event.type === 'response.output_text.delta' ? [event.delta] : []));
    expect(deltas.join('')).toBe('echo: alpha');
    const failed = resumed.at(-1) as Extract<ResponseStreamEvent, { type: 'response.failed' }>;
    expect(failed.type).toBe('response.failed');
    expect(failed.response.error).toEqual(retrieved.error);
    expect(resumed.filter((event) => event.type === 'response.failed')).toHaveLength(1);
  });

  it('whose runner never came is retrieved failed once its lease ran out, not queued', async () => {
    const { client, advance } = world();
    const created = await client.responses.create({ model: 'echo', input: 'alpha', background: true });
    expect(await client.responses.retrieve(created.id)).toMatchObject({ status: 'queued' });
    advance(4);
    const retrieved = await client.responses.retrieve(created.id);
    expect(retrieved).toMatchObject({ status: 'failed', error: { code: 'lease_expired' } });
    expect(retrieved.error?.message).not.toContain('/v1/sessions');
    expect(await client.responses.retrieve(created.id)).toEqual(retrieved);
  });

  it('does not end with response.failed when one read of its journal fails', async () => {
    const store = new FaultyStore(new MemoryStore());
    const { client, consume, replay } = world(store);
    const created = await client.responses.create({ model: 'echo', input: 'hello', background: true });
    expect(created.status).toBe('queued');
    expect(await consume()).toBe('done');
    store.failWhen(({ operation, key }) => operation === 'list' && key.includes('/events/'), { times: 1 });
    const events = await replay(created.id);
    expect(store.injected).toBe(1);
    expect(events.at(-1)?.type).toBe('response.completed');
    expect((events.at(-1) as Completed).response.output_text).toBe('echo: hello');
    expect(events).toEqual(await replay(created.id));
  });

  it('ends without a terminal event while its journal cannot be read, and resumes where it ended', async () => {
    const store = new FaultyStore(new MemoryStore());
    const { client, consume, replay } = world(store);
    const created = await client.responses.create({ model: 'echo', input: 'hello', background: true });
    expect(await consume()).toBe('done');
    const whole = await replay(created.id);
    store.failWhen(({ operation, key }) => operation === 'list' && key.includes('/events/'));
    const cut = await replay(created.id);
    expect(store.injected).toBe(2);
    expect(cut).toEqual(whole.slice(0, 2));
    store.heal();
    const resumed: ResponseStreamEvent[] = [];
    const after = { stream: true as const, starting_after: cut.at(-1)!.sequence_number };
    for await (const event of await client.responses.retrieve(created.id, after)) resumed.push(event);
    expect([...cut, ...resumed]).toEqual(whole);
  });
});

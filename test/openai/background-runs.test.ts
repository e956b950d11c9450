import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { createApp, createTurnRunner, type AppOptions } from '../../functions/app.ts';
import type { Model } from '../../lib/models/model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { clientInProcess } from './server.ts';

// A background response whose turn the queue delivered more than once, streamed by readers that
// each follow one run (lib/openai/journaled-response.ts): a run that added no item, a later run
// that failed, three runs with a reader of each. Every reader's events go on, resumed at any of
// them, as they did; no stream adds an output index twice, and each ends once, as retrieved.
const TOKEN = 'runs-token';
const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '3000' };
const TERMINAL = new Set(['response.completed', 'response.failed', 'response.incomplete']);

/**
 * `plan`: how each model call goes in turn (`fail`: it throws before any output, `cut`: after its
 * first piece of text), then all well.
 */
function world(plan: ('fail' | 'cut' | 'ok')[] = []) {
  const store = new FaultyStore(new MemoryStore());
  const sent: BackgroundTurn[] = [];
  let calls = 0;
  const options: AppOptions = {
    store: () => store,
    readEnvironment: () => environment,
    log: () => {},
    queueTurn: () => async (run) => void sent.push(run),
    wrapModel: (model: Model): Model => ({
      ...model,
      async *stream(request) {
        const how = plan[calls++];
        if (how === 'fail') throw new Error('the model broke');
        for await (const event of model.stream!(request)) {
          yield event;
          if (how === 'cut') throw new Error('the model broke');
        }
      },
    }),
  };
  const app = createApp(options);
  const client = clientInProcess(app, TOKEN);
  const runner = createTurnRunner(options);
  return {
    store,
    client,
    /** Runs the turn as the queue consumer would, and the work it left. */
    async consume(run = sent[0]!) {
      const background: Promise<unknown>[] = [];
      const outcome = await runner(run, environment, (task) => void background.push(task));
      while (background.length > 0) await Promise.all(background.splice(0));
      return outcome;
    },
    /** A stream of the response, read as far as `until` says, the rest by `rest`. */
    async follow(id: string, until: (event: ResponseStreamEvent) => boolean) {
      const stream = (await client.responses.retrieve(id, { stream: true }))[Symbol.asyncIterator]();
      const events: ResponseStreamEvent[] = [];
      while (events.length === 0 || !until(events.at(-1)!)) events.push((await stream.next()).value);
      return {
        events,
        async rest() {
          for (let next = await stream.next(); !next.done; next = await stream.next()) events.push(next.value);
          return events;
        },
      };
    },
    async read(id: string, after?: number) {
      const events: ResponseStreamEvent[] = [];
      const options =
        after === undefined ? { stream: true as const } : { stream: true as const, starting_after: after };
      for await (const event of await client.responses.retrieve(id, options)) events.push(event);
      return events;
    },
  };
}

/** One reader's stream: each output index added once and done before the end, and one terminal event, last. */
function expectWhole(events: ResponseStreamEvent[]) {
  const open = new Map<number, string>();
  const added = new Set<number>();
  for (const event of events) {
    if (event.type === 'response.output_item.added') {
      expect(added.has(event.output_index)).toBe(false);
      added.add(event.output_index);
      open.set(event.output_index, event.item.id!);
    } else if (event.type === 'response.output_item.done') {
      expect(open.get(event.output_index)).toBe(event.item.id);
      open.delete(event.output_index);
    }
  }
  expect(open.size).toBe(0);
  expect(events.filter((event) => TERMINAL.has(event.type))).toEqual([events.at(-1)]);
}

/** Resumed after each of a reader's events past the opening two, the stream goes on as the reader's did. */
async function expectResumable(read: (after: number) => Promise<ResponseStreamEvent[]>, events: ResponseStreamEvent[]) {
  for (const [index, event] of events.slice(0, -1).entries())
    if (event.sequence_number >= 2) expect(await read(event.sequence_number)).toEqual(events.slice(index + 1));
}

const doneFails = ({ operation, key }: { operation: string; key: string }) =>
  operation === 'put' && key.endsWith('.done');

describe('a background response delivered more than once', () => {
  it('whose first run added no item: a reader of that run follows the next, as a replay does', async () => {
    const { store, client, consume, follow, read } = world(['fail']);
    const created = await client.responses.create({ model: 'echo', input: 'hello there', background: true });
    // The first run fails before any output, and its close is not stored: the queue delivers it again.
    // (A run's close is tried twice when it completed, once when it failed.)
    store.failWhen(doneFails, { times: 1 });
    expect(await consume()).toEqual({ retryAfterSeconds: expect.any(Number) });
    const reader = await follow(created.id, (event) => event.type === 'response.in_progress');
    expect(await consume()).toBe('done');
    const live = await reader.rest();
    expectWhole(live);
    const retrieved = await client.responses.retrieve(created.id);
    expect(retrieved.status).toBe('completed');
    expect(live.at(-1)).toMatchObject({ type: 'response.completed', response: { output: retrieved.output } });
    const done = live.filter((event) => event.type === 'response.output_item.done');
    expect(done.map((event) => event.item)).toEqual(retrieved.output);
    expect(await read(created.id)).toEqual(live);
    await expectResumable((after) => read(created.id, after), live);
    const helper = client.responses.stream({ response_id: created.id });
    expect((await helper.finalResponse()).output).toMatchObject(retrieved.output);
  });

  it('whose later run failed mid-text: a reader of the first ends with its item, then the failure', async () => {
    const { store, client, consume, follow, read } = world(['ok', 'cut']);
    const created = await client.responses.create({ model: 'echo', input: 'hello there', background: true });
    store.failWhen(doneFails, { times: 2 });
    expect(await consume()).toEqual({ retryAfterSeconds: expect.any(Number) });
    const first = (event: ResponseStreamEvent) => event.type === 'response.output_text.delta';
    const reader = await follow(created.id, first);
    const helper = client.responses.stream({ response_id: created.id });
    const helped = helper[Symbol.asyncIterator]();
    while ((await helped.next()).value.type !== 'response.output_text.delta');
    expect(await consume()).toBe('done');
    const live = await reader.rest();
    for (let next = await helped.next(); !next.done; next = await helped.next());
    expectWhole(live);
    const retrieved = await client.responses.retrieve(created.id);
    expect(retrieved.status).toBe('failed');
    const done = live.filter((event) => event.type === 'response.output_item.done');
    expect(done.map((event) => event.item)).toEqual([expect.objectContaining({ status: 'incomplete' })]);
    expect(live.at(-1)).toMatchObject({
      type: 'response.failed',
      response: { status: 'failed', output: retrieved.output },
    });
    expect(await helper.finalResponse()).toMatchObject({ status: 'failed', output: retrieved.output });
    await expectResumable((after) => read(created.id, after), live);
    // From the start: the later run's item, cut by the failure, then the same end.
    const replayed = await read(created.id);
    expectWhole(replayed);
    const cut = replayed.filter((event) => event.type === 'response.output_item.done');
    expect(cut.map((event) => event.item)).toEqual([expect.objectContaining({ status: 'incomplete' })]);
    expect(cut[0]!.sequence_number).toBeGreaterThan(live.at(-2)!.sequence_number);
    expect(replayed.at(-1)).toEqual(live.at(-1));
  });

  it('three times, under a reader of each run: each goes on as it did, and ends as retrieved', async () => {
    const { store, client, consume, follow, read } = world();
    const created = await client.responses.create({ model: 'echo', input: 'hello there', background: true });
    store.failWhen(doneFails, { times: 4 });
    const delta = (event: ResponseStreamEvent) => event.type === 'response.output_text.delta';
    expect(await consume()).toEqual({ retryAfterSeconds: expect.any(Number) });
    const first = await follow(created.id, delta);
    expect(await consume()).toEqual({ retryAfterSeconds: expect.any(Number) });
    const second = await follow(created.id, delta);
    expect(await consume()).toBe('done');
    const readers = [await first.rest(), await second.rest(), await read(created.id)];
    const retrieved = await client.responses.retrieve(created.id);
    // Each follows one run's items, under the numbers every connection gives them.
    const starts = readers.map((events) => events.find((event) => event.type === 'response.output_item.added')!);
    expect(starts[0]!.sequence_number).toBeLessThan(starts[1]!.sequence_number);
    expect(starts[1]!.sequence_number).toBeLessThan(starts[2]!.sequence_number);
    const end = readers[2]!.at(-1)!;
    expect(end).toMatchObject({ type: 'response.completed', response: { output: retrieved.output } });
    for (const events of readers) {
      expectWhole(events);
      expect(events.at(-1)).toEqual(end);
      await expectResumable((after) => read(created.id, after), events);
    }
  });
});

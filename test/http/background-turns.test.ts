import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApp, createTurnRunner, type AppOptions } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';
import { settled } from './background-suite.ts';
import { sseReader } from '../support/sse-reader.ts';
import { createClient, parseSse, TOKEN, type HttpHarness } from './http-suite.ts';
import { fixture, startFakeProvider } from '../support/fake-providers/fake-provider-server.ts';

// Background turns on Node beyond the shared suite (test/http/background-suite.ts): a cancel
// stops a running one (against a loopback provider that never answers), the states a queue
// consumer sees, a runner delivered the same turn twice, and a runner that died.
let server: Server;
let baseUrl = '';
const hanging = new Set<ServerResponse>();
const closedEarly: string[] = [];
// The bodies of the requests the provider has received whole.
const received: string[] = [];

/** Waits until the provider has received a model call whose body includes `text`. */
async function calledWith(text: string): Promise<void> {
  for (let polls = 0; polls < 600 && !received.some((body) => body.includes(text)); polls++)
    await new Promise((resolve) => setTimeout(resolve, 20));
}

beforeAll(async () => {
  server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => received.push(body));
    hanging.add(response);
    // The client went away before any answer: the model call was aborted.
    response.on('close', () => {
      if (!response.writableEnded) closedEarly.push(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});

afterAll(async () => {
  for (const response of hanging) response.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const environment = () => ({
  API_TOKEN: TOKEN,
  DEFAULT_MODEL: 'echo',
  OPENAI_COMPATIBLE_BASE_URL: baseUrl,
  MODEL_MAX_RETRIES: '0',
  // Only a cancel ends the hanging call within the test's time.
  MODEL_TIMEOUT_MS: '600000',
  TURN_LEASE_MS: '3000',
});

/** A log into `logs`: a failure with its details, a routine line with `level: 'info'`. */
function logInto(logs: { message: string; details?: unknown; level?: 'info' }[]): Partial<AppOptions> {
  return {
    log: (message, details) => logs.push({ message, details }),
    info: (message) => logs.push({ message, level: 'info' }),
  };
}

/** A harness whose app's work after its responses (a runner in this process) `drain` awaits. */
function harnessFor(options: Partial<AppOptions>): HttpHarness & { options: AppOptions; drain: () => Promise<void> } {
  const store = new MemoryStore();
  const tasks: Promise<unknown>[] = [];
  const full: AppOptions = {
    store: () => store,
    readEnvironment: (c) => c.env ?? {},
    afterResponse: (task) => void tasks.push(task),
    ...options,
  };
  const app = createApp(full);
  return {
    options: full,
    drain: async () => {
      while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
    },
    fetch: async (path, init) => app.request(path, init, environment()),
    fetchWithEnv: async (overrides, path, init) => app.request(path, init, { ...environment(), ...overrides }),
    store,
    keyPrefix: '',
    logged: [],
  };
}

describe('background turns on Node', () => {
  it('a cancel stops the running turn: its call is aborted, its notices go back, nothing of it is stored', async () => {
    const logs: { message: string; details?: unknown; level?: 'info' }[] = [];
    const api = createClient(harnessFor(logInto(logs)));
    const id = await api.session({ model: 'openai-compatible:fake', strategies: ['inbox'] });
    await api.post(`/v1/sessions/${id}/inbox`, { name: 'note.md', content: 'remember this' });
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: `hang ${id}`, background: true });
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    // Running: it has taken the notice and called the model.
    for (let polls = 0; polls < 600 && (await api.get(`/v1/sessions/${id}/inbox`)).body.pending.length > 0; polls++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('in_progress');
    await calledWith(`hang ${id}`);
    const cancelled = await api.post(`/v1/sessions/${id}/turns/1/cancel`);
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    // The cancel, written in the runner's process, aborts the model call (lib/turn/running.ts).
    for (let polls = 0; polls < 600 && !closedEarly.some((body) => body.includes(`hang ${id}`)); polls++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect(closedEarly.some((body) => body.includes(`hang ${id}`))).toBe(true);
    const receipt = (await api.get(`/v1/sessions/${id}/turns/1`)).body;
    expect(receipt).toMatchObject({ status: 'cancelled', error: { code: 'turn_cancelled' }, output: null });
    // A cancel is no failure of the server: one routine line, no error with its stack.
    for (let polls = 0; polls < 600 && !logs.some((log) => log.message.includes('background turn 1')); polls++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    const stopped = logs.filter((log) => log.message.includes('background turn 1'));
    expect(stopped).toEqual([
      { message: `tailgate: background turn 1 of session ${id} stopped: turn_cancelled`, level: 'info' },
    ]);
    // The notice is delivered by the next turn.
    for (let polls = 0; polls < 600 && (await api.get(`/v1/sessions/${id}/inbox`)).body.pending.length === 0; polls++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    const next = await api.post(`/v1/sessions/${id}/turns`, { input: 'next', model: 'echo' });
    expect(next.status, JSON.stringify(next.body)).toBe(200);
    expect(next.body.context.notices_delivered).toEqual(['note.md']);
    // The cancelled turn's input stays; the next turn's input and answer follow it at once.
    const items = (await api.get(`/v1/sessions/${id}/items`)).body.items;
    expect(items.map((item: any) => [item.seq, item.role])).toEqual([
      [3, 'assistant'],
      [2, 'user'],
      [1, 'user'],
    ]);
    expect(items[2].content).toBe(`hang ${id}`);
  });

  it('a background turn an abort notice stops is logged as one line, as a cancelled one is', async () => {
    const logs: { message: string; details?: unknown; level?: 'info' }[] = [];
    const api = createClient(harnessFor(logInto(logs)));
    const id = await api.session({ strategies: ['inbox'] });
    await api.post(`/v1/sessions/${id}/inbox`, { name: 'abort', content: 'stop' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'go', background: true })).status).toBe(202);
    for (let polls = 0; polls < 600 && (await api.get(`/v1/sessions/${id}/turns/1`)).body.status !== 'aborted'; polls++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({ error: { code: 'aborted' } });
    for (let polls = 0; polls < 600 && !logs.some((log) => log.message.includes('background turn 1')); polls++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    // An abort is an outcome the session's client asked for, no failure of the server: no stack.
    expect(logs.filter((log) => log.message.includes('background turn 1'))).toEqual([
      { message: `tailgate: background turn 1 of session ${id} stopped: aborted`, level: 'info' },
    ]);
  });

  it('a running turn cancelled before any of its events was journaled ends them a lease after the cancel', async () => {
    const store = new FaultyStore(new MemoryStore());
    const harness = harnessFor({ store: () => store, log: () => undefined });
    const api = createClient(harness);
    const id = await api.session({ model: 'openai-compatible:fake' });
    // Its runner's journal writes fail: the turn runs, and writes no batch.
    store.failWhen(({ operation, key }) => operation === 'put' && key.includes('/events/'));
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: `hang ${id}`, background: true })).status).toBe(202);
    await calledWith(`hang ${id}`);
    expect((await api.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
    // Its runner stopped (its journal's last batch failed too).
    await harness.drain();
    store.heal();
    // A runner took it over: its events wait for that runner's end, a lease (3 s), then end.
    const events = await api.get(`/v1/sessions/${id}/turns/1/events`);
    expect(events.status).toBe(200);
    expect(parseSse(events.body)).toMatchObject([{ event: 'error', data: { error: { code: 'turn_cancelled' } } }]);
  });

  it('a delete of its session stops its running turn: one line logged', async () => {
    const logs: { message: string; details?: unknown; level?: 'info' }[] = [];
    const harness = harnessFor(logInto(logs));
    const api = createClient(harness);
    const id = await api.session({ model: 'openai-compatible:fake' });
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: `delete ${id}`, background: true });
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    // Running: it has called the model (its journal has turn.started written).
    await calledWith(`delete ${id}`);
    const journaled = async () =>
      (await harness.store.list(`sessions/${id}/`)).objects.some(({ key }) => key.includes('/events/'));
    await expect.poll(journaled, { timeout: 10_000 }).toBe(true);
    expect((await api.delete(`/v1/sessions/${id}`)).status).toBe(204);
    // The delete, in the runner's process, aborts the model call once its fence landed.
    for (let polls = 0; polls < 600 && !closedEarly.some((body) => body.includes(`delete ${id}`)); polls++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect(closedEarly.some((body) => body.includes(`delete ${id}`))).toBe(true);
    // Its runner ended.
    await harness.drain();
    const lines = logs.map((log) => log.message);
    expect(lines.filter((line) => line.includes('journal'))).toEqual([]);
    expect(lines).toEqual([`tailgate: background turn 1 of session ${id} stopped: the session was deleted`]);
    expect(logs[0]).toEqual({ message: lines[0], level: 'info' });
    // Nothing of its journal was written into the swept session.
    const left = await harness.store.list(`sessions/${id}/`);
    expect(left.objects.filter((object) => object.key.includes('/events/'))).toEqual([]);
  });

  // The test above meets its renewals (every second of its 3 s lease) only as the clock has it.
  // Here they come due before, during and after the delete, on time or after the lease ran out
  // unrenewed: a renewal logs only a failing store call, and none adds a line to the turn's end.
  it.each([
    ['on time', false],
    ['after the lease ran out', true],
  ])('a delete of its session amid renewals come due %s stops its running turn: one line logged', async (_, late) => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'Date'], now: Date.now() });
    try {
      const logs: { message: string; details?: unknown; level?: 'info' }[] = [];
      const harness = harnessFor(logInto(logs));
      const api = createClient(harness);
      const id = await api.session({ model: 'openai-compatible:fake' });
      const queued = await api.post(`/v1/sessions/${id}/turns`, { input: `renewed ${id}`, background: true });
      expect(queued.status, JSON.stringify(queued.body)).toBe(202);
      await calledWith(`renewed ${id}`);
      const journaled = async () =>
        (await harness.store.list(`sessions/${id}/`)).objects.some(({ key }) => key.includes('/events/'));
      await expect.poll(journaled, { timeout: 10_000 }).toBe(true);
      // 2 s of renewals and stop checks, each step's work run before the next.
      const renewals = async () => {
        for (let step = 0; step < 20; step++) {
          vi.advanceTimersByTime(100);
          await new Promise((resolve) => setImmediate(resolve));
        }
      };
      await renewals();
      if (late) vi.setSystemTime(Date.now() + 10_000);
      const deleted = api.delete(`/v1/sessions/${id}`);
      await renewals();
      expect((await deleted).status).toBe(204);
      await renewals();
      for (let polls = 0; polls < 600 && !closedEarly.some((body) => body.includes(`renewed ${id}`)); polls++)
        await new Promise((resolve) => setTimeout(resolve, 20));
      expect(closedEarly.some((body) => body.includes(`renewed ${id}`))).toBe(true);
      await harness.drain();
      expect(logs).toEqual([
        { message: `tailgate: background turn 1 of session ${id} stopped: the session was deleted`, level: 'info' },
      ]);
      const left = await harness.store.list(`sessions/${id}/`);
      expect(left.objects.filter((object) => object.key.includes('/events/'))).toEqual([]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('is queued until a consumer takes it over; a second delivery of the same turn changes nothing', async () => {
    const sent: BackgroundTurn[] = [];
    const harness = harnessFor({ queueTurn: () => async (run) => void sent.push(run) });
    const api = createClient(harness);
    const id = await api.session();
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'queued', background: true });
    expect(queued.body).toMatchObject({ turn: 1, status: 'queued' });
    expect(sent).toEqual([{ session_id: id, turn: 1, writer: expect.any(String) }]);
    expect((await api.get(`/v1/sessions/${id}/turns`)).body.turns[0]).toMatchObject({ turn: 1, status: 'queued' });
    // The session is held meanwhile, as by any open turn.
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'other' })).status).toBe(409);
    const run = createTurnRunner(harness.options);
    const background: Promise<unknown>[] = [];
    const consume = () => run(sent[0]!, environment(), (task) => void background.push(task));
    expect(await consume()).toBe('done');
    expect(await settled(api, id, 1)).toMatchObject({ status: 'completed' });
    expect(await consume()).toBe('done');
    await Promise.all(background);
    expect((await api.get(`/v1/sessions/${id}`)).body.counts).toMatchObject({ items: 2, turns: 1 });
  });

  /** A background turn 1 queued (never run) and cancelled; `deliver` runs the queue's delivery of it. */
  async function cancelledWhileQueued() {
    const sent: BackgroundTurn[] = [];
    const harness = harnessFor({ queueTurn: () => async (run) => void sent.push(run) });
    const api = createClient(harness);
    const id = await api.session();
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'x', background: true })).status).toBe(202);
    expect((await api.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
    const run = createTurnRunner(harness.options);
    const deliver = async () => {
      const background: Promise<unknown>[] = [];
      expect(await run(sent[0]!, environment(), (task) => void background.push(task))).toBe('done');
      await Promise.all(background);
    };
    const read = () =>
      harness.fetch(`/v1/sessions/${id}/turns/1/events`, { headers: { authorization: `Bearer ${TOKEN}` } });
    const events = async () => (await read()).status;
    return { api, id, deliver, events, read };
  }

  it('a turn cancelled while queued ends its events as a cancelled running one does, runner or not', async () => {
    const { api, id, deliver, read } = await cancelledWhileQueued();
    const cancelled = { event: 'error', data: { error: { code: 'turn_cancelled' } } };
    const first = await read();
    expect(first.status).toBe(200);
    const text = await first.text();
    expect(parseSse(text)).toMatchObject([cancelled]);
    expect(text).toContain('id: 1\n');
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({ status: 'cancelled' });
    // The queue delivers the turn, twice: its runner finds it closed, and writes nothing.
    await deliver();
    await deliver();
    // Every reader gets the same end, numbered the same.
    expect(await (await read()).text()).toBe(text);
  });

  it('a response cancelled while queued: retrieve shows it cancelled, and its stream ends so', async () => {
    const harness = harnessFor({ queueTurn: () => async () => undefined });
    const api = createClient(harness);
    const created = await api.post('/v1/responses', { model: 'echo', input: 'x', background: true });
    expect(created.body).toMatchObject({ status: 'queued' });
    expect((await api.post(`/v1/responses/${created.body.id}/cancel`)).body).toMatchObject({ status: 'cancelled' });
    expect((await api.get(`/v1/responses/${created.body.id}`)).body).toMatchObject({ status: 'cancelled' });
    const streamed = await harness.fetch(`/v1/responses/${created.body.id}?stream=true`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    // As every stream opens (docs/OPENAI.md, "Background responses"): created and in_progress, then its end.
    const events = parseSse(await streamed.text());
    expect(events.map((event) => [event.event, event.data.sequence_number])).toEqual([
      ['response.created', 0],
      ['response.in_progress', 1],
      ['response.failed', 2],
    ]);
    expect(events.at(-1)).toMatchObject({ event: 'response.failed', data: { response: { status: 'cancelled' } } });
  });

  it('a late runner writes nothing into the turn that took its number after a delete', async () => {
    const { api, id, deliver, events } = await cancelledWhileQueued();
    expect((await api.delete(`/v1/sessions/${id}/turns/1`)).status).toBe(200);
    // A plain JSON turn takes number 1 again: it has no journal.
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'y' })).body).toMatchObject({ turn: 1 });
    await deliver();
    expect(await events()).toBe(404);
  });

  it("an input queued past the session's budget waits until a PATCH raises it, then runs", async () => {
    const sent: BackgroundTurn[] = [];
    const harness = harnessFor({ queueTurn: () => async (run) => void sent.push(run) });
    const api = createClient(harness);
    const id = await api.session({ on_busy: 'enqueue', budget: { max_turns: 1 } });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'second' })).status).toBe(202);
    const run = createTurnRunner(harness.options);
    const background: Promise<unknown>[] = [];
    const consume = (turn: BackgroundTurn) => run(turn, environment(), (task) => void background.push(task));
    expect(await consume(sent[0]!)).toBe('done');
    expect(await settled(api, id, 1)).toMatchObject({ status: 'completed' });
    // The pickup after it finds the budget spent: the input stays queued, and nothing failed.
    while (background.length > 0) await Promise.all(background.splice(0));
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(1);
    expect(sent).toHaveLength(1);
    expect((await api.patch(`/v1/sessions/${id}`, { budget: { max_turns: 2 } })).status).toBe(200);
    await vi.waitFor(() => expect(sent).toHaveLength(2), { timeout: 15_000 });
    expect(await consume(sent[1]!)).toBe('done');
    expect(await settled(api, id, 2)).toMatchObject({ status: 'completed' });
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(0);
  });

  it("a turn the queue delivers again after a storage failure journals both runs, and the second's end", async () => {
    const store = new FaultyStore(new MemoryStore());
    const sent: BackgroundTurn[] = [];
    const harness = harnessFor({ store: () => store, queueTurn: () => async (run) => void sent.push(run) });
    const api = createClient(harness);
    const id = await api.session();
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'hello', background: true })).status).toBe(202);
    // The completion's put fails, and so does the close as failed: the turn stays open.
    store.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.done'), { times: 2 });
    const run = createTurnRunner(harness.options);
    const background: Promise<unknown>[] = [];
    const consume = async () => {
      const outcome = await run(sent[0]!, environment(), (task) => void background.push(task));
      while (background.length > 0) await Promise.all(background.splice(0));
      return outcome;
    };
    // Delivered again after a delay: at most half the lease of 3 s.
    expect(await consume()).toEqual({ retryAfterSeconds: 1 });
    expect(await consume()).toBe('done');
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('completed');
    const followed = await harness.fetch(`/v1/sessions/${id}/turns/1/events`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    const text = await followed.text();
    const events = parseSse(text);
    expect(events.at(-1)).toMatchObject({ event: 'turn.completed' });
    expect(events.filter((event) => event.event === 'turn.started')).toHaveLength(2);
    expect(events.some((event) => event.event === 'error')).toBe(false);
    // Numbered on: a reader resuming after any of them misses none of the second run's.
    const numbers = text
      .split('\n')
      .filter((line) => line.startsWith('id: '))
      .map((line) => Number(line.slice(4)));
    expect(numbers).toEqual(events.map((_, index) => index + 1));
  });

  it('a turn whose runner never came is failed by its lease, and the session goes on', async () => {
    const sent: BackgroundTurn[] = [];
    let now = Date.parse('2030-01-01T00:00:00Z');
    const clock = () => new Date(now);
    const api = createClient(harnessFor({ clock, queueTurn: () => async (run) => void sent.push(run) }));
    const id = await api.session();
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'lost', background: true })).status).toBe(202);
    // Its lease (TURN_LEASE_MS 3000) holds the session, then runs out by the service clock.
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'later' })).status).toBe(409);
    now += 3200;
    const next = await api.post(`/v1/sessions/${id}/turns`, { input: 'later' });
    expect(next.status, JSON.stringify(next.body)).toBe(200);
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({
      status: 'failed',
      error: { code: 'lease_expired' },
    });
    // Closed by the next writer before any runner took it: its events end at once with how.
    const events = await api.get(`/v1/sessions/${id}/turns/1/events`);
    expect(events.status).toBe(200);
    expect(parseSse(events.body)).toMatchObject([{ event: 'error', data: { error: { code: 'lease_expired' } } }]);
  });
});

describe('the busy policy', () => {
  /** A session held by a claimed background turn whose runner has not come yet. */
  async function heldSession(session: Record<string, unknown> = {}) {
    const sent: BackgroundTurn[] = [];
    const harness = harnessFor({ queueTurn: () => async (run) => void sent.push(run) });
    const api = createClient(harness);
    const id = await api.session(session);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    const runner = createTurnRunner(harness.options);
    const background: Promise<unknown>[] = [];
    /** Runs the turns the queue got, in order, until no more come. */
    const drain = async () => {
      for (let index = 0; index < sent.length; index++) {
        expect(await runner(sent[index]!, environment(), (task) => void background.push(task))).toBe('done');
        // Its completion takes the next queued input up after the response.
        for (let settled = -1; settled !== background.length; ) {
          settled = background.length;
          await Promise.all(background);
        }
      }
    };
    return { api, id, sent, drain };
  }

  const contents = async (api: ReturnType<typeof createClient>, id: string) =>
    (await api.get(`/v1/sessions/${id}/items`)).body.items.map((item: any) => item.content).reverse();

  it('reject is the default: 409 turn_in_progress, nothing stored', async () => {
    const { api, id } = await heldSession();
    expect((await api.get(`/v1/sessions/${id}`)).body.on_busy).toBe('reject');
    const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'second' });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('turn_in_progress');
  });

  it('enqueue stores inputs and runs each as its own turn, in order, after the running one', async () => {
    const { api, id, sent, drain } = await heldSession({ on_busy: 'enqueue' });
    const second = await api.post(`/v1/sessions/${id}/turns`, { input: 'second' });
    expect(second.status, JSON.stringify(second.body)).toBe(202);
    expect(second.body).toEqual({ session_id: id, queued_turn: expect.stringMatching(/^[0-9a-f]{64}$/), position: 1 });
    const third = await api.post(`/v1/sessions/${id}/turns`, { input: 'third', stream: true });
    expect(third.body).toMatchObject({ position: 2 });
    expect(sent).toHaveLength(1);
    await drain();
    expect(sent.map((run) => run.turn)).toEqual([1, 2, 3]);
    expect(await contents(api, id)).toEqual(['first', 'echo: first', 'second', 'echo: second', 'third', 'echo: third']);
    const turns = (await api.get(`/v1/sessions/${id}/turns`)).body.turns;
    expect(turns.map((turn: any) => turn.status)).toEqual(['completed', 'completed', 'completed']);
  });

  it('a request overrides the session, and PATCH changes the session', async () => {
    const { api, id, drain } = await heldSession();
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'second', on_busy: 'enqueue' });
    expect(queued.status).toBe(202);
    expect((await api.patch(`/v1/sessions/${id}`, { on_busy: 'enqueue' })).body.on_busy).toBe('enqueue');
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'x', on_busy: 'reject' })).status).toBe(409);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'third' })).status).toBe(202);
    expect((await api.patch(`/v1/sessions/${id}`, { on_busy: null })).body.on_busy).toBe('reject');
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'y', on_busy: 'later' })).status).toBe(400);
    await drain();
    expect(await contents(api, id)).toEqual(['first', 'echo: first', 'second', 'echo: second', 'third', 'echo: third']);
  });

  it('keeps one Idempotency-Key to one input across enqueue, replay and reject', async () => {
    const { api, id, drain } = await heldSession({ on_busy: 'enqueue' });
    const key = { 'idempotency-key': `q-${id}` };
    const first = await api.post(`/v1/sessions/${id}/turns`, { input: 'keyed' }, key);
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: 'keyed' }, key);
    expect(again.body).toEqual(first.body);
    const other = await api.post(`/v1/sessions/${id}/turns`, { input: 'not the same' }, key);
    expect(other.status).toBe(422);
    await drain();
    const replayed = await api.post(`/v1/sessions/${id}/turns`, { input: 'keyed', on_busy: 'reject' }, key);
    expect(replayed.status, JSON.stringify(replayed.body)).toBe(200);
    expect(replayed.body.output[0].content).toBe('echo: keyed');
    expect(await contents(api, id)).toEqual(['first', 'echo: first', 'keyed', 'echo: keyed']);
  });

  it('interrupt cancels the running turn and runs the new input at once', async () => {
    const api = createClient(harnessFor({}));
    const id = await api.session({ model: 'openai-compatible:fake' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: `hang ${id} 2`, background: true })).status).toBe(202);
    await calledWith(`hang ${id} 2`);
    const taken = await api.post(`/v1/sessions/${id}/turns`, { input: 'now', model: 'echo', on_busy: 'interrupt' });
    expect(taken.status, JSON.stringify(taken.body)).toBe(200);
    expect(taken.body).toMatchObject({ turn: 2, output: [{ content: 'echo: now' }] });
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({ status: 'cancelled', output: null });
    for (let polls = 0; polls < 600 && !closedEarly.some((body) => body.includes(`hang ${id} 2`)); polls++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect(closedEarly.some((body) => body.includes(`hang ${id} 2`))).toBe(true);
    expect(await contents(api, id)).toEqual([`hang ${id} 2`, 'now', 'echo: now']);
  });
});

describe('following a running turn', () => {
  it('sees the events of a background turn while it runs, then its end when it is cancelled', async () => {
    // Streams the start of an answer, then never finishes.
    const provider = await startFakeProvider(() => ({
      sse: `${fixture('openai-chat-text.sse').split('\n\n').slice(0, 3).join('\n\n')}\n\n`,
      hang: true,
    }));
    try {
      const harness = harnessFor({});
      const api = createClient(harness);
      const id = await api.session({ model: 'openai-compatible:fake' });
      const overrides = { OPENAI_COMPATIBLE_BASE_URL: provider.baseURL };
      const queued = await harness.fetchWithEnv(overrides, `/v1/sessions/${id}/turns`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ input: 'go', background: true }),
      });
      expect(queued.status).toBe(202);
      const following = await harness.fetch(`/v1/sessions/${id}/turns/1/events`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(following.status).toBe(200);
      const reader = sseReader(following);
      // The partial answer arrives while the turn still runs.
      await reader.until('event: output_text.delta');
      expect((await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('in_progress');
      expect((await api.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
      const text = await reader.rest();
      const events = parseSse(text);
      expect(events[0]).toMatchObject({ event: 'turn.started', data: { turn: 1 } });
      expect(events.at(-1)).toEqual({
        event: 'error',
        data: { error: expect.objectContaining({ code: 'turn_cancelled' }) },
      });
    } finally {
      await provider.close();
    }
  });
});

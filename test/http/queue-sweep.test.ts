import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createOutsideServices, type AppOptions } from '../../functions/app.ts';
import { sweepQueuedSessions } from '../../functions/queue-sweep.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { FileStore } from '../../lib/store/file.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { listAll, type ObjectStore } from '../../lib/store/object-store.ts';
import { sweepQueues } from '../../lib/turn/index.ts';
import { appHarness } from '../support/app-harness.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { WEBHOOK_SECRET } from '../support/webhook-receiver.ts';
import { createClient, TOKEN } from './http-suite.ts';

// Inputs queued behind a turn whose process died, with no webhooks and no client coming back:
// the periodic sweep of the sessions marked as having queued inputs (`queues/<id>`) closes the
// dead turn once its lease ran out and takes the queue up, as a reader of the queue would.

const directory = await mkdtemp(join(tmpdir(), 'tailgate-queue-sweep-'));
afterAll(() => rm(directory, { recursive: true, force: true, maxRetries: 5 }));

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '3000' };
const stores: [string, () => ObjectStore][] = [
  ['memory', () => new MemoryStore()],
  ['file store', () => new FileStore(join(directory, crypto.randomUUID()))],
];

/** A process on `store` and `clock`: its HTTP client, and the services of its timers (the sweep's). */
function process(
  store: ObjectStore,
  clock: () => Date,
  runner: 'none' | 'in process',
  logs: Pick<AppOptions, 'log' | 'info'> = { log: () => undefined, info: () => undefined },
  settings: Record<string, string> = environment,
) {
  const tasks: Promise<unknown>[] = [];
  const options: AppOptions = {
    store: () => store,
    readEnvironment: (c) => c.env ?? settings,
    clock,
    ...logs,
    logLine: () => undefined,
    afterResponse: (task) => void tasks.push(task),
  };
  // Its background turns never run: it dies before it runs them.
  if (runner === 'none') options.queueTurn = () => async () => undefined;
  const outside = createOutsideServices(options);
  return {
    api: createClient(appHarness(store, settings, options)),
    services: () => outside(settings, (task) => void tasks.push(task)),
    settle: async () => {
      while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
    },
  };
}

const isLease = (object: { key: string }) => object.key.endsWith('.lease');
const markers = async (store: ObjectStore) => (await listAll(store, 'queues/')).map((object) => object.key);
const queueEntries = async (store: ObjectStore) =>
  (await listAll(store, 'sessions/')).filter((object) => /\/queue\//.test(object.key));

/** Session `id`'s turns, oldest first: [turn, status, error code]. */
async function turnsOf(api: ReturnType<typeof createClient>, id: string) {
  const { body } = await api.get(`/v1/sessions/${id}/turns`);
  return body.turns.reverse().map((turn: any) => [turn.turn, turn.status, turn.error?.code ?? null]);
}

/** A session whose turn 1 was claimed by a process that died, with `inputs` queued behind it. */
async function deadTurnWithQueue(store: ObjectStore, clock: () => Date, inputs: string[]) {
  const dead = process(store, clock, 'none');
  const id = await dead.api.session({ on_busy: 'enqueue' });
  expect((await dead.api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
  for (const input of inputs) expect((await dead.api.post(`/v1/sessions/${id}/turns`, { input })).status).toBe(202);
  // Its enqueues' pickups, refused while turn 1's lease runs, end before it dies.
  await dead.settle();
  return id;
}

/** A session whose enqueue died before its entry: its marker, nothing queued, turn 1 running its lease. */
async function markedWithoutEntry(store: ObjectStore, clock: () => Date): Promise<string> {
  const faulty = new FaultyStore(store).failWhen(
    ({ operation, key }) => operation === 'put' && key.includes('/queue/'),
  );
  const dying = process(faulty, clock, 'none');
  const id = await dying.api.session({ on_busy: 'enqueue' });
  expect((await dying.api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
  expect((await dying.api.post(`/v1/sessions/${id}/turns`, { input: 'lost' })).status).toBe(503);
  await dying.settle();
  return id;
}

/**
 * A session whose budget (one turn) its turn 1 spent, with an input queued as an enqueue stores
 * it (its marker, then its entry), as if behind a turn.
 */
async function queuedBehindSpentBudget(store: ObjectStore, { api, settle }: ReturnType<typeof process>) {
  const id = await api.session({ on_busy: 'enqueue', budget: { max_turns: 1 } });
  expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'spends the budget' })).status).toBe(200);
  // Its close's pickup found nothing queued.
  await settle();
  return { id, keyHash: await queuedAsStored(store, id) };
}

/** Queues an input in session `id` as an enqueue stores it (its marker, then its entry): its key's hash. */
async function queuedAsStored(store: ObjectStore, id: string): Promise<string> {
  const config = JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', id)))!.body));
  const keyHash = 'c'.repeat(64);
  await store.put(`queues/${id}`, '');
  const entry = { format: 'tailgate.queued.v1', key_sha256: keyHash, enqueued_at: new Date().toISOString() };
  await store.put(
    `sessions/${id}/queue/${config.generation}/${keyHash}`,
    JSON.stringify({
      ...entry,
      writer: crypto.randomUUID(),
      input: [{ type: 'message', role: 'user', content: 'q' }],
      request: {},
    }),
  );
  return keyHash;
}

/**
 * A process on `store` that dies at the pickup after its response: its read of a queued entry
 * (which only a pickup makes) fails, and nothing else of it runs. A store of its own (no `inner`),
 * so it shares no cache with the other processes on `store`.
 */
function diesAtItsPickup(store: ObjectStore, clock: () => Date) {
  const faulty = new FaultyStore(store).failWhen(
    ({ operation, key }) => operation === 'get' && key.includes('/queue/'),
  );
  return { ...process(ownStore(faulty), clock, 'none'), faulty };
}

/** Once the raise's process died at its pickup: the marker stands, and a sweep runs the queued input as turn 2. */
async function sweptAfterDeadRaise(
  store: ObjectStore,
  clock: () => Date,
  dying: ReturnType<typeof diesAtItsPickup>,
  id: string,
) {
  await dying.settle();
  expect(dying.faulty.injected).toBe(1);
  expect(await markers(store)).toEqual([`queues/${id}`]);
  const live = process(store, clock, 'in process');
  await sweepQueuedSessions(live.services);
  await live.settle();
  expect((await turnsOf(live.api, id)).at(-1)).toEqual([2, 'completed', null]);
}

/** `inner`'s objects through a store of its own (no `inner`, so it shares no cache with `inner`'s users). */
function ownStore(inner: ObjectStore, overrides: Partial<ObjectStore> = {}): ObjectStore {
  return {
    get: (key, options) => inner.get(key, options),
    head: (key) => inner.head(key),
    put: (key, body, options) => inner.put(key, body, options),
    list: (prefix, options) => inner.list(prefix, options),
    delete: (keys) => inner.delete(keys),
    ...overrides,
  };
}

/**
 * `inner` as a process's store that is killed (kill -9) once its runner of a background turn took
 * the turn's lease: from then on none of its calls settles, so the turn is left open, running.
 */
function killedWhenRunning(inner: ObjectStore): ObjectStore {
  let killed = false;
  const alive = <T>(call: () => Promise<T>): Promise<T> => (killed ? new Promise<T>(() => undefined) : call());
  return ownStore(inner, {
    get: (key, options) => alive(() => inner.get(key, options)),
    head: (key) => alive(() => inner.head(key)),
    list: (prefix, options) => alive(() => inner.list(prefix, options)),
    delete: (keys) => alive(() => inner.delete(keys)),
    put: (key, body, options) =>
      alive(async () => {
        const put = await inner.put(key, body, options);
        if (key.endsWith('.lease')) killed = true;
        return put;
      }),
  });
}

/** The events in the webhook outbox (an intent, whose body is empty until its turn closed, is none). */
async function outboxEvents(store: ObjectStore) {
  const entries = await Promise.all(
    (await listAll(store, 'webhooks/outbox/')).map(async ({ key }) => {
      const object = await store.get(key);
      return JSON.parse(new TextDecoder().decode(object!.body));
    }),
  );
  return entries
    .filter((entry) => entry.body !== '')
    .map((entry) => JSON.parse(entry.body))
    .map(({ type, data }) => ({ type, turn: data.turn, code: data.error?.code }));
}

/** A sweeper's store on `store` that runs `race` right before its first delete of session `id`'s marker. */
function raceMarkerDelete(store: ObjectStore, id: string, race: () => Promise<void>) {
  let raced = false;
  const racing = ownStore(store, {
    delete: async (keys) => {
      if (!raced && keys === `queues/${id}`) {
        raced = true;
        await race();
      }
      return store.delete(keys);
    },
  });
  return { racing, raced: () => raced };
}

describe.each(stores)('the sweep of queues: %s', (_, storeOf) => {
  it('takes up the inputs queued behind a turn whose lease ran out, with no webhooks and no client', async () => {
    const store = storeOf();
    let now = Date.parse('2030-01-01T00:00:00Z');
    const clock = () => new Date(now);
    const id = await deadTurnWithQueue(store, clock, ['q1', 'q2']);
    expect(await markers(store)).toEqual([`queues/${id}`]);
    const live = process(store, clock, 'in process');
    // While turn 1's lease runs, the sweep leaves the session to it.
    expect(await sweepQueues(live.services())).toEqual({ checked: 1, unmarked: 0, failed: [] });
    await live.settle();
    expect(await queueEntries(store)).toHaveLength(2);
    expect(await markers(store)).toEqual([`queues/${id}`]);
    // The lease runs out: the next sweep closes turn 1 and runs the queue, oldest first.
    now += 4000;
    await sweepQueuedSessions(live.services);
    await live.settle();
    expect(await turnsOf(live.api, id)).toEqual([
      [1, 'failed', 'lease_expired'],
      [2, 'completed', null],
      [3, 'completed', null],
    ]);
    const items = (await live.api.get(`/v1/sessions/${id}/items?limit=100`)).body.items.reverse();
    expect(items.filter((item: any) => item.role === 'user').map((item: any) => item.content)).toEqual([
      'first',
      'q1',
      'q2',
    ]);
    // Nothing is queued any more: a sweep removes the marker (the one that ran the queue, or the next).
    await sweepQueuedSessions(live.services);
    expect(await markers(store)).toEqual([]);
    expect(await sweepQueues(live.services())).toEqual({ checked: 0, unmarked: 0, failed: [] });
  });

  // A background turn of the native API, and the OpenAI facade's background response.
  const starts: [string, (api: ReturnType<typeof createClient>) => Promise<string>][] = [
    [
      'a turn',
      async (api) => {
        const id = await api.session({});
        expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
        return id;
      },
    ],
    [
      'a response',
      async (api) => {
        const created = await api.post('/v1/responses', { model: 'echo', input: 'first', background: true });
        expect(created.status, JSON.stringify(created.body)).toBe(200);
        return created.body.tailgate.session_id;
      },
    ],
  ];
  it.each(starts)(
    'closes %s run in the background whose process died while it ran, with its webhook event',
    async (_, start) => {
      const store = storeOf();
      let now = START;
      const clock = () => new Date(now);
      const settings = { ...environment, WEBHOOK_SECRET, WEBHOOK_URL: 'https://hooks.example.com/tailgate' };
      const dying = process(killedWhenRunning(store), clock, 'in process', undefined, settings);
      const id = await start(dying.api);
      // Its runner took the turn's lease, then the process died: the turn is left running.
      await expect.poll(async () => (await listAll(store, `sessions/${id}/turn/`)).some(isLease)).toBe(true);
      const live = process(store, clock, 'in process', undefined, settings);
      expect(await sweepQueues(live.services())).toEqual({ checked: 1, unmarked: 0, failed: [] });
      expect(await turnsOf(live.api, id)).toEqual([[1, 'in_progress', null]]);
      // Once its lease ran out, the next sweep closes it, tells its webhook, and unmarks the session.
      now += 4000;
      expect(await sweepQueues(live.services())).toEqual({ checked: 1, unmarked: 1, failed: [] });
      await live.settle();
      expect(await markers(store)).toEqual([]);
      expect(await outboxEvents(store)).toContainEqual({ type: 'turn.failed', turn: 1, code: 'lease_expired' });
      expect(await turnsOf(live.api, id)).toEqual([[1, 'failed', 'lease_expired']]);
    },
  );

  it('keeps the marker of a background turn started between its look at the session and its delete', async () => {
    const store = storeOf();
    let now = START;
    const clock = () => new Date(now);
    // Turn 1 ran in the background and completed: its marker waits for the next sweep.
    const first = process(store, clock, 'in process');
    const id = await first.api.session({});
    expect((await first.api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    await first.settle();
    expect(await turnsOf(first.api, id)).toEqual([[1, 'completed', null]]);
    expect(await markers(store)).toEqual([`queues/${id}`]);
    // The sweep finds nothing queued and no open turn; another process then starts turn 2 in the
    // background, marks the session, and dies while it runs, before the sweep's delete.
    const dying = process(killedWhenRunning(store), clock, 'in process');
    const { racing, raced } = raceMarkerDelete(store, id, async () => {
      expect((await dying.api.post(`/v1/sessions/${id}/turns`, { input: 'two', background: true })).status).toBe(202);
      await expect.poll(async () => (await listAll(store, `sessions/${id}/turn/`)).some(isLease)).toBe(true);
    });
    const sweeper = process(racing, clock, 'none');
    expect(await sweepQueues(sweeper.services())).toEqual({ checked: 1, unmarked: 0, failed: [] });
    expect(raced()).toBe(true);
    expect(await markers(store)).toEqual([`queues/${id}`]);
    // Once turn 2's lease ran out, the next sweep closes it and unmarks the session.
    now += 4000;
    const live = process(store, clock, 'in process');
    expect(await sweepQueues(live.services())).toEqual({ checked: 1, unmarked: 1, failed: [] });
    await live.settle();
    expect(await turnsOf(live.api, id)).toEqual([
      [1, 'completed', null],
      [2, 'failed', 'lease_expired'],
    ]);
    expect(await markers(store)).toEqual([]);
  });

  it('removes stale markers: an enqueue that died before its entry, a session deleted since', async () => {
    const store = storeOf();
    let now = START;
    const clock = () => new Date(now);
    const id = await markedWithoutEntry(store, clock);
    const gone = await deadTurnWithQueue(store, clock, ['q']);
    expect((await process(store, clock, 'none').api.delete(`/v1/sessions/${gone}`)).status).toBe(204);
    expect((await markers(store)).sort()).toEqual([`queues/${id}`, `queues/${gone}`].sort());
    const live = process(store, clock, 'in process');
    // The first session's turn 1 still runs its lease: its marker stays while it does.
    expect(await sweepQueues(live.services())).toEqual({ checked: 2, unmarked: 1, failed: [] });
    await live.settle();
    expect(await markers(store)).toEqual([`queues/${id}`]);
    expect(await turnsOf(live.api, id)).toEqual([[1, 'queued', null]]);
    // Once it ran out, the next sweep closes the turn, and the marker goes.
    now += 4000;
    expect(await sweepQueues(live.services())).toEqual({ checked: 1, unmarked: 1, failed: [] });
    await live.settle();
    expect(await markers(store)).toEqual([]);
    expect(await turnsOf(live.api, id)).toEqual([[1, 'failed', 'lease_expired']]);
  });

  it("reads only markers: another deployment's keys under queues/ (its KEY_PREFIX) are left alone", async () => {
    const store = storeOf();
    let now = START;
    const clock = () => new Date(now);
    const id = await deadTurnWithQueue(store, clock, ['q']);
    // A deployment with KEY_PREFIX `queues/` in the same bucket: a session and a marker of its own.
    const foreign = ['queues/sessions/other/session.json', 'queues/queues/other'];
    for (const key of foreign) await store.put(key, '{}', { contentType: 'application/json' });
    now += 4000;
    const live = process(store, clock, 'in process');
    const sweep = await sweepQueues(live.services());
    await live.settle();
    expect(sweep.checked).toBe(1);
    expect(sweep.failed).toEqual([]);
    expect((await turnsOf(live.api, id)).map(([turn, status]: [number, string]) => [turn, status])).toEqual([
      [1, 'failed'],
      [2, 'completed'],
    ]);
    await sweepQueues(live.services());
    expect((await markers(store)).sort()).toEqual(foreign.sort());
  });

  it('logs a session it cannot sweep and sweeps the others', async () => {
    const store = storeOf();
    let now = START;
    const clock = () => new Date(now);
    const id = await deadTurnWithQueue(store, clock, ['q']);
    const broken = await deadTurnWithQueue(store, clock, ['q']);
    // The session's config no longer parses.
    await store.put(sessionConfigKey('', broken), 'not json', { contentType: 'application/json' });
    now += 4000;
    const live = process(store, clock, 'in process');
    const error = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    let logged: unknown[][];
    try {
      await sweepQueuedSessions(live.services);
      await live.settle();
    } finally {
      logged = [...error.mock.calls];
      error.mockRestore();
    }
    // Its stored config does not parse: the error is named by its `name` (lib/loggable.ts).
    expect(logged).toEqual([
      [
        `tailgate: the queue sweep of session ${broken} failed`,
        expect.stringMatching(/^CorruptObjectError: .*\n\s+at /),
      ],
    ]);
    expect((await turnsOf(live.api, id)).map(([turn, status]: [number, string]) => [turn, status])).toEqual([
      [1, 'failed'],
      [2, 'completed'],
    ]);
    // The sweep that ran turn 2 met it running: the next one, once it closed, removes the marker.
    await sweepQueues(live.services());
    expect(await markers(store)).toEqual([`queues/${broken}`]);
  });

  it("logs an input waiting for the session's budget once, however often it is picked up", async () => {
    const store = storeOf();
    const clock = () => new Date();
    const logged: unknown[][] = [];
    const live = process(store, clock, 'in process', {
      log: (...line) => void logged.push(line),
      info: (line) => void logged.push(['info', line]),
    });
    const { id, keyHash } = await queuedBehindSpentBudget(store, live);
    for (let round = 0; round < 3; round++) {
      expect((await live.api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(1);
      await live.settle();
      // The first sweep unmarks the queue its spent budget holds: the next ones no longer see it.
      const swept = round === 0 ? { checked: 1, unmarked: 1 } : { checked: 0, unmarked: 0 };
      expect(await sweepQueues(live.services())).toEqual({ ...swept, failed: [] });
      await live.settle();
    }
    expect(logged).toEqual([
      [
        'info',
        `tailgate: a queued input of session ${id} (key sha256 ${keyHash}) waits: the session's budget is spent`,
      ],
    ]);
  });

  it("unmarks a queue held by a budget that a stopped turn's stored spend exhausted", async () => {
    const store = storeOf();
    const clock = () => new Date();
    const live = process(store, clock, 'in process');
    const dead = process(store, clock, 'none');
    const id = await live.api.session({ on_busy: 'enqueue', budget: { max_total_tokens: 50 } });
    expect((await dead.api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    expect((await live.api.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
    // What the stopped turn spent, stored as its runner stores it (lib/session/log/unbilled.ts).
    const config = JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', id)))!.body));
    const usage = { input_tokens: 100, cached_input_tokens: 0, cache_write_tokens: 0, output_tokens: 7 };
    const spent = { format: 'tailgate.spent.v1', usage: { ...usage, reasoning_tokens: 0, cost_usd: 0 } };
    await store.put(`sessions/${id}/spent/${config.generation}/000000000001`, JSON.stringify(spent));
    await live.settle();
    await queuedAsStored(store, id);
    // Its pickup is refused by the budget the stored spend exhausted; the sweep's own check sees it too.
    expect(await sweepQueues(live.services())).toEqual({ checked: 1, unmarked: 1, failed: [] });
    expect(await markers(store)).toEqual([]);
  });

  it('unmarks a queue its spent budget holds; a budget raise marks it again, before its own pickup', async () => {
    const store = storeOf();
    const clock = () => new Date();
    const live = process(store, clock, 'in process');
    const { id } = await queuedBehindSpentBudget(store, live);
    expect(await sweepQueues(live.services())).toEqual({ checked: 1, unmarked: 1, failed: [] });
    expect(await markers(store)).toEqual([]);
    expect(await queueEntries(store)).toHaveLength(1);
    // Sweeps no longer take the session up while nothing changes.
    expect(await sweepQueues(live.services())).toEqual({ checked: 0, unmarked: 0, failed: [] });
    // The budget is raised by a process that dies before its pickup (after its response).
    const dying = diesAtItsPickup(store, clock);
    expect((await dying.api.patch(`/v1/sessions/${id}`, { budget: { max_turns: 5 } })).status).toBe(200);
    await dying.settle();
    expect(dying.faulty.injected).toBe(1);
    expect(await markers(store)).toEqual([`queues/${id}`]);
    await sweepQueuedSessions(live.services);
    await live.settle();
    expect(await turnsOf(live.api, id)).toEqual([
      [1, 'completed', null],
      [2, 'completed', null],
    ]);
    expect(await queueEntries(store)).toEqual([]);
  });

  it('keeps the marker of a queue whose budget was raised between its pickup and its delete', async () => {
    const store = storeOf();
    const clock = () => new Date();
    const { id } = await queuedBehindSpentBudget(store, process(store, clock, 'in process'));
    // The raise's process dies before its pickup, right before the sweep's delete of the marker.
    const dying = diesAtItsPickup(store, clock);
    const { racing, raced } = raceMarkerDelete(store, id, async () => {
      expect((await dying.api.patch(`/v1/sessions/${id}`, { budget: { max_turns: 5 } })).status).toBe(200);
    });
    expect(await sweepQueues(process(racing, clock, 'none').services())).toEqual({
      checked: 1,
      unmarked: 0,
      failed: [],
    });
    expect(raced()).toBe(true);
    await sweptAfterDeadRaise(store, clock, dying, id);
  });

  it('keeps the marker of a queue whose raise marked it before the delete, stored after the look', async () => {
    const store = storeOf();
    const clock = () => new Date();
    const { id } = await queuedBehindSpentBudget(store, process(store, clock, 'in process'));
    // The raise's process marks the session, then stores the budget only once the sweep looked
    // at the old one (after its delete), and dies before its pickup.
    let looked!: () => void;
    const sweepLooked = new Promise<void>((resolve) => (looked = resolve));
    let marked!: () => void;
    const raiseMarked = new Promise<void>((resolve) => (marked = resolve));
    const raising = ownStore(store, {
      put: async (key, body, options) => {
        if (key === sessionConfigKey('', id)) await sweepLooked;
        const written = await store.put(key, body, options);
        if (key === `queues/${id}`) marked();
        return written;
      },
    });
    const dying = diesAtItsPickup(raising, clock);
    let patched: Promise<{ status: number }> | undefined;
    let deleted = false;
    const sweeping = ownStore(store, {
      delete: async (keys) => {
        if (keys === `queues/${id}`) {
          patched = dying.api.patch(`/v1/sessions/${id}`, { budget: { max_turns: 5 } });
          await raiseMarked;
          deleted = true;
        }
        return store.delete(keys);
      },
      get: async (key, options) => {
        const object = await store.get(key, options);
        if (deleted && key === sessionConfigKey('', id)) looked();
        return object;
      },
    });
    expect(await sweepQueues(process(sweeping, clock, 'none').services())).toEqual({
      checked: 1,
      unmarked: 1,
      failed: [],
    });
    expect((await patched!).status).toBe(200);
    await sweptAfterDeadRaise(store, clock, dying, id);
  });

  it('keeps the marker of an input queued between its look at the queue and its delete', async () => {
    const store = storeOf();
    let now = START;
    const clock = () => new Date(now);
    const id = await markedWithoutEntry(store, clock);
    // Turn 1's lease ran out: the sweep closes it and looks at the queue. Another process then
    // starts turn 2 and queues an input behind it, before the sweep's delete, and dies.
    now += 4000;
    const other = process(store, clock, 'none');
    const { racing, raced } = raceMarkerDelete(store, id, async () => {
      expect((await other.api.post(`/v1/sessions/${id}/turns`, { input: 'two', background: true })).status).toBe(202);
      expect((await other.api.post(`/v1/sessions/${id}/turns`, { input: 'raced' })).status).toBe(202);
      await other.settle();
    });
    const sweeper = process(racing, clock, 'none');
    expect(await sweepQueues(sweeper.services())).toEqual({ checked: 1, unmarked: 0, failed: [] });
    expect(raced()).toBe(true);
    expect(await markers(store)).toEqual([`queues/${id}`]);
    // Both processes are gone: once turn 2's lease ran out, the next sweep runs the input.
    now += 4000;
    const live = process(store, clock, 'in process');
    await sweepQueuedSessions(live.services);
    await live.settle();
    expect(await turnsOf(live.api, id)).toEqual([
      [1, 'failed', 'lease_expired'],
      [2, 'failed', 'lease_expired'],
      [3, 'completed', null],
    ]);
  });
});

const START = Date.parse('2030-01-01T00:00:00Z');

describe('an enqueue whose process died at any of its storage calls', () => {
  it('leaves no queued input without its marker, and the sweep runs every input stored', async () => {
    const enqueue = async (crashAt: number, after: boolean) => {
      const store = new MemoryStore();
      const clock = () => new Date(START);
      const id = await deadTurnWithQueue(store, clock, []);
      let calls = 0;
      const faulty = new FaultyStore(store)
        .failWhen(() => ++calls === crashAt, { after })
        .failWhen(() => calls > crashAt);
      const dying = process(faulty, clock, 'none');
      await dying.api.post(`/v1/sessions/${id}/turns`, { input: 'queued' });
      await dying.settle();
      return { store, id, calls };
    };
    const { calls: total } = await enqueue(Number.POSITIVE_INFINITY, false);
    expect(total).toBeGreaterThan(3);
    for (let crashAt = 1; crashAt <= total; crashAt++) {
      for (const after of [false, true]) {
        const label = `crash at call ${crashAt}${after ? ' after it landed' : ''}`;
        const { store, id } = await enqueue(crashAt, after);
        const stored = (await queueEntries(store)).length;
        if (stored > 0) expect(await markers(store), label).toEqual([`queues/${id}`]);
        // Turn 1's lease (3 s) has run out.
        const live = process(store, () => new Date(START + 4000), 'in process');
        await sweepQueuedSessions(live.services);
        await live.settle();
        await sweepQueuedSessions(live.services);
        expect(await queueEntries(store), label).toEqual([]);
        expect(await markers(store), label).toEqual([]);
        const turns = await turnsOf(live.api, id);
        expect(turns.slice(1), label).toEqual(stored > 0 ? [[2, 'completed', null]] : []);
      }
    }
  });
});

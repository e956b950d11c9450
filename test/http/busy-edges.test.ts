import { describe, expect, it } from 'vitest';
import { createApp, createTurnRunner, type AppOptions } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { Body, PutOptions } from '../../lib/store/object-store.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';
import { listAll } from '../../lib/store/object-store.ts';
import { parseResponseId } from '../../lib/openai/ids.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';
import { SessionLog } from '../support/session-log.ts';
import { WEBHOOK_SECRET } from '../support/webhook-receiver.ts';
import { settled } from './background-suite.ts';
import { createClient, openCallBehindTurn, parseSse, TOKEN, type HttpHarness } from './http-suite.ts';

// Background turns and the busy policies at their edges (docs/API.md, "Busy sessions", "Coming
// back to a stream"): a bad input is a 400 whatever runs, a queued input its turn refuses does
// not hold the queue, a background turn is refused as the foreground one is, its journal ends
// with its failure, and queued inputs keep their order on a store that stamps by the second.

const environment = () => ({ API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '3000' });
/** A small PNG, distinct for each `fill`. */
const imageUrl = (fill: number) => dataUrl('image/png', pngBytes(8, 8, 64, fill));
const noCall = [{ type: 'function_call_output', call_id: 'call_nope', output: 'x' }];

function harnessFor(
  store: MemoryStore | FaultyStore,
  options: Partial<AppOptions> = {},
  settings: Record<string, string> = {},
) {
  const logged: string[] = [];
  const full: AppOptions = {
    readEnvironment: (c) => c.env ?? {},
    log: (message) => void logged.push(message),
    ...options,
    store: () => store,
  };
  const app = createApp(full);
  const harness: HttpHarness = {
    fetch: async (path, init) => app.request(path, init, { ...environment(), ...settings }),
    fetchWithEnv: async (overrides, path, init) =>
      app.request(path, init, { ...environment(), ...settings, ...overrides }),
    store,
    keyPrefix: '',
    logged,
  };
  return { harness, api: createClient(harness), options: full };
}

/** A session whose background turns go to `sent`, run only when `runAll` is called (`options`: the app's, a clock). */
function queuedRunner(store: MemoryStore | FaultyStore = new MemoryStore(), options: Partial<AppOptions> = {}) {
  const sent: BackgroundTurn[] = [];
  const built = harnessFor(store, { ...options, queueTurn: () => async (run) => void sent.push(run) });
  const runner = createTurnRunner(built.options);
  const runAll = async () => {
    const background: Promise<unknown>[] = [];
    for (let index = 0; index < sent.length; index++) {
      expect(await runner(sent[index]!, environment(), (task) => void background.push(task))).toBe('done');
      while (background.length > 0) await Promise.allSettled(background.splice(0));
    }
  };
  return { ...built, sent, runAll };
}

/**
 * Holds the first two create-only record puts (`turn/<g>/<n>`) until both wait: both claims read
 * an idle head. The first waits for the second however long it takes (a loaded machine).
 */
class PairedClaims extends MemoryStore {
  #waiting: (() => void)[] = [];
  override async put(key: string, body: Body, options?: PutOptions) {
    if (options?.onlyIfAbsent && /\/turn\/[^/]+\/\d+$/.test(key) && this.#waiting.length < 2) {
      await new Promise<void>((resolve) => {
        this.#waiting.push(resolve);
        if (this.#waiting.length === 2) for (const go of this.#waiting) go();
      });
    }
    return super.put(key, body, options);
  }
}

async function userInputs(api: ReturnType<typeof createClient>, id: string): Promise<unknown[]> {
  const items = (await api.get(`/v1/sessions/${id}/items?limit=100`)).body.items;
  return items
    .reverse()
    .filter((item: any) => item.role === 'user')
    .map((item: any) => item.content);
}

describe('the busy policies at their edges', () => {
  it('answers a bad input 400 under every policy: nothing queued, nothing cancelled', async () => {
    const { api } = queuedRunner();
    const id = await api.session({ on_busy: 'enqueue' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    for (const on_busy of ['reject', 'enqueue', 'interrupt']) {
      const bad = await api.post(`/v1/sessions/${id}/turns`, { input: noCall, on_busy });
      expect(bad.status, `${on_busy}: ${JSON.stringify(bad.body)}`).toBe(400);
    }
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('queued');
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(0);
  });

  it('drops a queued input its turn refuses (its call answered before it): the ones after it run', async () => {
    const { api, runAll } = queuedRunner();
    const id = await api.session({ on_busy: 'enqueue' });
    // Valid when sent (the call is open), both: the first will have answered it when the second's turn comes.
    const answer = await openCallBehindTurn(api, id);
    for (const input of [answer, answer, 'good'])
      expect((await api.post(`/v1/sessions/${id}/turns`, { input })).status).toBe(202);
    await runAll();
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(0);
    expect((await userInputs(api, id)).at(-1)).toBe('good');
  });

  it("keeps a queued input's Idempotency-Key to it: another body under the key is 422, the input stays", async () => {
    let now = Date.parse('2030-01-01T00:00:00Z');
    const tasks: Promise<unknown>[] = [];
    const { api, harness, runAll, sent } = queuedRunner(new MemoryStore(), {
      clock: () => new Date(now),
      afterResponse: (task) => void tasks.push(task),
    });
    const id = await api.session({ on_busy: 'enqueue' });
    // Turn 1's runner never comes (a backlog, a process that died): it holds the session for its lease.
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    const key = { 'idempotency-key': `k-${id}` };
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'queued first' }, key)).status).toBe(202);
    // The enqueue's own pickup, refused while the lease holds the session, ends before it runs out.
    while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
    // The lease (TURN_LEASE_MS 3000) runs out by the service clock; the queued input waits for the next turn.
    now += 3200;
    const other = await api.post(`/v1/sessions/${id}/turns`, { input: 'another body', on_busy: 'reject' }, key);
    expect(other.status, JSON.stringify(other.body)).toBe(422);
    expect(other.body.error.code).toBe('idempotency_key_reused');
    // Read from the store: a listing of the queue would take the input up (the lease ran out).
    const queued = (await harness.store.list('')).objects.filter(({ key }) => key.includes('/queue/'));
    expect(queued).toHaveLength(1);
    // The same request under the key is the input itself: it finds the session idle and the
    // queue's signal raised, so the queued input is taken up first, as its turn, which its key
    // then names while it runs (as a retry of a queued input is answered), and replays once it ran.
    const same = await api.post(`/v1/sessions/${id}/turns`, { input: 'queued first', on_busy: 'reject' }, key);
    expect(same.status, JSON.stringify(same.body)).toBe(409);
    expect(same.body.error.details.turn).toBe(2);
    sent.splice(0, 1);
    await runAll();
    const ran = await api.post(`/v1/sessions/${id}/turns`, { input: 'queued first', on_busy: 'reject' }, key);
    expect(ran.status, JSON.stringify(ran.body)).toBe(200);
    expect(await userInputs(api, id)).toEqual(['first', 'queued first']);
  });

  it('keeps the key to a queued input waiting in the generation a delete of the newest turn left', async () => {
    const store = new FaultyStore(new MemoryStore());
    const { api, runAll } = queuedRunner(store);
    const id = await api.session({ on_busy: 'enqueue' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'one' })).status).toBe(200);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'two', background: true })).status).toBe(202);
    const key = { 'idempotency-key': `k-${id}` };
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'queued' }, key)).status).toBe(202);
    // Turn 2 closes; the pickup's claim of the queued input fails (its record's put): it waits.
    const recordPut = ({ operation, key }: { operation: string; key: string }) =>
      operation === 'put' && /\/turn\/.*\/\d+$/.test(key);
    store.failWhen(recordPut, { times: 1 });
    await runAll();
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(1);
    expect((await api.delete(`/v1/sessions/${id}/turns/2`)).status).toBe(200);
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(1);
    const other = await api.post(`/v1/sessions/${id}/turns`, { input: 'another body', on_busy: 'reject' }, key);
    expect(other.status, JSON.stringify(other.body)).toBe(422);
  });

  it('runs queued inputs in the order they were queued when the store stamps uploads by the second (S3)', async () => {
    const second = new Date(Math.floor(Date.now() / 1000) * 1000);
    const { api, runAll } = queuedRunner(new MemoryStore({ clock: () => second }));
    const id = await api.session({ on_busy: 'enqueue' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    const inputs = ['one', 'two', 'three', 'four', 'five', 'six'];
    for (const input of inputs) expect((await api.post(`/v1/sessions/${id}/turns`, { input })).status).toBe(202);
    const listed = (await api.get(`/v1/sessions/${id}/queue`)).body;
    expect(listed.total).toBe(6);
    await runAll();
    expect(await userInputs(api, id)).toEqual(['first', ...inputs]);
  });

  it('refuses a background turn whose model cannot run here (503, nothing stored), as a foreground one', async () => {
    const { harness, api } = queuedRunner();
    const id = await api.session();
    const unconfigured = { DEFAULT_MODEL: 'anthropic:claude-sonnet-4-5' };
    for (const background of [false, true]) {
      const response = await harness.fetchWithEnv!(unconfigured, `/v1/sessions/${id}/turns`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ input: 'x', background }),
      });
      expect(response.status, `background ${background}`).toBe(503);
      expect(((await response.json()) as any).error.code).toBe('not_configured');
    }
    expect((await api.get(`/v1/sessions/${id}`)).body.counts).toMatchObject({ items: 0, turns: 0 });
  });

  it('stores no image of a turn refused as the session is busy or its budget spent, background or not', async () => {
    const { harness, api, runAll } = queuedRunner();
    const blobs = async () =>
      (await listAll(harness.store, '')).filter((object) => object.key.includes('/blob/')).map((object) => object.key);
    const withImage = (fill: number) => [
      { type: 'message', role: 'user', content: [{ type: 'input_image', image_url: imageUrl(fill) }] },
    ];
    const id = await api.session({ budget: { max_turns: 2 } });
    // The session's first turn holds it: claimed, its runner not called yet.
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    for (const background of [false, true]) {
      const busy = await api.post(`/v1/sessions/${id}/turns`, { input: withImage(1), background, on_busy: 'reject' });
      expect(busy.status, `background ${background}: ${JSON.stringify(busy.body)}`).toBe(409);
    }
    expect(await blobs()).toEqual([]);
    await runAll();
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'second' })).status).toBe(200);
    for (const background of [false, true]) {
      const spent = await api.post(`/v1/sessions/${id}/turns`, { input: withImage(2), background });
      expect(spent.status, `background ${background}: ${JSON.stringify(spent.body)}`).toBe(402);
    }
    expect(await blobs()).toEqual([]);
  });

  it('stores the image of an input queued behind a running turn, which its turn then sends', async () => {
    const { harness, api, runAll } = queuedRunner();
    const id = await api.session({ on_busy: 'enqueue' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    const input = [{ type: 'message', role: 'user', content: [{ type: 'input_image', image_url: imageUrl(3) }] }];
    expect((await api.post(`/v1/sessions/${id}/turns`, { input })).status).toBe(202);
    const blobs = (await listAll(harness.store, '')).filter((object) => object.key.includes('/blob/'));
    expect(blobs).toHaveLength(1);
    await runAll();
    expect((await api.get(`/v1/sessions/${id}/turns/2`)).body.status).toBe('completed');
  });
});

describe('two turns racing for an idle session', () => {
  it("the loser's images may stay: the winner's turn and blob are intact, the rest go with the session", async () => {
    const { harness, api, runAll } = queuedRunner(new PairedClaims());
    const blobs = async () =>
      (await listAll(harness.store, '')).filter((object) => object.key.includes('/blob/')).map((object) => object.key);
    const withImage = (fill: number) => [
      { type: 'message', role: 'user', content: [{ type: 'input_image', image_url: imageUrl(fill) }] },
    ];
    const id = await api.session({ on_busy: 'reject' });
    // Both pass every check and write their blob before their record's put; one put lands, the
    // other claim reads again, finds that turn open, and is refused (docs/STORAGE.md, "Images and files").
    const answers = await Promise.all(
      [1, 2].map((fill) => api.post(`/v1/sessions/${id}/turns`, { input: withImage(fill), background: true })),
    );
    expect(answers.map((answer) => answer.status).sort()).toEqual([202, 409]);
    expect(answers.find((answer) => answer.status === 409)!.body.error.code).toBe('turn_in_progress');
    const [winner, loser] = answers[0]!.status === 202 ? [1, 2] : [2, 1];
    expect(await blobs()).toHaveLength(2);
    await runAll();
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('completed');
    const [content] = (await userInputs(api, id)) as { blob: string }[][];
    const image = content![0]!;
    const served = await harness.fetch(`/v1/sessions/${id}/blobs/${image.blob}`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(served.status).toBe(200);
    expect(new Uint8Array(await served.arrayBuffer())).toEqual(pngBytes(8, 8, 64, winner));
    // The session answers as before; the loser's input sent again stores its image once more (the same object).
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: withImage(loser) });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(await blobs()).toHaveLength(2);
    expect((await api.delete(`/v1/sessions/${id}`)).status).toBe(204);
    expect(await blobs()).toEqual([]);
  });
});

/**
 * A session whose turn 1's runner never comes (its process died), holding the session for its
 * lease, with an input queued behind it; `expire` runs that lease out by the service clock.
 */
async function queuedBehindDeadTurn(
  store: MemoryStore | FaultyStore = new MemoryStore(),
  first: { body: Record<string, unknown>; headers?: Record<string, string> } = {
    body: { input: 'first', background: true },
  },
  settings: Record<string, string> = {},
) {
  let now = Date.parse('2030-01-01T00:00:00Z');
  const sent: BackgroundTurn[] = [];
  const queueTurn = () => async (run: BackgroundTurn) => void sent.push(run);
  const tasks: Promise<unknown>[] = [];
  const afterResponse = (task: Promise<unknown>) => void tasks.push(task);
  const built = harnessFor(store, { clock: () => new Date(now), queueTurn, afterResponse }, settings);
  const { api } = built;
  const id = await api.session({ on_busy: 'enqueue' });
  expect((await api.post(`/v1/sessions/${id}/turns`, first.body, first.headers)).status).toBe(202);
  expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'queued' })).status).toBe(202);
  /** Awaits the work the app left after its responses (a listing's pickup). */
  const drain = async () => {
    while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
  };
  // The enqueue's own pickup, refused while turn 1 holds the session: done before the lease runs
  // out, so the pickup that takes the input up is the one each test's closer or listing starts.
  await drain();
  expect(sent).toHaveLength(1);
  const expire = () => {
    now += 4000;
  };
  return { ...built, id, sent, expire, drain };
}

describe('the event journal of a background turn that failed', () => {
  async function events(harness: HttpHarness, id: string) {
    const response = await harness.fetch(`/v1/sessions/${id}/turns/1/events`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    const text = await response.text();
    return { status: response.status, events: response.status === 200 ? parseSse(text) : [], text };
  }

  it('ends with the error of a failure before its model call (an abort notice)', async () => {
    const { harness, api } = harnessFor(new MemoryStore());
    const id = await api.session({ strategies: ['inbox'] });
    expect((await api.post(`/v1/sessions/${id}/inbox`, { name: 'abort', content: 'stop now' })).status).toBe(201);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'go', background: true })).status).toBe(202);
    expect(await settled(api, id, 1)).toMatchObject({ status: 'aborted' });
    const followed = await events(harness, id);
    expect(followed.status, followed.text).toBe(200);
    expect(followed.events.at(-1)).toMatchObject({ event: 'error', data: { error: { code: 'aborted' } } });
  });

  it("takes up an input queued behind a dead turn once a reader of the turn's events closes it", async () => {
    const { harness, api, id, sent, expire } = await queuedBehindDeadTurn();
    expire();
    const followed = await events(harness, id);
    expect(followed.events.at(-1)).toMatchObject({ event: 'error', data: { error: { code: 'lease_expired' } } });
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('failed');
    // The session is idle: its queued input goes on, handed to a runner as turn 2.
    await expect.poll(() => sent.length).toBe(2);
    expect((await api.get(`/v1/sessions/${id}/turns/2`)).body.status).toBe('queued');
  });

  it('ends with the error when a storage failure closed it as failed', async () => {
    const store = new FaultyStore(new MemoryStore());
    const { harness, api } = harnessFor(store);
    const id = await api.session();
    // The completion's put fails once; the close as failed lands: the turn is failed, not open.
    store.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.done'), { times: 1 });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'hello', background: true })).status).toBe(202);
    expect((await settled(api, id, 1)).status).toBe('failed');
    const followed = await events(harness, id);
    expect(followed.status).toBe(200);
    expect(followed.events[0]).toMatchObject({ event: 'turn.started' });
    expect(followed.events.at(-1)?.event, followed.text).toBe('error');
  });
});

describe('the inputs queued behind a dead turn', () => {
  const first = { input: 'first', background: true };
  const key = { 'idempotency-key': 'k-first' };
  it.each([
    [
      'an append of items',
      (id: string) => ({
        path: `/v1/sessions/${id}/items`,
        body: { items: [{ type: 'message', role: 'user', content: 'note' }] },
        headers: {},
      }),
    ],
    [
      "a retry of the dead turn's request (its key)",
      (id: string) => ({ path: `/v1/sessions/${id}/turns`, body: first, headers: key }),
    ],
  ])('are taken up once %s closes the dead turn', async (_name, closer) => {
    const { api, id, sent, expire } = await queuedBehindDeadTurn(new MemoryStore(), { body: first, headers: key });
    expire();
    const { path, body, headers } = closer(id);
    const closed = await api.post(path, body, headers);
    expect(closed.status, JSON.stringify(closed.body)).toBeLessThan(300);
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({ error: { code: 'lease_expired' } });
    // The session is idle: its queued input goes on, handed to a runner as turn 2.
    await expect.poll(() => sent.length).toBe(2);
    expect((await api.get(`/v1/sessions/${id}/turns/2`)).body.status).toBe('queued');
  });
});

describe('the inputs queued behind a dead turn closed by a model turn that then stored nothing', () => {
  it('are taken up all the same: the pickup does not wait for a turn that never came', async () => {
    const store = new FaultyStore(new MemoryStore());
    const { api, id, sent, expire } = await queuedBehindDeadTurn(store);
    expire();
    // A model turn's claim closes turn 1, then its own record's put fails: it stores nothing.
    store.failWhen(({ operation, key }) => operation === 'put' && /\/turn\/[^/]+\/\d+$/.test(key), { times: 1 });
    const failed = await api.post(`/v1/sessions/${id}/turns`, { input: 'newcomer' });
    expect(failed.status, JSON.stringify(failed.body)).toBeGreaterThanOrEqual(500);
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({ error: { code: 'lease_expired' } });
    // The session is idle: its queued input goes on, handed to a runner as turn 2.
    await expect.poll(() => sent.length).toBe(2);
    expect((await api.get(`/v1/sessions/${id}/turns/2`)).body.status).toBe('queued');
    expect(await userInputs(api, id)).toEqual(['first', 'queued']);
  });
});

describe('the inputs queued behind a dead turn that no writer comes to', () => {
  it.each([
    ['its lease ran out', async () => undefined],
    [
      'a closer of the dead turn died before its pickup',
      async (store: MemoryStore, id: string) => {
        // A process of its own that closes turn 1 as lease_expired, then dies: no pickup follows.
        const dying = new SessionLog(store, { leaseMs: 3000, clock: () => new Date(Date.parse('2031-01-01')) });
        expect(await dying.closeIfExpired(id, 1)).toMatchObject({ error: { code: 'lease_expired' } });
      },
    ],
  ])('are taken up once their client lists the queue (%s)', async (_name, close) => {
    const store = new MemoryStore();
    const { api, id, sent, expire, drain } = await queuedBehindDeadTurn(store);
    expire();
    await close(store, id);
    const listed = await api.get(`/v1/sessions/${id}/queue`);
    expect(listed.body).toMatchObject({ total: 1, queued: [{ position: 1 }] });
    // The listing's pickup, after its answer: the session is idle by the clock, its input goes on as turn 2.
    await drain();
    expect(sent).toHaveLength(2);
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({ error: { code: 'lease_expired' } });
    expect((await api.get(`/v1/sessions/${id}/turns/2`)).body.status).toBe('queued');
    expect((await api.get(`/v1/sessions/${id}/queue`)).body).toMatchObject({ total: 0, queued: [] });
  });

  it('are left alone while the turn holding the session runs: the listing stores nothing', async () => {
    const store = new MemoryStore();
    const { api, id, sent, drain } = await queuedBehindDeadTurn(store);
    const before = (await store.list('')).objects.map((object) => object.key);
    expect((await api.get(`/v1/sessions/${id}/queue`)).body).toMatchObject({ total: 1 });
    await drain();
    expect(sent).toHaveLength(1);
    expect((await store.list('')).objects.map((object) => object.key)).toEqual(before);
  });
});

describe('a pickup whose removal of the queued entry fails', () => {
  it('hands the turn it claimed to a runner all the same: the entry goes at the next pickup', async () => {
    const store = new FaultyStore(new MemoryStore());
    const { api, sent, runAll } = queuedRunner(store);
    const id = await api.session({ on_busy: 'enqueue' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'queued' })).status).toBe(202);
    store.failWhen(({ operation, key }) => operation === 'delete' && key.includes('/queue/'), { times: 1 });
    await runAll();
    expect(store.injected).toBe(1);
    expect(sent).toHaveLength(2);
    expect((await api.get(`/v1/sessions/${id}/turns/2`)).body.status).toBe('completed');
    expect(await userInputs(api, id)).toEqual(['first', 'queued']);
    await expect.poll(async () => (await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(0);
  });
});

describe('a background turn whose runner never comes, followed by its receipt', () => {
  it('ends failed (lease_expired) once its lease ran out, and the input queued behind it goes on', async () => {
    const { api, id, sent, expire } = await queuedBehindDeadTurn();
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('queued');
    expire();
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({
      status: 'failed',
      error: { code: 'lease_expired' },
    });
    await expect.poll(() => sent.length).toBe(2);
    expect((await api.get(`/v1/sessions/${id}/turns/2`)).body.status).toBe('queued');
  });
});

describe('an enqueue whose own pickup fails after its input was stored', () => {
  it('answers 202 all the same: the input is queued once, and runs once the turn before it closes', async () => {
    const store = new FaultyStore(new MemoryStore());
    const { api, runAll } = queuedRunner(store);
    const id = await api.session({ on_busy: 'enqueue' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    // The entry lands, its position is listed, then the pickup's listing of the queue fails.
    let stored = false;
    let lists = 0;
    store.failWhen(({ operation, key }) => {
      if (operation === 'put' && key.includes('/queue/')) stored = true;
      return stored && operation === 'list' && key.includes('/queue/') && ++lists === 2;
    });
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'queued' });
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    expect(queued.body).toMatchObject({ position: 1 });
    // Its pickup, after the answer.
    await expect.poll(() => store.injected).toBe(1);
    await runAll();
    expect(await userInputs(api, id)).toEqual(['first', 'queued']);
  });
});

describe('a background turn whose runner never comes, read while its close cannot be written', () => {
  it('answers its receipt as read when the completion put fails, and fails it at the next read', async () => {
    const store = new FaultyStore(new MemoryStore());
    const { api, id, sent, expire } = await queuedBehindDeadTurn(store);
    expire();
    store.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.done'), { times: 1 });
    // A GET reads: a close it could not write leaves the turn as it stood, not the GET a 503.
    const read = await api.get(`/v1/sessions/${id}/turns/1`);
    expect(read.status, JSON.stringify(read.body)).toBe(200);
    expect(read.body.status).toBe('queued');
    expect(store.injected).toBe(1);
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({ error: { code: 'lease_expired' } });
    await expect.poll(() => sent.length).toBe(2);
  });

  it("answers it failed when the close landed and only the turn's webhook event could not be written", async () => {
    const store = new FaultyStore(new MemoryStore());
    const { api, id, sent, expire } = await queuedBehindDeadTurn(store, undefined, {
      WEBHOOK_SECRET,
      WEBHOOK_URL: 'https://hooks.example.com/tailgate',
    });
    expire();
    store.failWhen(({ operation, key }) => operation === 'put' && key.includes('webhooks/outbox/'));
    const read = await api.get(`/v1/sessions/${id}/turns/1`);
    expect(read.status, JSON.stringify(read.body)).toBe(200);
    expect(read.body).toMatchObject({ status: 'failed', error: { code: 'lease_expired' } });
    expect(store.injected).toBeGreaterThan(0);
    await expect.poll(() => sent.length).toBe(2);
  });

  it('answers a cancel that landed though its webhook event could not be written, and takes up the queue', async () => {
    const store = new FaultyStore(new MemoryStore());
    const { api, harness, id, sent } = await queuedBehindDeadTurn(store, undefined, {
      WEBHOOK_SECRET,
      WEBHOOK_URL: 'https://hooks.example.com/tailgate',
    });
    store.failWhen(({ operation, key }) => operation === 'put' && key.includes('webhooks/outbox/'));
    const cancelled = await api.post(`/v1/sessions/${id}/turns/1/cancel`, {});
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    expect(cancelled.body).toEqual({ session_id: id, turn: 1, status: 'failed' });
    expect(store.injected).toBeGreaterThan(0);
    expect(harness.logged).toContainEqual(
      expect.stringContaining(`turn 1 of session ${id} is closed (turn_cancelled)`),
    );
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({ status: 'cancelled' });
    // The queued input is taken up as after any cancel.
    await expect.poll(() => sent.length).toBe(2);
  });

  it("answers a background response's cancel that landed though its webhook event could not be written", async () => {
    const store = new FaultyStore(new MemoryStore());
    const sent: BackgroundTurn[] = [];
    const { api, harness } = harnessFor(
      store,
      { queueTurn: () => async (run) => void sent.push(run) },
      { WEBHOOK_SECRET, WEBHOOK_URL: 'https://hooks.example.com/tailgate' },
    );
    const created = await api.post('/v1/responses', { model: 'echo', input: 'later', background: true });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    // An input queued behind the response's turn, on its session.
    const { sessionId } = parseResponseId(created.body.id)!;
    const queued = await api.post(`/v1/sessions/${sessionId}/turns`, { input: 'queued', on_busy: 'enqueue' });
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    expect(sent).toHaveLength(1);
    store.failWhen(({ operation, key }) => operation === 'put' && key.includes('webhooks/outbox/'));
    const cancelled = await api.post(`/v1/responses/${created.body.id}/cancel`, {});
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    expect(cancelled.body).toMatchObject({ id: created.body.id, status: 'cancelled' });
    expect(store.injected).toBeGreaterThan(0);
    expect(harness.logged).toContainEqual(expect.stringContaining(`session ${sessionId} is closed (turn_cancelled)`));
    await expect.poll(() => sent.length).toBe(2);
  });

  it('interrupts a running turn whose cancel landed though its webhook event could not be written', async () => {
    const store = new FaultyStore(new MemoryStore());
    const { api, harness } = harnessFor(
      store,
      { queueTurn: () => async () => undefined },
      { WEBHOOK_SECRET, WEBHOOK_URL: 'https://hooks.example.com/tailgate' },
    );
    const id = await api.session();
    // Turn 1's runner never comes: it holds the session for its lease.
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    // The cancel's event, the first outbox write after this.
    store.failWhen(({ operation, key }) => operation === 'put' && key.includes('webhooks/outbox/'), { times: 1 });
    const next = await api.post(`/v1/sessions/${id}/turns`, { input: 'next', on_busy: 'interrupt' });
    expect(next.status, JSON.stringify(next.body)).toBe(200);
    expect(next.body).toMatchObject({ turn: 2 });
    expect(store.injected).toBe(1);
    expect(harness.logged).toContainEqual(
      expect.stringContaining(`turn 1 of session ${id} is closed (turn_cancelled)`),
    );
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({ status: 'cancelled' });
    expect((await api.get(`/v1/sessions/${id}/turns/2`)).body).toMatchObject({ status: 'completed' });
  });
});

describe('a cancel whose own close did not land', () => {
  it('is answered its storage error though another cancel closed the turn, and says nothing of a cancel', async () => {
    const store = new FaultyStore(new MemoryStore());
    const { api, harness, id, sent } = await queuedBehindDeadTurn(store);
    expect((await api.post(`/v1/sessions/${id}/turns/1/cancel`, {})).status).toBe(200);
    await expect.poll(() => sent.length).toBe(2);
    // This request's first read fails: its cancel never reached the turn, cancelled by the other.
    store.failWhen(() => true, { times: 1 });
    const logs = harness.logged.length;
    const again = await api.post(`/v1/sessions/${id}/turns/1/cancel`, {});
    expect(again.status, JSON.stringify(again.body)).toBe(503);
    expect(store.injected).toBe(1);
    expect(harness.logged.slice(logs).join(' ')).not.toContain('is closed');
    expect((await api.post(`/v1/sessions/${id}/turns/1/cancel`, {})).status).toBe(409);
  });
});

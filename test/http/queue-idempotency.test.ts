import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FileStore } from '../../lib/store/file.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { listAll, type ObjectStore } from '../../lib/store/object-store.ts';
import { queueMarkerKey } from '../../lib/session/keys.ts';
import { appHarness } from '../support/app-harness.ts';
import { queuedRuns } from '../support/queued-runs.ts';
import { createClient, parseSse, SIGNING_KEY, TOKEN } from './http-suite.ts';
import { sha256Hex } from '../../lib/hash.ts';

// One Idempotency-Key, one input, on a session that queues behind a busy turn (docs/API.md,
// "Busy sessions"): a different request under a key already used is 422 idempotency_key_reused
// before anything is queued, whether the key's input ran already or still waits in the queue,
// and whether the different request would run in the foreground, streamed or in the
// background; the same request under the key is its replay (the answer it had, or the same 202).
// So too when the key's first request ran while the other was on its way to the queue; one
// whose entry lands only after that turn began is answered 202 and dropped, logged, by its pickup.

const directory = await mkdtemp(join(tmpdir(), 'tailgate-queue-idempotency-'));
afterAll(() => rm(directory, { recursive: true, force: true, maxRetries: 5 }));

const environment = { API_TOKEN: TOKEN, TOKEN_SIGNING_KEY: SIGNING_KEY, DEFAULT_MODEL: 'echo' };
const stores: [string, () => ObjectStore][] = [
  ['memory', () => new MemoryStore()],
  ['file store', () => new FileStore(directory)],
];

/** `store` whose first put of a key `held` takes waits until `release()`; `reached` resolves when it arrives. */
function gated(store: ObjectStore, held: (key: string) => boolean) {
  let arrived!: () => void;
  let release!: () => void;
  const reached = new Promise<void>((resolve) => (arrived = resolve));
  const released = new Promise<void>((resolve) => (release = resolve));
  const put: ObjectStore['put'] = async (putKey, body, options) => {
    if (held(putKey)) {
      arrived();
      await released;
    }
    return store.put(putKey, body, options);
  };
  const wrapped: ObjectStore = {
    get: (getKey, options) => store.get(getKey, options),
    head: (headKey) => store.head(headKey),
    put,
    list: (prefix, options) => store.list(prefix, options),
    delete: (keys) => store.delete(keys),
  };
  return { store: wrapped, reached, release };
}

/**
 * A process on `store` whose background turns wait until `runAll` runs them (so a background
 * turn holds the session until then), and whose work after a response is awaited by `drain`.
 */
function process(store: ObjectStore) {
  const infos: string[] = [];
  const { options, drain, runAll } = queuedRuns(
    { store: () => store, readEnvironment: (c) => c.env ?? environment, info: (line) => void infos.push(line) },
    environment,
  );
  const harness = appHarness(store, environment, options);
  return { api: createClient(harness), store, drain, runAll, logged: harness.logged, infos };
}

type World = ReturnType<typeof process>;

/** The inputs stored in session `id`'s queue, read from the store (a listing of the queue would take them up). */
async function queuedEntries(world: World, id: string): Promise<string[]> {
  const keys = (await listAll(world.store, '')).map((object) => object.key);
  return keys.filter((key) => key.includes(`${id}/`) && key.includes('/queue/'));
}

/** The user inputs of session `id`, oldest first. */
async function userInputs(world: World, id: string): Promise<unknown[]> {
  const items = (await world.api.get(`/v1/sessions/${id}/items?limit=100`)).body.items;
  return items
    .reverse()
    .filter((item: any) => item.role === 'user')
    .map((item: any) => item.content);
}

/** Another body under `key` while turn `holder` holds the session: each way of sending it is 422, nothing queued. */
async function expectRefused(world: World, id: string, key: Record<string, string>, queuedBefore: string[]) {
  const turns = `/v1/sessions/${id}/turns`;
  const ways: [string, Record<string, unknown>][] = [
    ['the session policy', { input: 'another body' }],
    ['on_busy enqueue', { input: 'another body', on_busy: 'enqueue' }],
    ['other settings', { input: 'first', on_busy: 'enqueue', max_output_tokens: 64 }],
    ['background', { input: 'another body', background: true }],
  ];
  for (const [way, body] of ways) {
    const refused = await world.api.post(turns, body, key);
    expect(refused.status, `${way}: ${JSON.stringify(refused.body)}`).toBe(422);
    expect(refused.body.error.code).toBe('idempotency_key_reused');
  }
  const streamed = await world.api.post(turns, { input: 'another body', stream: true }, key);
  expect(streamed.status, String(streamed.body)).toBe(422);
  expect(streamed.body.error.code).toBe('idempotency_key_reused');
  await world.drain();
  expect(await queuedEntries(world, id)).toEqual(queuedBefore);
}

describe.each(stores)('an Idempotency-Key on a session that queues behind a busy turn: %s', (_, storeOf) => {
  it('refuses another request under the key of a turn that ran (422, nothing queued); replays the same', async () => {
    const world = process(storeOf());
    const { api } = world;
    const id = await api.session({ on_busy: 'enqueue' });
    const key = { 'idempotency-key': `ran-${id}` };
    const first = await api.post(`/v1/sessions/${id}/turns`, { input: 'first' }, key);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    // Turn 2's runner has not come yet: it holds the session.
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'holder', background: true })).status).toBe(202);
    await expectRefused(world, id, key, []);
    // The same request under the key is its answer again, though the session is busy.
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: 'first' }, key);
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body.turn).toBe(1);
    expect(again.body.output).toEqual(first.body.output);
    await world.runAll();
    expect(await userInputs(world, id)).toEqual(['first', 'holder']);
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(0);
  });

  it('refuses another request under the key of a queued input that ran since (422, nothing queued)', async () => {
    const world = process(storeOf());
    const { api } = world;
    const id = await api.session({ on_busy: 'enqueue' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'holder', background: true })).status).toBe(202);
    const key = { 'idempotency-key': `queued-ran-${id}` };
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'first' }, key);
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    await world.runAll();
    expect(await userInputs(world, id)).toEqual(['holder', 'first']);
    // Turn 3's runner has not come yet: it holds the session.
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'holder 2', background: true })).status).toBe(202);
    await expectRefused(world, id, key, []);
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: 'first' }, key);
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body.turn).toBe(2);
    await world.runAll();
    expect(await userInputs(world, id)).toEqual(['holder', 'first', 'holder 2']);
  });

  it('refuses another request under the key of an input still queued (422); the same is the same 202', async () => {
    const world = process(storeOf());
    const { api } = world;
    const id = await api.session({ on_busy: 'enqueue' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'holder', background: true })).status).toBe(202);
    const key = { 'idempotency-key': `queued-${id}` };
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'first' }, key);
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    expect(queued.body.position).toBe(1);
    await world.drain();
    const entries = await queuedEntries(world, id);
    expect(entries).toHaveLength(1);
    await expectRefused(world, id, key, entries);
    // The refusal names the queued input the key holds, which has no turn yet.
    for (const body of [{ input: 'another body' }, { input: 'another body', on_busy: 'enqueue' }]) {
      const refused = await api.post(`/v1/sessions/${id}/turns`, body, key);
      expect(refused.status).toBe(422);
      expect(refused.body.error.details).toEqual({ queued_turn: queued.body.queued_turn });
      expect(refused.body.error.message).toBe(
        `the Idempotency-Key was used for queued input ${queued.body.queued_turn} with a different request`,
      );
    }
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: 'first' }, key);
    expect(again.status, JSON.stringify(again.body)).toBe(202);
    expect(again.body).toEqual(queued.body);
    await world.drain();
    expect(await queuedEntries(world, id)).toEqual(entries);
    await world.runAll();
    expect(await userInputs(world, id)).toEqual(['holder', 'first']);
    // Run, the key answers the queued input's turn.
    const ran = await api.post(`/v1/sessions/${id}/turns`, { input: 'first' }, key);
    expect(ran.status, JSON.stringify(ran.body)).toBe(200);
    expect(ran.body.turn).toBe(2);
    const events = parseSse((await api.get(`/v1/sessions/${id}/turns/2/events`)).body);
    expect(events.at(-1)?.event).toBe('turn.completed');
  });

  it('refuses a request queued behind a turn after another request under its key ran meanwhile (422)', async () => {
    const id = `s-race-${Math.random().toString(36).slice(2, 10)}`;
    // The second request's enqueue stops before its entry (at the session's queue marker).
    const marker = queueMarkerKey('', id);
    const gate = gated(storeOf(), (key) => key === marker);
    const world = process(gate.store);
    const { api } = world;
    expect((await api.post('/v1/sessions', { id, on_busy: 'enqueue' })).status).toBe(201);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'holder', background: true })).status).toBe(202);
    const key = { 'idempotency-key': `race-${id}` };
    const second = api.post(`/v1/sessions/${id}/turns`, { input: 'second body' }, key);
    await gate.reached;
    // Meanwhile turn 1 ends and the first request under the key runs as turn 2.
    await world.runAll();
    const first = await api.post(`/v1/sessions/${id}/turns`, { input: 'first body' }, key);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    gate.release();
    const refused = await second;
    expect(refused.status, JSON.stringify(refused.body)).toBe(422);
    expect(refused.body.error.code).toBe('idempotency_key_reused');
    await world.runAll();
    expect(await queuedEntries(world, id)).toEqual([]);
    expect(await userInputs(world, id)).toEqual(['holder', 'first body']);
  });

  it('logs a queued input whose key ran another request between its check and its entry: it never runs', async () => {
    const id = `s-race-${Math.random().toString(36).slice(2, 10)}`;
    const name = `race-${id}`;
    // The second request's enqueue stops at its entry's put, after it checked the key.
    const gate = gated(storeOf(), (key) => key.includes('/queue/') && key.endsWith(sha256Hex(name)));
    const world = process(gate.store);
    const { api } = world;
    expect((await api.post('/v1/sessions', { id, on_busy: 'enqueue' })).status).toBe(201);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'holder', background: true })).status).toBe(202);
    const key = { 'idempotency-key': name };
    const second = api.post(`/v1/sessions/${id}/turns`, { input: 'second body' }, key);
    await gate.reached;
    await world.runAll();
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first body' }, key)).status).toBe(200);
    gate.release();
    // Answered 202: what its check read was before the other request's turn.
    expect((await second).status).toBe(202);
    await world.runAll();
    expect(await queuedEntries(world, id)).toEqual([]);
    expect(await userInputs(world, id)).toEqual(['holder', 'first body']);
    // A routine line (a client's race), not a failure.
    expect(world.infos).toContain(
      `tailgate: a queued input of session ${id} (key sha256 ${sha256Hex(name)}) was dropped: ` +
        'its Idempotency-Key ran another request first',
    );
    expect(world.logged).toEqual([]);
  });

  it("runs an input queued under a deleted turn's key once the budget is raised after another delete", async () => {
    const world = process(storeOf());
    const { api } = world;
    const id = await api.session({ on_busy: 'enqueue' });
    const key = { 'idempotency-key': `deleted-${id}` };
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'one' })).status).toBe(200);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'deleted' }, key)).status).toBe(200);
    // Its turn deleted, the key is free again.
    expect((await api.delete(`/v1/sessions/${id}/turns/2`)).status).toBe(200);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'holder', background: true })).status).toBe(202);
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'queued' }, key);
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    // The budget is spent: the pickup after the holder leaves the input waiting.
    expect((await api.patch(`/v1/sessions/${id}`, { budget: { max_turns: 1 } })).status).toBe(200);
    await world.runAll();
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(1);
    await world.drain();
    expect((await api.delete(`/v1/sessions/${id}/turns/2`)).status).toBe(200);
    expect((await api.patch(`/v1/sessions/${id}`, { budget: { max_turns: 10 } })).status).toBe(200);
    await world.runAll();
    expect(await userInputs(world, id)).toEqual(['one', 'queued']);
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(0);
  });
});

// The same request under the key of an input still queued is the same 202 whatever changed in the
// session since its enqueue (its budget, the calls left open): its turn is judged when it runs.
describe('a retry under the key of an input still queued', () => {
  it('is the same 202 after a PATCH spent the budget and set reject, busy or idle; it runs once raised', async () => {
    const world = process(new MemoryStore());
    const { api } = world;
    const id = await api.session({ on_busy: 'enqueue' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'holder', background: true })).status).toBe(202);
    const key = { 'idempotency-key': `budget-${id}` };
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'first' }, key);
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    await world.drain();
    const spent = await api.patch(`/v1/sessions/${id}`, { budget: { max_turns: 0 }, on_busy: 'reject' });
    expect(spent.status, JSON.stringify(spent.body)).toBe(200);
    const busy = await api.post(`/v1/sessions/${id}/turns`, { input: 'first' }, key);
    expect(busy.status, JSON.stringify(busy.body)).toBe(202);
    expect(busy.body).toEqual(queued.body);
    // The holder ends; the budget keeps the input queued, and its retry neither runs it nor is refused.
    await world.runAll();
    const idle = await api.post(`/v1/sessions/${id}/turns`, { input: 'first' }, key);
    expect(idle.status, JSON.stringify(idle.body)).toBe(202);
    expect(idle.body).toEqual(queued.body);
    await world.runAll();
    expect(await userInputs(world, id)).toEqual(['holder']);
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(1);
    // Another body under the key is still refused.
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'other' }, key)).status).toBe(422);
    expect((await api.patch(`/v1/sessions/${id}`, { budget: null })).status).toBe(200);
    await world.runAll();
    expect(await userInputs(world, id)).toEqual(['holder', 'first']);
    const ran = await api.post(`/v1/sessions/${id}/turns`, { input: 'first' }, key);
    expect(ran.status, JSON.stringify(ran.body)).toBe(200);
    expect(ran.body.turn).toBe(2);
  });

  it('is the same 202 after an input before it answered the call it answers (its turn drops it)', async () => {
    // Each put a time of its own, so the input queued first is taken up first.
    let last = 0;
    const clock = () => {
      last = Math.max(Date.now(), last + 1);
      return new Date(last);
    };
    const world = process(new MemoryStore({ clock }));
    const { api } = world;
    const id = await api.session({ on_busy: 'enqueue' });
    const call = { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' };
    const appended = await api.post(`/v1/sessions/${id}/items`, { items: [call] });
    expect(appended.status, JSON.stringify(appended.body)).toBe(201);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'holder', background: true })).status).toBe(202);
    const output = (text: string) => ({ input: [{ type: 'function_call_output', call_id: 'c1', output: text }] });
    // Queued first, this input answers the call when its turn comes.
    expect((await api.post(`/v1/sessions/${id}/turns`, output('one'))).status).toBe(202);
    const key = { 'idempotency-key': `calls-${id}` };
    const queued = await api.post(`/v1/sessions/${id}/turns`, output('two'), key);
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    // Their enqueues' pickups met the busy session.
    await world.drain();
    // The holder is cancelled: the first input's turn takes the session, the call answered.
    expect((await api.post(`/v1/sessions/${id}/turns/1/cancel`, {})).status).toBe(200);
    await world.drain();
    expect(await queuedEntries(world, id)).toHaveLength(1);
    const again = await api.post(`/v1/sessions/${id}/turns`, output('two'), key);
    expect(again.status, JSON.stringify(again.body)).toBe(202);
    expect(again.body).toEqual({ ...queued.body, position: 1 });
    await world.runAll();
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(0);
    const items = (await api.get(`/v1/sessions/${id}/items?limit=100`)).body.items;
    expect(items.filter((item: any) => item.type === 'function_call_output').map((item: any) => item.output)).toEqual([
      'one',
    ]);
  });
});

// Sent when the session is free and its budget holds the input: a budgeted token's retry is the
// same 202 (it queues nothing), and the same request under the key through the facade, which
// queues nothing, is judged as any request there (the spent budget). Neither is a 409 naming a
// turn that is not running.
describe('a retry under the key of an input the budget holds in the queue', () => {
  async function held() {
    const world = process(new MemoryStore());
    const { api } = world;
    const id = await api.session({ on_busy: 'enqueue' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'holder', background: true })).status).toBe(202);
    const key = { 'idempotency-key': `held-${id}` };
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'first', truncation: 'disabled' }, key);
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    await world.drain();
    expect((await api.patch(`/v1/sessions/${id}`, { budget: { max_turns: 1 } })).status).toBe(200);
    await world.runAll();
    expect(await userInputs(world, id)).toEqual(['holder']);
    return { world, id, key, queued };
  }

  it("is the same 202 for a budgeted token's retry, the input left queued", async () => {
    const { world, id, key, queued } = await held();
    const minted = await world.api.post('/v1/tokens', { scopes: ['session:turn'], budget: { max_turns: 5 } });
    expect(minted.status, JSON.stringify(minted.body)).toBe(201);
    const headers = { ...key, authorization: `Bearer ${minted.body.token}` };
    const again = await world.api.post(`/v1/sessions/${id}/turns`, { input: 'first', truncation: 'disabled' }, headers);
    expect(again.status, JSON.stringify(again.body)).toBe(202);
    expect(again.body).toEqual(queued.body);
    await world.runAll();
    expect(await userInputs(world, id)).toEqual(['holder']);
    expect(await queuedEntries(world, id)).toHaveLength(1);
  });

  it('is refused by the spent budget through /v1/responses, in the foreground or the background', async () => {
    const { world, id, key } = await held();
    for (const background of [false, true]) {
      const body = { conversation: id, input: 'first', ...(background ? { background } : {}) };
      const refused = await world.api.post('/v1/responses', body, key);
      expect(refused.status, JSON.stringify(refused.body)).toBe(402);
      expect(refused.body.error.code).toBe('budget_exhausted');
    }
    await world.runAll();
    expect(await userInputs(world, id)).toEqual(['holder']);
    expect(await queuedEntries(world, id)).toHaveLength(1);
  });
});

describe('a retry under the key of an input queued before a delete of the newest turn', () => {
  it('is the same 202, the input read in the generation the delete left', async () => {
    const world = process(new MemoryStore());
    const { api } = world;
    const id = await api.session({ on_busy: 'enqueue' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'holder', background: true })).status).toBe(202);
    const key = { 'idempotency-key': `kept-${id}` };
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'first' }, key);
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    await world.drain();
    expect((await api.patch(`/v1/sessions/${id}`, { budget: { max_turns: 1 } })).status).toBe(200);
    await world.runAll();
    const deleted = await api.delete(`/v1/sessions/${id}/turns/1`);
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(200);
    await world.drain();
    expect(await queuedEntries(world, id)).toHaveLength(1);
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: 'first', on_busy: 'reject' }, key);
    expect(again.status, JSON.stringify(again.body)).toBe(202);
    expect(again.body).toEqual(queued.body);
    await world.drain();
    expect(await queuedEntries(world, id)).toHaveLength(1);
  });
});

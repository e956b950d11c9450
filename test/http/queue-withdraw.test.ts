import { describe, expect, it } from 'vitest';
import { createTurnRunner, type AppOptions } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { listAll } from '../../lib/store/object-store.ts';
import type { Body, GetOptions, ObjectStore, PutOptions, StoredObject } from '../../lib/store/object-store.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, openCallBehindTurn, SIGNING_KEY, TOKEN } from './http-suite.ts';

// Withdrawing a queued input (docs/API.md, "Busy sessions"): DELETE /v1/sessions/{id}/queue/{queued_turn}
// removes an input no pickup began claiming, and its turn never runs; one a pickup claimed runs,
// and the withdraw is 409, whichever of the two reaches the entry first.

const environment = {
  API_TOKEN: TOKEN,
  TOKEN_SIGNING_KEY: SIGNING_KEY,
  DEFAULT_MODEL: 'echo',
  TURN_LEASE_MS: '3000',
};

/** Runs `hook` once, before the first put that `matches` (`getHook`: after a get), and waits for it. */
class HookedStore extends MemoryStore {
  hook: { matches: (key: string, body: Body, options?: PutOptions) => boolean; run: () => Promise<unknown> } | null =
    null;
  getHook: { matches: (key: string, found: StoredObject | null) => boolean; run: () => Promise<unknown> } | null = null;
  /** Runs once before the first get whose key `matches`. */
  beforeGet: { matches: (key: string) => boolean; run: () => Promise<unknown> } | null = null;
  override async get(key: string, options?: GetOptions) {
    const before = this.beforeGet;
    if (before?.matches(key)) {
      this.beforeGet = null;
      await before.run();
    }
    const found = await super.get(key, options);
    const hook = this.getHook;
    if (hook?.matches(key, found)) {
      this.getHook = null;
      await hook.run();
    }
    return found;
  }
  /** The key of the put `hook` ran before. */
  hookedKey: string | undefined;
  override async put(key: string, body: Body, options?: PutOptions) {
    const hook = this.hook;
    if (hook?.matches(key, body, options)) {
      this.hook = null;
      this.hookedKey = key;
      await hook.run();
    }
    return super.put(key, body, options);
  }
}

/** A process whose background turns wait in `sent` until run; `drain` awaits its work after its responses. */
/** Deletes the queue's signal (`turn/<g>/-queued`), as if the puts of it had failed. */
async function dropSignal(store: ObjectStore): Promise<void> {
  const signals = (await listAll(store, '')).filter((object) => object.key.endsWith('/-queued'));
  await store.delete(signals.map((object) => object.key));
}

function setup() {
  // `store`: the store's own clock, apart from the service's (`offset`).
  const time = { offset: 0, store: 0 };
  const store = new HookedStore({ clock: () => new Date(Date.now() + time.store) });
  const sent: BackgroundTurn[] = [];
  const tasks: Promise<unknown>[] = [];
  const options: AppOptions = {
    store: () => store,
    readEnvironment: (c) => c.env ?? environment,
    clock: () => new Date(Date.now() + time.offset),
    afterResponse: (task) => void tasks.push(task),
    queueTurn: () => async (run) => void sent.push(run),
  };
  const api = createClient(appHarness(store, environment, options));
  const runner = createTurnRunner(options);
  const drain = async () => {
    while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
  };
  // Each turn sent runs once, in the order sent, with the work after it (its close's pickup).
  let ran = 0;
  const runNext = async () => {
    expect(await runner(sent[ran++]!, environment, (task) => void tasks.push(task))).toBe('done');
    await drain();
  };
  const runAll = async () => {
    while (ran < sent.length) await runNext();
  };
  return { store, api, sent, drain, runNext, runAll, time };
}

/** A session whose turn 1 (`first`) waits for its runner, with `queued` queued behind it. */
async function busySession(world: ReturnType<typeof setup>, queued: string[], fields: Record<string, unknown> = {}) {
  const { api, drain } = world;
  const id = await api.session({ on_busy: 'enqueue', ...fields });
  expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
  const names: string[] = [];
  for (const input of queued) {
    const answer = await api.post(`/v1/sessions/${id}/turns`, { input });
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    names.push(answer.body.queued_turn);
  }
  // The enqueues' own pickups, refused while turn 1 runs.
  await drain();
  return { id, names };
}

async function userInputs(api: ReturnType<typeof createClient>, id: string): Promise<unknown[]> {
  const items = (await api.get(`/v1/sessions/${id}/items?limit=100`)).body.items.reverse();
  return items.filter((item: any) => item.role === 'user').map((item: any) => item.content);
}

/**
 * Runs every turn, the pickup after turn 1 withdrawing `name` (200) right before it marks the
 * entry it read, then running `after`.
 */
async function withdrawBeforeMark(
  world: ReturnType<typeof setup>,
  id: string,
  name: string,
  after: () => Promise<void> = async () => {},
) {
  let withdrawn: { status: number; body: any } | undefined;
  world.store.hook = {
    matches: (key, body, options) => key.includes('/queue/') && options?.ifMatch !== undefined && body !== '',
    run: async () => {
      withdrawn = await world.api.delete(`/v1/sessions/${id}/queue/${name}`);
      await after();
    },
  };
  await world.runAll();
  expect(world.store.hook).toBeNull();
  expect(withdrawn?.status, JSON.stringify(withdrawn?.body)).toBe(200);
}

describe('DELETE /v1/sessions/{id}/queue/{queued_turn}', () => {
  it('withdraws a queued input: the listing no longer has it and its turn never runs', async () => {
    const world = setup();
    const { api } = world;
    const { id, names } = await busySession(world, ['q1', 'q2']);
    const withdrawn = await api.delete(`/v1/sessions/${id}/queue/${names[0]}`);
    expect(withdrawn.status, JSON.stringify(withdrawn.body)).toBe(200);
    expect(withdrawn.body).toEqual({ session_id: id, queued_turn: names[0], deleted: true });
    const listed = (await api.get(`/v1/sessions/${id}/queue`)).body;
    expect(listed.queued.map((row: any) => row.queued_turn)).toEqual([names[1]]);
    expect(listed.total).toBe(1);
    await world.drain();
    // Turn 1 runs; its close takes up q2, whose turn runs; q1 never does.
    await world.runAll();
    expect((await api.get(`/v1/sessions/${id}/queue`)).body).toEqual({ queued: [], total: 0 });
    const turns = (await api.get(`/v1/sessions/${id}/turns`)).body.turns.reverse();
    expect(turns.map((turn: any) => [turn.turn, turn.status])).toEqual([
      [1, 'completed'],
      [2, 'completed'],
    ]);
    expect(await userInputs(api, id)).toEqual(['first', 'q2']);
    // Withdrawn once: a second withdraw finds nothing queued under the name.
    const again = await api.delete(`/v1/sessions/${id}/queue/${names[0]}`);
    expect(again.status).toBe(404);
    expect(again.body.error.code).toBe('not_found');
  });

  it('answers 409 for an input a pickup took up and removed while the withdraw read its key', async () => {
    const world = setup();
    const { api, store, runNext, runAll } = world;
    const { id, names } = await busySession(world, ['q1']);
    // Turn 1 ends, and its close's pickup claims the input and removes its entry, after the
    // withdraw read the key's turn (none yet) and before it reads the entry.
    store.beforeGet = { matches: (key) => key.includes('/queue/'), run: runNext };
    const withdrawn = await api.delete(`/v1/sessions/${id}/queue/${names[0]}`);
    expect(withdrawn.status, JSON.stringify(withdrawn.body)).toBe(409);
    expect(withdrawn.body.error.code).toBe('queued_input_taken');
    await runAll();
    expect(await userInputs(api, id)).toEqual(['first', 'q1']);
  });

  it('answers 404 for a name nothing is queued under or an unknown session, 400 for a malformed one', async () => {
    const world = setup();
    const { api } = world;
    const { id } = await busySession(world, ['q1']);
    const unknown = await api.delete(`/v1/sessions/${id}/queue/${'0'.repeat(64)}`);
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('not_found');
    // details.id names the session as every 404 does (session_id kept for earlier clients).
    expect(unknown.body.error.details).toEqual({ id, session_id: id, queued_turn: '0'.repeat(64) });
    expect((await api.delete(`/v1/sessions/${id}/queue/nope`)).status).toBe(400);
    const none = await api.delete(`/v1/sessions/s-none/queue/${'0'.repeat(64)}`);
    expect(none.status).toBe(404);
    expect(none.body.error.details.id).toBe('s-none');
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(1);
  });

  it('needs session:turn: a session:read token is refused with 403 and the input stays queued', async () => {
    const world = setup();
    const { api } = world;
    const { id, names } = await busySession(world, ['q1']);
    const reader = await api.post('/v1/tokens', { scopes: ['session:read'], session_id: id });
    expect(reader.status, JSON.stringify(reader.body)).toBe(201);
    const path = `/v1/sessions/${id}/queue/${names[0]}`;
    const refused = await api.call('DELETE', path, undefined, { authorization: `Bearer ${reader.body.token}` });
    expect(refused.status).toBe(403);
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(1);
    const turner = await api.post('/v1/tokens', { scopes: ['session:turn'], session_id: id });
    const allowed = await api.call('DELETE', path, undefined, { authorization: `Bearer ${turner.body.token}` });
    expect(allowed.status, JSON.stringify(allowed.body)).toBe(200);
  });

  it('withdraws an input the spent budget holds in the queue: raising the budget runs nothing', async () => {
    const world = setup();
    const { api } = world;
    const { id, names } = await busySession(world, ['q1'], { budget: { max_turns: 1 } });
    // Turn 1 spends the budget: its close's pickup is refused and leaves q1 waiting.
    await world.runAll();
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(1);
    const withdrawn = await api.delete(`/v1/sessions/${id}/queue/${names[0]}`);
    expect(withdrawn.status, JSON.stringify(withdrawn.body)).toBe(200);
    expect((await api.patch(`/v1/sessions/${id}`, { budget: { max_turns: 5 } })).status).toBe(200);
    // The PATCH's pickup finds nothing to claim.
    await world.drain();
    expect(world.sent).toHaveLength(1);
    expect(await userInputs(api, id)).toEqual(['first']);
    expect((await api.get(`/v1/sessions/${id}/queue`)).body).toEqual({ queued: [], total: 0 });
  });

  it('answers 409, not 404, for an input taken up as a turn that was deleted since', async () => {
    // docs/API.md, "Busy sessions": the withdraw reads whether the key's index entry stands, not
    // which turn it names, and a deleted turn's entry stands in the generation it was deleted from.
    const world = setup();
    const { api } = world;
    const { id, names } = await busySession(world, ['q1']);
    await world.runAll();
    expect((await api.delete(`/v1/sessions/${id}/turns/2`)).status).toBe(200);
    expect((await api.get(`/v1/sessions/${id}/turns`)).body.turns.map((turn: any) => turn.turn)).toEqual([1]);
    const withdrawn = await api.delete(`/v1/sessions/${id}/queue/${names[0]}`);
    expect(withdrawn.status, JSON.stringify(withdrawn.body)).toBe(409);
    expect(withdrawn.body.error.code).toBe('queued_input_taken');
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(0);
  });

  it('answers 409 queued_input_taken for an input a pickup took up already: its turn runs', async () => {
    const world = setup();
    const { api } = world;
    const { id, names } = await busySession(world, ['q1']);
    // Turn 1 runs; its close claims q1 as turn 2 (handed to the runner, not run yet) and removes the entry.
    await world.runNext();
    expect(world.sent).toHaveLength(2);
    const taken = await api.delete(`/v1/sessions/${id}/queue/${names[0]}`);
    expect(taken.status, JSON.stringify(taken.body)).toBe(409);
    expect(taken.body.error.code).toBe('queued_input_taken');
    await world.runAll();
    expect(await userInputs(api, id)).toEqual(['first', 'q1']);
  });

  it('answers 409 for an input its Idempotency-Key ran as a turn already, before a pickup removed it', async () => {
    const world = setup();
    const { api } = world;
    const { id, key, queued } = await keyedBehindTurn(world, 'queued-then-retried');
    await world.drain();
    // Turn 1's runner never came: once its lease ran out, a retry under the key runs the input
    // itself when no signal says an input waits (its enqueue's put of it failed) and its claim
    // reads no input under the key (as when the entry of its first request lands only after that read).
    world.time.offset = 4000;
    await dropSignal(world.store);
    const keys = (await listAll(world.store, '')).map((object) => object.key);
    const entryKey = keys.find((key) => key.includes('/queue/') && key.endsWith(queued))!;
    const entry = (await world.store.get(entryKey))!;
    world.store.beforeGet = { matches: (key) => key === entryKey, run: () => world.store.delete([entryKey]) };
    world.store.getHook = { matches: (key) => key === entryKey, run: () => world.store.put(entryKey, entry.body) };
    const retried = await api.post(`/v1/sessions/${id}/turns`, { input: 'q1' }, key);
    expect(retried.status, JSON.stringify(retried.body)).toBe(200);
    // Before the pickup after it replays the entry and removes it, the input is withdrawn: it ran.
    const withdrawn = await api.delete(`/v1/sessions/${id}/queue/${queued}`);
    expect(withdrawn.status, JSON.stringify(withdrawn.body)).toBe(409);
    expect(withdrawn.body.error.code).toBe('queued_input_taken');
    await world.drain();
    expect(await userInputs(api, id)).toEqual(['first', 'q1']);
    expect((await api.get(`/v1/sessions/${id}/queue`)).body).toEqual({ queued: [], total: 0 });
  });

  it('a withdraw that reaches the entry before the pickup marks it: the pickup stores nothing', async () => {
    const world = setup();
    const { api } = world;
    const { id, names } = await busySession(world, ['q1']);
    // The pickup after turn 1 read the entry and passed every check: the withdraw runs before its mark.
    await withdrawBeforeMark(world, id, names[0]!);
    expect(world.sent).toHaveLength(1);
    const turns = (await api.get(`/v1/sessions/${id}/turns`)).body.turns;
    expect(turns.map((turn: any) => turn.turn)).toEqual([1]);
    expect(await userInputs(api, id)).toEqual(['first']);
    expect((await api.get(`/v1/sessions/${id}/queue`)).body).toEqual({ queued: [], total: 0 });
  });

  it('a pickup whose input was withdrawn and its key queued again before its mark runs the new input', async () => {
    const world = setup();
    const { api, store } = world;
    const { id, names } = await busySession(world, ['q1']);
    const [entry] = (await listAll(store, '')).filter((object) => object.key.endsWith(`/${names[0]}`));
    const old = JSON.parse(new TextDecoder().decode((await store.get(entry!.key))!.body));
    // The pickup after turn 1 read q1: before its mark, q1 is withdrawn and another input is
    // queued under the same key (as another process's enqueue writes it).
    await withdrawBeforeMark(world, id, names[0]!, async () => {
      const again = { ...old, writer: crypto.randomUUID(), input: [{ ...old.input[0], content: 'q1 again' }] };
      expect(await store.put(entry!.key, JSON.stringify(again), { onlyIfAbsent: true })).not.toBeNull();
    });
    // The withdrawn input never runs; the one queued again under its key does, as itself.
    expect(await userInputs(api, id)).toEqual(['first', 'q1 again']);
    expect((await api.get(`/v1/sessions/${id}/queue`)).body).toEqual({ queued: [], total: 0 });
  });

  it('a withdraw that reaches the entry while the pickup puts its turn: 409, and the turn runs', async () => {
    const world = setup();
    const { api, store } = world;
    const { id, names } = await busySession(world, ['q1']);
    let withdrawn: { status: number; body: any } | undefined;
    // The pickup after turn 1 is about to put turn 2's record (create-only): the withdraw runs first.
    store.hook = {
      matches: (key, _body, options) => options?.onlyIfAbsent === true && /\/turn\/[^/]+\/[0-9]+$/.test(key),
      run: async () => {
        withdrawn = await api.delete(`/v1/sessions/${id}/queue/${names[0]}`);
      },
    };
    // Turn 1's own record is put already: the hook meets the pickup's.
    await world.runAll();
    expect(store.hook).toBeNull();
    expect(withdrawn?.status, JSON.stringify(withdrawn?.body)).toBe(409);
    expect(withdrawn?.body.error.code).toBe('queued_input_taken');
    expect(await userInputs(api, id)).toEqual(['first', 'q1']);
    const turns = (await api.get(`/v1/sessions/${id}/turns`)).body.turns.reverse();
    expect(turns.map((turn: any) => [turn.turn, turn.status])).toEqual([
      [1, 'completed'],
      [2, 'completed'],
    ]);
  });

  it('a pickup dropping an input its turn refuses keeps one queued under its key since its withdraw', async () => {
    const world = setup();
    const { api, store } = world;
    const id = await api.session({ on_busy: 'enqueue' });
    // Both answer the call: the second's turn, when it comes, is refused (the first answered it).
    const answer = await openCallBehindTurn(api, id);
    const key = { 'idempotency-key': 'refused-then-sent-again' };
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: answer })).status).toBe(202);
    const refused = (await api.post(`/v1/sessions/${id}/turns`, { input: answer }, key)).body.queued_turn;
    await world.drain();
    // The pickup claiming it reads its key's `idem/`: meanwhile another turn takes the session, the
    // input is withdrawn and its key sends another, queued behind that turn.
    let again: { status: number; body: any } | undefined;
    store.getHook = {
      matches: (key) => key.includes('/idem/') && key.endsWith(`/${refused}`),
      run: async () => {
        // A turn that finds no signal of the queue (its put failed) is not held behind it.
        await dropSignal(store);
        expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'busy', background: true })).status).toBe(202);
        expect((await api.delete(`/v1/sessions/${id}/queue/${refused}`)).status).toBe(200);
        again = await api.post(`/v1/sessions/${id}/turns`, { input: 'sent again' }, key);
      },
    };
    await world.runAll();
    expect(store.getHook).toBeNull();
    expect(again?.status, JSON.stringify(again?.body)).toBe(202);
    expect(again?.body.queued_turn).toBe(refused);
    // The input answered 202 runs, after the turn it was queued behind.
    expect((await userInputs(api, id)).slice(-2)).toEqual(['busy', 'sent again']);
    expect((await api.get(`/v1/sessions/${id}/queue`)).body).toEqual({ queued: [], total: 0 });
  });

  it('frees the Idempotency-Key: a retry under it after the withdraw queues the input again', async () => {
    const world = setup();
    const { api } = world;
    const { id, key, queued } = await keyedBehindTurn(world, 'withdrawn-once');
    expect((await api.delete(`/v1/sessions/${id}/queue/${queued}`)).status).toBe(200);
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: 'q1' }, key);
    expect(again.status, JSON.stringify(again.body)).toBe(202);
    expect(again.body).toMatchObject({ queued_turn: queued, position: 1 });
    await world.drain();
    await world.runAll();
    expect(await userInputs(api, id)).toEqual(['first', 'q1']);
  });

  it('a tombstone its withdraw left is passed over by the pickup, which deletes it once a minute old', async () => {
    const world = setup();
    const { api, store } = world;
    const { id, names } = await busySession(world, ['q1']);
    // A withdraw of q1 emptied it and stopped before its delete; q2 is queued after it.
    const [entry] = (await listAll(store, '')).filter((object) => object.key.endsWith(`/${names[0]}`));
    expect(await store.put(entry!.key, '', { ifMatch: entry!.etag })).not.toBeNull();
    // q2 lands later by the store's clock: it lists after the tombstone by its upload time.
    world.time.store += 5;
    const q2 = (await api.post(`/v1/sessions/${id}/turns`, { input: 'q2' })).body.queued_turn;
    await world.drain();
    // The listing counts the inputs that run: not the tombstone.
    expect((await api.get(`/v1/sessions/${id}/queue`)).body).toMatchObject({ queued: [{ queued_turn: q2 }], total: 1 });
    await world.drain();
    // Turn 1's close meets it first and takes q2 up.
    await world.runAll();
    expect(await userInputs(api, id)).toEqual(['first', 'q2']);
    const queuedKeys = async () =>
      (await listAll(store, '')).filter((object) => object.key.includes('/queue/')).map((object) => object.size);
    expect((await api.get(`/v1/sessions/${id}/queue`)).body).toEqual({ queued: [], total: 0 });
    await world.drain();
    expect(await queuedKeys()).toEqual([0]);
    // A minute on, a listing's pickup deletes it.
    world.time.offset = 61_000;
    await api.get(`/v1/sessions/${id}/queue`);
    await world.drain();
    expect(await queuedKeys()).toEqual([]);
    expect((await api.get(`/v1/sessions/${id}/queue`)).body).toEqual({ queued: [], total: 0 });
    expect(world.sent).toHaveLength(2);
  });

  it('a pickup passes over any number of tombstones and takes the input behind them', async () => {
    const world = setup();
    const { api, store } = world;
    const { id, names } = await busySession(
      world,
      Array.from({ length: 9 }, (_, index) => `q${index + 1}`),
    );
    // Withdraws of q1..q9 emptied them and have not deleted them yet; q10 is queued after them.
    for (const name of names) {
      const [entry] = (await listAll(store, '')).filter((object) => object.key.endsWith(`/${name}`));
      expect(await store.put(entry!.key, '', { ifMatch: entry!.etag })).not.toBeNull();
    }
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'q10' })).status).toBe(202);
    await world.drain();
    await world.runAll();
    expect(await userInputs(api, id)).toEqual(['first', 'q10']);
  });

  it("an enqueue under a stale tombstone's key deletes it and queues the input", async () => {
    const world = setup();
    const { api, id, key, queued } = await tombstoneUnderKey(world, -61_000);
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: 'q1 again' }, key);
    expect(again.status, JSON.stringify(again.body)).toBe(202);
    expect(again.body).toMatchObject({ queued_turn: queued, position: 1 });
    await world.drain();
    await world.runAll();
    expect(await userInputs(api, id)).toEqual(['first', 'q1 again']);
  });

  it('a pickup deleting a stale tombstone leaves the input an enqueue under its key put meanwhile', async () => {
    const world = setup();
    const { api, id, key, queued } = await tombstoneUnderKey(world, -61_000);
    // The listing's pickup reads the stale tombstone (as an input, then as a tombstone; the listing
    // reads none): before it deletes it, a retry under its key deletes it itself and queues its input.
    let again: { status: number; body: any } | undefined;
    let reads = 0;
    world.store.getHook = {
      matches: (key, found) =>
        key.includes('/queue/') && key.endsWith(`/${queued}`) && found?.body.length === 0 && ++reads === 2,
      run: async () => {
        again = await api.post(`/v1/sessions/${id}/turns`, { input: 'q1 again' }, key);
      },
    };
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(0);
    await world.drain();
    expect(world.store.getHook).toBeNull();
    expect(again?.status, JSON.stringify(again?.body)).toBe(202);
    expect((await api.get(`/v1/sessions/${id}/queue`)).body).toMatchObject({ queued: [{ queued_turn: queued }] });
    await world.drain();
    await world.runAll();
    expect(await userInputs(api, id)).toEqual(['first', 'q1 again']);
  });

  it('an enqueue refused by a tombstone its withdraw deletes right after queues its input', async () => {
    const world = setup();
    const { api, id, key, queued } = await tombstoneUnderKey(world, 0);
    // The enqueue's create-only put meets the tombstone; its withdraw deletes it before the enqueue looks.
    const entry = (key: string) => key.includes('/queue/') && key.endsWith(`/${queued}`);
    world.store.hook = {
      matches: (key, _body, options) => entry(key) && options?.onlyIfAbsent === true,
      run: async () => {
        world.store.beforeGet = { matches: entry, run: () => world.store.delete(world.store.hookedKey!) };
      },
    };
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: 'q1 again' }, key);
    expect(world.store.hook).toBeNull();
    expect(world.store.beforeGet).toBeNull();
    expect(again.status, JSON.stringify(again.body)).toBe(202);
    expect(again.body).toMatchObject({ queued_turn: queued, position: 1 });
    await world.drain();
    await world.runAll();
    expect(await userInputs(api, id)).toEqual(['first', 'q1 again']);
  });

  it('an enqueue under the key of a young tombstone that stays is 503, never 202 with nothing stored', async () => {
    const world = setup();
    const { api, id, key } = await tombstoneUnderKey(world, 0);
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: 'q1 again' }, key);
    expect(again.status, JSON.stringify(again.body)).toBe(503);
    expect(again.body.error.code).toBe('storage_error');
  });
});

/** A busy session whose input q1, queued under an Idempotency-Key, a withdraw emptied `age` ms ago and left. */
async function tombstoneUnderKey(world: ReturnType<typeof setup>, age: number) {
  const { api, store } = world;
  const { id, key, queued } = await keyedBehindTurn(world, 'withdrawn-then-retried');
  const [entry] = (await listAll(store, '')).filter((object) => object.key.endsWith(`/${queued}`));
  world.time.store = age;
  expect(await store.put(entry!.key, '', { ifMatch: entry!.etag })).not.toBeNull();
  world.time.store = 0;
  return { api, id, key, queued };
}

/** A busy session with input q1 queued behind its turn 1 under the Idempotency-Key `name`. */
async function keyedBehindTurn(world: ReturnType<typeof setup>, name: string) {
  const { id } = await busySession(world, []);
  const key = { 'idempotency-key': name };
  const answer = await world.api.post(`/v1/sessions/${id}/turns`, { input: 'q1' }, key);
  expect(answer.status, JSON.stringify(answer.body)).toBe(202);
  return { id, key, queued: answer.body.queued_turn as string };
}

describe('a retry under the key of a queued input withdrawn while its claim is under way', () => {
  it('is taken as a new request once the withdraw landed: the policy set since answers it', async () => {
    const world = setup();
    const { api } = world;
    const { id, key, queued } = await keyedBehindTurn(world, 'withdrawn-under-retry');
    await world.drain();
    expect((await api.patch(`/v1/sessions/${id}`, { on_busy: 'reject' })).status).toBe(200);
    const keys = (await listAll(world.store, '')).map((object) => object.key);
    const entryKey = keys.find((key) => key.includes('/queue/') && key.endsWith(queued))!;
    // The retry's claim reads the entry; the withdraw lands before it answers.
    let withdrawn: Awaited<ReturnType<typeof api.delete>> | undefined;
    world.store.getHook = {
      matches: (key, found) => key === entryKey && found !== null,
      run: async () => (withdrawn = await api.delete(`/v1/sessions/${id}/queue/${queued}`)),
    };
    const retried = await api.post(`/v1/sessions/${id}/turns`, { input: 'q1' }, key);
    expect(withdrawn?.status, JSON.stringify(withdrawn?.body)).toBe(200);
    await world.drain();
    expect(retried.status, JSON.stringify(retried.body)).toBe(409);
    expect(retried.body.error.code).toBe('turn_in_progress');
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(0);
    await world.runAll();
    expect(await userInputs(api, id)).toEqual(['first']);
  });
});

import { describe, expect, it } from 'vitest';
import { sessionCreatedIn } from '../../lib/session/log/config-object.ts';
import { ModelError } from '../../lib/models/errors.ts';
import { errorBody } from '../../functions/error-handler.ts';
import { parseServiceConfig } from '../../lib/config.ts';
import { Inbox } from '../../lib/inbox/inbox.ts';
import { echoModel } from '../../lib/models/echo.ts';
import type { Model, ModelRequest, ModelResult } from '../../lib/models/model.ts';
import { SessionLog } from '../support/session-log.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { GatedStore } from '../support/gated-store.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { sessionConfigKey, sessionPrefix } from '../../lib/session/keys.ts';
import { runInProcess, runTurn, type TurnServices } from '../../lib/turn/index.ts';

/**
 * What the pipeline does when a turn is interrupted from outside while its model answers
 * (a delete, a cancel, an expired lease) or fails after its claim, with a model the test
 * releases by hand and a clock it moves.
 */

const LEASE_MS = 30_000;

/** A model that answers like echo once the test calls `release()` (or `fail()`). */
function heldModel(): Model & { started: Promise<void>; release: () => void; fail: (error: Error) => void } {
  let started!: () => void;
  let settle!: (outcome: { error?: Error }) => void;
  const startedPromise = new Promise<void>((resolve) => (started = resolve));
  const outcome = new Promise<{ error?: Error }>((resolve) => (settle = resolve));
  return {
    id: 'held',
    started: startedPromise,
    release: () => settle({}),
    fail: (error) => settle({ error }),
    async generate(request: ModelRequest): Promise<ModelResult> {
      started();
      const { error } = await outcome;
      if (error) throw error;
      return echoModel.generate(request);
    },
    stream: (request) => echoModel.stream(request),
  };
}

function world(given?: ObjectStore) {
  let now = Date.parse('2026-01-01T00:00:00Z');
  const clock = () => new Date(now);
  // The store keeps the same time as the service.
  const store = given ?? new MemoryStore({ clock });
  const services = (model: Model = echoModel): TurnServices & { sessions: SessionLog; inbox: Inbox } => ({
    sessions: new SessionLog(store, { clock, leaseMs: LEASE_MS }),
    inbox: new Inbox(store, { clock, log: () => {}, sessionExists: sessionCreatedIn(store, '') }),
    config: parseServiceConfig({ TURN_LEASE_MS: String(LEASE_MS) }),
    clock,
    env: {},
    model: (id) => (id === 'held' ? model : echoModel),
    background: () => undefined,
    startBackground(run) {
      return runInProcess(this, run);
    },
    log: () => {},
    info: () => {},
  });
  return { store, services, advance: (ms: number) => (now += ms) };
}

/** The HTTP status and code a thrown error is answered with. */
function answer(error: unknown): { status: number; code: string } {
  const { status, body } = errorBody(error, () => {});
  return { status, code: body.error.code };
}

const userContents = async (sessions: SessionLog, id: string) =>
  (await sessions.listItems(id, { limit: 100 })).items
    .filter((item) => item.type === 'message' && item.role === 'user')
    .map((item) => (item.type === 'message' ? item.content : ''))
    .reverse();

describe('a turn interrupted while its model answers', () => {
  it('is answered 404 when its session is deleted, and a re-created id starts empty', async () => {
    const { services } = world();
    const model = heldModel();
    const owner = services(model);
    await owner.sessions.create({ id: 's', model: 'held' });
    await runTurn(owner, 's', { input: 'before', model: 'echo' });
    const running = runTurn(owner, 's', { input: 'in flight' }).catch((error: unknown) => error);
    await model.started;
    await services().sessions.delete('s');
    await services().sessions.create({ id: 's' });
    model.release();
    const ended = await running;
    expect(answer(ended)).toEqual({ status: 404, code: 'not_found' });
    // Nothing of the old incarnation shows, and the new one takes turns from seq 1.
    const fresh = services();
    expect(await fresh.sessions.listItems('s', { limit: 100 })).toMatchObject({ items: [], has_more: false });
    expect((await fresh.sessions.get('s')).counts).toEqual({ items: 0, turns: 0, tool_calls: 0 });
    const next = await runTurn(fresh, 's', { input: 'new life' });
    expect(next).toMatchObject({ turn: 1, output: [{ content: 'echo: new life', seq: 2 }] });
    expect(await userContents(fresh.sessions, 's')).toEqual(['new life']);
  });

  it('leaves nothing of a session deleted while a keyed turn ran, once that turn is refused by the fence', async () => {
    const { services, store } = world();
    const model = heldModel();
    const owner = services(model);
    await owner.sessions.create({ id: 's', model: 'held' });
    const running = runTurn(owner, 's', { input: 'in flight' }, { idempotencyKey: 'k' }).catch((error) => error);
    await model.started;
    await services().sessions.delete('s');
    // The completion the delete wrote fences the turn (and the turn's lease may be renewed meanwhile).
    expect((await store.list(sessionPrefix('', 's'))).objects.map((object) => object.key)).toEqual([
      expect.stringMatching(/\.done$/),
    ]);
    model.release();
    expect(answer(await running)).toEqual({ status: 404, code: 'not_found' });
    // Removed after the answer (the turn's renewals ended first).
    await expect.poll(async () => (await store.list(sessionPrefix('', 's'))).objects).toEqual([]);
  });

  it("leaves nothing of a session deleted while a turn's compaction made its summary", async () => {
    const { services, store } = world();
    const model = heldModel();
    const owner = services(model);
    await owner.sessions.create({
      id: 's',
      model: 'held',
      strategies: ['compact'],
      strategy_config: { context_limit: 1000, response_reserve: 200 },
    });
    await owner.sessions.append(
      's',
      Array.from({ length: 6 }, (_, index) => ({
        type: 'message',
        role: 'user',
        content: `${index} ${'w'.repeat(800)}`,
      })),
    );
    const running = runTurn(owner, 's', { input: 'in flight' }).catch((error) => error);
    // The summary's model call (the turn's own comes after it).
    await model.started;
    await services().sessions.delete('s');
    model.release();
    expect(answer(await running)).toEqual({ status: 404, code: 'not_found' });
    await expect.poll(async () => (await store.list(sessionPrefix('', 's'))).objects.map((o) => o.key)).toEqual([]);
  });

  it('is answered 409 turn_cancelled after a cancel, and the session takes a turn at once', async () => {
    const { services } = world();
    const model = heldModel();
    const owner = services(model);
    await owner.sessions.create({ id: 's', model: 'held' });
    const running = runTurn(owner, 's', { input: 'stuck' }).catch((error: unknown) => error);
    await model.started;
    const other = services();
    await expect(runTurn(other, 's', { input: 'blocked', model: 'echo' })).rejects.toMatchObject({
      code: 'turn_in_progress',
    });
    await expect(other.sessions.cancelTurn('s', 1)).resolves.toEqual({ turn: 1, status: 'failed' });
    await expect(other.sessions.cancelTurn('s', 1)).rejects.toMatchObject({ code: 'turn_not_open' });
    await expect(other.sessions.cancelTurn('s', 9)).rejects.toMatchObject({ code: 'not_found' });
    const next = await runTurn(other, 's', { input: 'after cancel', model: 'echo' });
    expect(next.turn).toBe(2);
    model.release();
    expect(answer(await running)).toEqual({ status: 409, code: 'turn_cancelled' });
    // The cancelled turn's input stays (failed), its output is not stored.
    expect(await userContents(other.sessions, 's')).toEqual(['stuck', 'after cancel']);
    expect(
      (await other.sessions.listItems('s', { limit: 100 })).items.some(
        (item) => item.type === 'message' && item.content === 'echo: stuck',
      ),
    ).toBe(false);
  });

  it('is answered 409 lease_expired once a newcomer closed it, never 500', async () => {
    const { services, advance } = world();
    const model = heldModel();
    const owner = services(model);
    await owner.sessions.create({ id: 's', model: 'held' });
    const running = runTurn(owner, 's', { input: 'slow' }).catch((error: unknown) => error);
    await model.started;
    advance(LEASE_MS + 1);
    const next = await runTurn(services(), 's', { input: 'newcomer', model: 'echo' });
    expect(next.turn).toBe(2);
    model.release();
    expect(answer(await running)).toEqual({ status: 409, code: 'lease_expired' });
  });

  it('keeps the session while its lease is renewed, however long the model takes', async () => {
    const { services, advance } = world();
    const model = heldModel();
    const owner = services(model);
    await owner.sessions.create({ id: 's', model: 'held' });
    const begun = await owner.sessions.beginTurn('s', { input: [{ type: 'message', role: 'user', content: 'long' }] });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    for (let step = 0; step < 5; step++) {
      advance(LEASE_MS / 3);
      await owner.sessions.renewLease(begun.turn);
    }
    // Past the claim's own lease, within the renewed one: still in progress.
    await expect(runTurn(services(), 's', { input: 'waits', model: 'echo' })).rejects.toMatchObject({
      code: 'turn_in_progress',
    });
    advance(LEASE_MS + 1);
    await expect(runTurn(services(), 's', { input: 'proceeds', model: 'echo' })).resolves.toMatchObject({ turn: 2 });
  });
});

describe('a failure after the claim', () => {
  it('closes the turn, so the next turn is not refused', async () => {
    const memory = new MemoryStore();
    const faulty = new FaultyStore(memory);
    const { services } = world(faulty);
    const first = services();
    await first.sessions.create({ id: 's' });
    for (let index = 0; index < 3; index++) await runTurn(first, 's', { input: `t${index}` });
    // Every read of the log after the claim fails once: hydration, the view, the inbox listing.
    faulty.failWhen(({ operation, key }) => operation === 'list' && key.includes('/inbox/'), { times: 1 });
    faulty.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.done'), { times: 1 });
    const failed = await runTurn(services(), 's', { input: 'fails' }).catch((error: unknown) => error);
    expect(answer(failed).status).toBe(503);
    faulty.heal();
    await expect(runTurn(services(), 's', { input: 'goes on' })).resolves.toMatchObject({ turn: 5 });
  });
});

describe('a completion whose answer was lost', () => {
  it("is the turn's own: answered as stored, not as closed by someone else", async () => {
    const memory = new MemoryStore();
    const faulty = new FaultyStore(memory);
    const { services } = world(faulty);
    await services().sessions.create({ id: 's' });
    // The completion lands but times out, and the read-back right after fails too.
    faulty.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.done'), { after: true, times: 1 });
    faulty.failWhen(({ operation, key }) => operation === 'get' && key.endsWith('.done'), { times: 1 });
    const outcome = await runTurn(services(), 's', { input: 'hi' }).catch((error: unknown) => error);
    // The client hears of the storage failure; the turn is stored once, completed.
    expect(answer(outcome)).toEqual({ status: 503, code: 'storage_error' });
    const next = await runTurn(services(), 's', { input: 'again' });
    expect(next.turn).toBe(2);
    const contents = (await services().sessions.listItems('s', { limit: 10 })).items.map((item) =>
      item.type === 'message' ? item.content : '',
    );
    expect(contents).toEqual(['echo: again', 'again', 'echo: hi', 'hi']);
  });
});

describe('an id deleted and created again', () => {
  it('does not deliver notices left by a delete that stopped after removing the config', async () => {
    const { store, services, advance } = world();
    const client = services();
    await client.sessions.create({ id: 's' });
    await client.inbox.post('s', { name: 'old', content: 'for the old session only' });
    // The delete stopped right after removing session.json; later the id is created again.
    await store.delete(sessionConfigKey('', 's'));
    advance(60_000);
    const fresh = services();
    await fresh.sessions.create({ id: 's' });
    await fresh.inbox.post('s', { name: 'new', content: 'for the new session' });
    const turn = await runTurn(fresh, 's', { input: 'hi' });
    expect(turn.context.notices_delivered).toEqual(['new']);
    expect(await fresh.inbox.listPending('s')).toEqual([]);
  });

  it('does not deliver a notice whose post checked the session just before it was deleted', async () => {
    const store = new GatedStore('/inbox/for-old');
    const { services, advance } = world(store);
    const client = services();
    await client.sessions.create({ id: 's' });
    // The post found session s, then its put waits while s is deleted and created again.
    const posted = client.inbox.post('s', { name: 'for-old', content: 'meant for the deleted session' });
    await store.reached;
    await client.sessions.delete('s');
    advance(60_000);
    await client.sessions.create({ id: 's' });
    store.release();
    await posted;
    const turn = await runTurn(services(), 's', { input: 'new life' });
    expect(turn.context.notices_delivered).toEqual([]);
    expect(await client.inbox.listPending('s')).toEqual([]);
  });
});

describe('notices a failed turn consumed', () => {
  it('are delivered by the next turn that succeeds, once, and the delivery record names it', async () => {
    const { services } = world();
    const model = heldModel();
    const owner = services(model);
    await owner.sessions.create({ id: 's', model: 'held' });
    await owner.inbox.post('s', { name: '0001-budget.md', content: 'Budget left: 2 USD' });
    const failing = runTurn(owner, 's', { input: 'fails' }).catch((error: unknown) => error);
    await model.started;
    model.fail(new ModelError('provider down', { model: 'held' }));
    expect(answer(await failing).status).toBe(502);
    expect(await owner.inbox.listPending('s')).toEqual([]);
    const next = await runTurn(services(), 's', { input: 'next', model: 'echo' });
    expect(next.context.notices_delivered).toEqual(['0001-budget.md']);
    expect(next.output[0]).toMatchObject({ content: 'echo: Budget left: 2 USD' });
    const after = await runTurn(services(), 's', { input: 'after', model: 'echo' });
    expect(after.context.notices_delivered).toEqual([]);
    await services().inbox.recordCarrier('s', [{ stored_as: '0001-budget.md' }], next.turn);
    expect(await services().inbox.listDelivered('s')).toMatchObject([{ name: '0001-budget.md', turn: next.turn }]);
  });
});

describe('notices a turn took, under a storage fault', () => {
  /** The notices each of three turns after the failed one delivers. */
  async function deliveredAfter(services: ReturnType<typeof world>['services']): Promise<string[]> {
    const delivered: string[] = [];
    for (let index = 0; index < 3; index++)
      delivered.push(...(await runTurn(services(), 's', { input: `next ${index}` })).context.notices_delivered);
    return delivered;
  }

  it('a failed check of one fetched notice leaves it for later, and the notice moved beside it is kept', async () => {
    const faulty = new FaultyStore(new MemoryStore());
    const { services } = world(faulty);
    await services().sessions.create({ id: 's' });
    await services().inbox.post('s', { name: 'a', content: 'note A' });
    await services().inbox.post('s', { name: 'b', content: 'note B' });
    faulty.failWhen(({ operation, key }) => operation === 'head' && key.endsWith('/inbox/b'), { times: 1 });
    const first = await runTurn(services(), 's', { input: 'one' });
    faulty.heal();
    // Both were answered 201: each reaches a stored turn once.
    expect([...first.context.notices_delivered, ...(await deliveredAfter(services))].sort()).toEqual(['a', 'b']);
  });

  it("a failed put of an aborted turn's completion keeps the notices it moved for a later turn", async () => {
    const faulty = new FaultyStore(new MemoryStore());
    const { services } = world(faulty);
    await services().sessions.create({ id: 's' });
    await services().inbox.post('s', { name: 'a', content: 'note A' });
    await services().inbox.post('s', { name: 'abort', content: 'stop' });
    faulty.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.done'), { times: 1 });
    expect(await runTurn(services(), 's', { input: 'one' }).catch((error: unknown) => error)).toBeInstanceOf(Error);
    faulty.heal();
    expect(await deliveredAfter(services)).toEqual(['a']);
  });
});

describe('notices of turns closed by someone else', () => {
  it('go to the next turn that succeeds, even when the turn that took them over is cancelled too', async () => {
    const { services } = world();
    const first = heldModel();
    const owner = services(first);
    await owner.sessions.create({ id: 's', model: 'held' });
    await owner.inbox.post('s', { name: 'n1', content: 'budget low' });
    const one = runTurn(owner, 's', { input: 'one' }).catch((error: unknown) => error);
    await first.started;
    await services().sessions.cancelTurn('s', 1);
    const second = heldModel();
    const two = runTurn(services(second), 's', { input: 'two' }).catch((error: unknown) => error);
    await second.started;
    // Turn 2 took n1 over from turn 1, and is cancelled in turn.
    expect((await services().inbox.listDelivered('s')).map((record) => record.turn)).toEqual([2]);
    await services().sessions.cancelTurn('s', 2);
    first.release();
    second.release();
    expect(answer(await one).code).toBe('turn_cancelled');
    expect(answer(await two).code).toBe('turn_cancelled');
    const three = await runTurn(services(), 's', { input: 'three', model: 'echo' });
    expect(three.context.notices_delivered).toEqual(['n1']);
    const four = await runTurn(services(), 's', { input: 'four', model: 'echo' });
    expect(four.context.notices_delivered).toEqual([]);
  });
});

describe('Idempotency-Key', () => {
  it('refuses the same key with another request (422) and replays the same one', async () => {
    const { services } = world();
    const client = services();
    await client.sessions.create({ id: 's' });
    const first = await runTurn(client, 's', { input: 'once' }, { idempotencyKey: 'k' });
    await expect(runTurn(services(), 's', { input: 'once' }, { idempotencyKey: 'k' })).resolves.toEqual(first);
    const reused = await runTurn(services(), 's', { input: 'another' }, { idempotencyKey: 'k' }).catch(
      (error: unknown) => error,
    );
    expect(answer(reused)).toEqual({ status: 422, code: 'idempotency_key_reused' });
    // Later records do not hide the key: it is indexed before its turn closes.
    await runTurn(services(), 's', { input: 'later' });
    await expect(runTurn(services(), 's', { input: 'once' }, { idempotencyKey: 'k' })).resolves.toEqual(first);
    expect(await userContents(client.sessions, 's')).toEqual(['once', 'later']);
  });
});

describe('a keyed turn whose process died', () => {
  it('is replayed 409 lease_expired naming the turn and how to take it again, which a retake does', async () => {
    const { services, advance } = world();
    const model = heldModel();
    const owner = services(model);
    await owner.sessions.create({ id: 's', model: 'held' });
    const running = runTurn(owner, 's', { input: 'killed' }, { idempotencyKey: 'k' }).catch((error: unknown) => error);
    await model.started;
    // Its process is gone: nobody renews the lease; a restarted one gets the client's retry.
    advance(LEASE_MS + 1);
    const retry = async () => {
      const error = await runTurn(services(), 's', { input: 'killed' }, { idempotencyKey: 'k' }).catch(
        (thrown: unknown) => thrown,
      );
      return errorBody(error, () => {});
    };
    const expected = {
      status: 409,
      body: {
        error: {
          code: 'lease_expired',
          message:
            'turn 1 did not complete before its lease expired; its output was not stored. While it is the ' +
            'session\'s newest turn, POST /v1/sessions/s/turns with "input": [] under a new Idempotency-Key ' +
            '(or none) takes it again',
          details: { session_id: 's', turn: 1 },
        },
      },
    };
    // The retry that closes it, and one after: the stored failure, the same each time.
    expect(await retry()).toEqual(expected);
    expect(await retry()).toEqual(expected);
    const retake = await runTurn(services(), 's', { input: [], model: 'echo' }, { idempotencyKey: 'k2' });
    expect(retake.output).toMatchObject([{ type: 'message', content: 'echo: killed' }]);
    model.release();
    expect(errorBody(await running, () => {})).toEqual(expected);
  });
});

describe('input checked against the open calls', () => {
  it('refuses an output without its call, a second output, and a reused call_id (400)', async () => {
    const { services } = world();
    const client = services();
    await client.sessions.create({
      id: 's',
      tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object' } }],
    });
    const calling = await runTurn(client, 's', { input: 'call get_weather {"city":"Paris"}' });
    expect(calling.output[0]).toMatchObject({ type: 'function_call' });
    const callId = (calling.output[0] as { call_id: string }).call_id;
    const refuse = async (input: Parameters<typeof runTurn>[2]['input']) =>
      answer(await runTurn(services(), 's', { input }).catch((error: unknown) => error));
    expect(await refuse([{ type: 'function_call_output', call_id: 'call_unknown', output: 'x' }])).toEqual({
      status: 400,
      code: 'invalid_request',
    });
    expect(await refuse([{ type: 'function_call', call_id: callId, name: 'get_weather', arguments: '{}' }])).toEqual({
      status: 400,
      code: 'invalid_request',
    });
    expect(
      await refuse([
        { type: 'function_call_output', call_id: callId, output: '18C' },
        { type: 'function_call_output', call_id: callId, output: '19C' },
      ]),
    ).toEqual({ status: 400, code: 'invalid_request' });
    // Nothing of the refused inputs was stored; the right answer is.
    await runTurn(services(), 's', { input: [{ type: 'function_call_output', call_id: callId, output: '18C' }] });
    expect(await refuse([{ type: 'function_call_output', call_id: callId, output: 'again' }])).toEqual({
      status: 400,
      code: 'invalid_request',
    });
    expect((await client.sessions.get('s')).counts.items).toBe(4);
  });
});

describe('a turn whose takeover of a closed turn’s notice fails at a storage call', () => {
  it.each([false, true])('leaves the notice to exactly one later turn (the call landed: %s)', async (after) => {
    for (let k = 1; ; k++) {
      const memory = new MemoryStore();
      // Turn 1's process can no longer reach the inbox once its model was called: it gives nothing back.
      const dying = new FaultyStore(memory);
      const first = heldModel();
      const owner = world(dying).services(first);
      await owner.sessions.create({ id: 's', model: 'held' });
      await owner.inbox.post('s', { name: 'n1', content: 'budget low' });
      const one = runTurn(owner, 's', { input: 'one' }).catch((error: unknown) => error);
      await first.started;
      const faulty = new FaultyStore(memory);
      const { services } = world(faulty);
      while ((await services().inbox.listDelivered('s')).length === 0) await new Promise((go) => setTimeout(go, 1));
      dying.failWhen(({ key }) => key.includes('/inbox'));
      await services().sessions.cancelTurn('s', 1);
      first.release();
      await one;
      // Turn 2 takes n1 over from turn 1; its kth storage call under inbox_removed/ fails.
      let calls = 0;
      faulty.failWhen(({ key }) => key.includes('/inbox_removed/') && ++calls === k, { after, times: 1 });
      const two = await runTurn(services(), 's', { input: 'two', model: 'echo' }).catch(() => null);
      faulty.heal();
      const delivered = [...(two?.context.notices_delivered ?? [])];
      for (const input of ['three', 'four', 'five'])
        delivered.push(...(await runTurn(services(), 's', { input, model: 'echo' })).context.notices_delivered);
      expect(delivered, `fails at call ${k}`).toEqual(['n1']);
      if (faulty.injected === 0) return;
    }
  });
});

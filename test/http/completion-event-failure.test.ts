import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, createTurnRunner, type AppOptions } from '../../functions/app.ts';
import { sessionLogFor } from '../../functions/services.ts';
import { parseServiceConfig } from '../../lib/config.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';
import { drainOutbox } from '../../lib/webhooks/outbox.ts';
import { FaultyStore, type StoreCall } from '../support/faulty-store.ts';
import { startWebhookReceiver, WEBHOOK_SECRET, type WebhookReceiver } from '../support/webhook-receiver.ts';
import { createClient, parseSse, TOKEN } from './http-suite.ts';

// A turn's own completion that landed while its webhook event could not be written (docs/API.md,
// "Webhooks"): the turn's claim stored its intent in the outbox, so the turn stands, answered as
// completed (the failure logged once), and the outbox's drainer delivers its event from that intent.

const LEASE_MS = 3000;
let receiver: WebhookReceiver;
beforeAll(async () => {
  receiver = await startWebhookReceiver();
});
afterAll(() => receiver.close());

/** A put of the outbox: an unconditional one is an event, a create-only one a turn's intent. */
const outboxPut = ({ operation, key }: StoreCall) => operation === 'put' && key.includes('webhooks/outbox/');
const eventPut = (call: StoreCall) => outboxPut(call) && !call.options?.onlyIfAbsent;

function harness() {
  const store = new FaultyStore(new MemoryStore());
  const logged: string[] = [];
  const sent: BackgroundTurn[] = [];
  const environment = {
    API_TOKEN: TOKEN,
    DEFAULT_MODEL: 'echo',
    TURN_LEASE_MS: String(LEASE_MS),
    WEBHOOK_SECRET,
    WEBHOOK_URL: receiver.url,
    WEBHOOK_ALLOW_PRIVATE: 'true',
  };
  const options: AppOptions = {
    readEnvironment: (c) => c.env ?? {},
    log: (message) => void logged.push(message),
    queueTurn: () => async (run) => void sent.push(run),
    store: () => store,
  };
  const app = createApp(options);
  const api = createClient({
    fetch: async (path, init) => app.request(path, init, environment),
    fetchWithEnv: async (overrides, path, init) => app.request(path, init, { ...environment, ...overrides }),
    store,
    keyPrefix: '',
    logged,
  });
  // The drainer, once the turn's lease ran out (its intent is due then).
  const drain = () =>
    drainOutbox({
      store,
      keyPrefix: '',
      sessions: sessionLogFor(store, parseServiceConfig(environment)),
      secret: WEBHOOK_SECRET,
      allowPrivate: true,
      clock: () => new Date(Date.now() + 2 * LEASE_MS),
      log: (message) => void logged.push(message),
    });
  const runner = createTurnRunner(options);
  const run = async (turn: BackgroundTurn) => {
    const tasks: Promise<unknown>[] = [];
    expect(await runner(turn, environment, (task) => void tasks.push(task))).toBe('done');
    await Promise.allSettled(tasks);
  };
  return { store, logged, sent, api, drain, run };
}

/** The turn.completed events the receiver took for `turn` of session `id`. */
function completedEvents(id: string, turn: number) {
  return receiver.deliveries.filter(
    ({ event }) => event?.type === 'turn.completed' && event.data.session_id === id && event.data.turn === turn,
  );
}

/** The event fails, then its intent is drained: the event is delivered once, the failure logged once. */
async function deliveredFromIntent(setup: ReturnType<typeof harness>, id: string, turn: number) {
  const { store, logged, drain } = setup;
  expect(store.injected).toBeGreaterThan(0);
  const told = logged.filter((message) => message.includes(`turn ${turn} of session ${id}`));
  expect(told).toEqual([expect.stringContaining('its webhook event left to the outbox')]);
  expect(logged.join('\n')).not.toContain('could not close a failed turn');
  expect(completedEvents(id, turn)).toEqual([]);
  store.heal();
  await drain();
  expect(completedEvents(id, turn)).toHaveLength(1);
  // Delivered: the drainer deleted the entry, a second drain sends nothing more.
  await drain();
  expect(completedEvents(id, turn)).toHaveLength(1);
}

describe("a turn whose completion landed and whose webhook event's write failed", () => {
  it('is answered 200 with its output, and its event is delivered later from its intent', async () => {
    const setup = harness();
    const { api, store } = setup;
    const id = await api.session();
    store.failWhen(eventPut);
    const answered = await api.post(`/v1/sessions/${id}/turns`, { input: 'hello' });
    expect(answered.status, JSON.stringify(answered.body)).toBe(200);
    expect(answered.body).toMatchObject({ turn: 1, output: [{ type: 'message', role: 'assistant' }] });
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({ status: 'completed' });
    await deliveredFromIntent(setup, id, 1);
  });

  it('streamed, ends with turn.completed, not an error', async () => {
    const setup = harness();
    const { api, store } = setup;
    const id = await api.session();
    store.failWhen(eventPut);
    const streamed = await api.post(`/v1/sessions/${id}/turns`, { input: 'hello', stream: true });
    expect(streamed.status).toBe(200);
    const events = parseSse(streamed.body as string);
    expect(events.at(-1)).toMatchObject({ event: 'turn.completed', data: { turn: 1 } });
    expect(events.map(({ event }) => event)).not.toContain('error');
    await deliveredFromIntent(setup, id, 1);
  });

  it('in the background, is completed: the intent its claim stored covers it', async () => {
    const setup = harness();
    const { api, store, sent, run } = setup;
    const id = await api.session();
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'later', background: true })).status).toBe(202);
    // Every outbox put fails from here: the runner's completion finds the claim's intent there.
    store.failWhen(outboxPut);
    await run(sent[0]!);
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({ status: 'completed' });
    await deliveredFromIntent(setup, id, 1);
  });
});

describe('a turn whose completion landed while no intent of its event could be stored', () => {
  it('is answered the storage error (its event would be lost), its event not written again', async () => {
    const { api, store, logged } = harness();
    const id = await api.session();
    const failedEvents: string[] = [];
    store.failWhen((call) => outboxPut(call) && (!eventPut(call) || failedEvents.push(call.key) > 0));
    const answered = await api.post(`/v1/sessions/${id}/turns`, { input: 'hello' });
    expect(answered.status, JSON.stringify(answered.body)).toBe(503);
    expect(answered.body.error.code).toBe('storage_error');
    // Closed by its own completion all the same: no failed close tried after it.
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({ status: 'completed' });
    expect(logged.join('\n')).not.toContain('could not close a failed turn');
    expect(logged.join('\n')).not.toContain('left to the outbox');
    // The turn's event was tried once (and the session.idle of the queue's pickup once).
    expect(new Set(failedEvents).size).toBe(failedEvents.length);
  });
});

describe('a close by someone else whose webhook event failed, of a turn whose claim stored no intent', () => {
  it('stores the intent then: a cancel of a turn whose runner never ran has its event delivered', async () => {
    const setup = harness();
    const { api, store, logged, drain } = setup;
    const id = await api.session();
    // The claim's intent fails; its runner is gone (never run).
    store.failWhen((call) => outboxPut(call) && !eventPut(call));
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'later', background: true })).status).toBe(202);
    store.heal();
    store.failWhen(eventPut);
    expect((await api.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
    expect(logged.filter((message) => message.includes(`turn 1 of session ${id}`))).toEqual([
      expect.stringContaining('its webhook event left to the outbox'),
    ]);
    store.heal();
    await drain();
    const events = receiver.deliveries.filter(({ event }) => event?.data.session_id === id && event.data.turn === 1);
    expect(events.map(({ event }) => event)).toEqual([
      expect.objectContaining({ type: 'turn.cancelled', data: expect.objectContaining({ turn: 1 }) }),
    ]);
  });
});

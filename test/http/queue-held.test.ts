import { describe, expect, it } from 'vitest';
import { createTurnRunner, type AppOptions } from '../../functions/app.ts';
import { recordsListPrefix } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';
import type { WebhookEntry } from '../../lib/webhooks/events.ts';
import { appHarness } from '../support/app-harness.ts';
import { WEBHOOK_SECRET } from '../support/webhook-receiver.ts';
import { createClient, SIGNING_KEY, TOKEN } from './http-suite.ts';

// A queue the session's spent budget holds (docs/API.md, "Busy sessions"): GET .../queue says so
// in `held`, with the details of the 402 budget_exhausted its pickup met.

const environment = {
  API_TOKEN: TOKEN,
  TOKEN_SIGNING_KEY: SIGNING_KEY,
  DEFAULT_MODEL: 'echo',
  WEBHOOK_SECRET,
  WEBHOOK_URL: 'https://example.com/hook',
};

function setup() {
  const store = new MemoryStore();
  const sent: BackgroundTurn[] = [];
  const tasks: Promise<unknown>[] = [];
  // The webhook events, as a queue takes them.
  const events: WebhookEntry[] = [];
  const options: AppOptions = {
    queueWebhook: () => async (entry) => void events.push(entry),
    store: () => store,
    readEnvironment: (c) => c.env ?? environment,
    afterResponse: (task) => void tasks.push(task),
    queueTurn: () => async (run) => void sent.push(run),
  };
  const api = createClient(appHarness(store, environment, options));
  const runner = createTurnRunner(options);
  const drain = async () => {
    while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
  };
  const runAll = async () => {
    for (let ran = 0; ran < sent.length; ran++) {
      expect(await runner(sent[ran]!, environment, (task) => void tasks.push(task))).toBe('done');
      await drain();
    }
  };
  const sentEvents = () => events.map((entry) => JSON.parse(entry.body) as { type: string; data: unknown });
  return { api, store, sent, drain, runAll, sentEvents };
}

describe('GET /v1/sessions/{id}/queue of a queue the budget holds', () => {
  it('names the budget that holds it, and no longer once a PATCH raises the budget', async () => {
    const { api, sent, drain, runAll, sentEvents } = setup();
    const id = await api.session({ on_busy: 'enqueue' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'second' });
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    await drain();
    // While the budget leaves room, nothing holds the queue.
    const waiting = await api.get(`/v1/sessions/${id}/queue`);
    expect(waiting.body.held).toBeUndefined();
    expect((await api.patch(`/v1/sessions/${id}`, { budget: { max_turns: 0 } })).status).toBe(200);
    await drain();
    await runAll();
    expect(sent).toHaveLength(1);
    const held = await api.get(`/v1/sessions/${id}/queue`);
    expect(held.status).toBe(200);
    expect(held.body.total).toBe(1);
    expect(held.body.queued.map((row: any) => row.queued_turn)).toEqual([queued.body.queued_turn]);
    // As the 402 of a turn the budget refuses tells it.
    const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'third', on_busy: 'reject' });
    expect(refused.status, JSON.stringify(refused.body)).toBe(402);
    expect(held.body.held).toEqual({ reason: refused.body.error.code, ...refused.body.error.details });
    expect(held.body.held).toMatchObject({ reason: 'budget_exhausted', budget: 'session', limit: 'max_turns' });
    // Turn 1's close found the queue held: told once, by `session.held` (no `session.idle`).
    const told = sentEvents().filter((event) => event.type.startsWith('session.'));
    expect(told).toEqual([
      { type: 'session.held', timestamp: expect.any(String), data: { session_id: id, turn: 1, held: held.body.held } },
    ]);
    // A raise lets its pickup take the input up: nothing holds the queue.
    expect((await api.patch(`/v1/sessions/${id}`, { budget: { max_turns: 5 } })).status).toBe(200);
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.held).toBeUndefined();
    await drain();
    await runAll();
    expect(sent).toHaveLength(2);
    expect((await api.get(`/v1/sessions/${id}/queue`)).body).toEqual({ queued: [], total: 0 });
    expect(
      sentEvents()
        .filter((event) => event.type.startsWith('session.'))
        .map((event) => event.type),
    ).toEqual(['session.held', 'session.idle']);
  });

  it('says nothing of a budget with room, nor of an empty queue under a spent one', async () => {
    const { api, drain, runAll } = setup();
    const id = await api.session({ on_busy: 'enqueue', budget: { max_turns: 1 } });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    await drain();
    await runAll();
    expect((await api.get(`/v1/sessions/${id}/queue`)).body).toEqual({ queued: [], total: 0 });
  });
});

describe('GET /v1/sessions/{id}/queue when the usage behind held cannot be read', () => {
  it('lists the inputs without held rather than failing', async () => {
    const { api, store, drain, runAll } = setup();
    const id = await api.session({ on_busy: 'enqueue' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'second' });
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    expect((await api.patch(`/v1/sessions/${id}`, { budget: { max_turns: 0 } })).status).toBe(200);
    await drain();
    await runAll();
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.held).toMatchObject({ limit: 'max_turns' });
    // The newest record turns unreadable: the queue is read as before, only whether the budget holds it is unknown.
    const records = (await store.list(recordsListPrefix('', id))).objects.filter((object) => /\d$/.test(object.key));
    expect(records.length).toBeGreaterThan(0);
    for (const { key } of records) await store.put(key, new TextEncoder().encode('{"not a record'));
    const listed = await api.get(`/v1/sessions/${id}/queue`);
    expect(listed.status, JSON.stringify(listed.body)).toBe(200);
    expect(listed.body.total).toBe(1);
    expect(listed.body.queued.map((row: any) => row.queued_turn)).toEqual([queued.body.queued_turn]);
    expect(listed.body.held).toBeUndefined();
  });
});

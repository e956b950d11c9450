import { expect, it } from 'vitest';
import type { AppOptions } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { appHarness } from '../support/app-harness.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { createClient, TOKEN } from './http-suite.ts';

// A background turn whose process died is closed as failed `lease_expired` by whoever reads it
// once its lease ran out. That close is the session's last write until its next turn, so the
// session listing (GET /v1/sessions) shows the row it left, as GET /v1/sessions/{id} does.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '3000' };
const hourLater = () => new Date(Date.now() + 3_600_000);

/** A process on `store`, its work after each response kept until `drain`. */
function process(store: ObjectStore, options: Partial<AppOptions> = {}) {
  const tasks: Promise<unknown>[] = [];
  const api = createClient(
    appHarness(store, environment, { afterResponse: (task) => void tasks.push(task), ...options }),
  );
  const drain = async () => {
    while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
  };
  return { api, drain };
}

const FIRST = { input: 'first', model: 'echo', background: true };

/** A new session on `store` whose background turn 1 (`FIRST`, posted with `headers`) is left open; its id. */
async function deadTurn(store: ObjectStore, headers?: Record<string, string>): Promise<string> {
  // Its background turns never run: it dies before it runs them.
  const dead = process(store, { queueTurn: () => async () => undefined });
  const id = await dead.api.session();
  const posted = await dead.api.post(`/v1/sessions/${id}/turns`, FIRST, headers);
  expect(posted.status).toBe(202);
  await dead.drain();
  return id;
}

const readers: [string, (api: ReturnType<typeof createClient>, id: string) => Promise<unknown>][] = [
  [
    'a GET of the turn',
    async (api, id) => expect((await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('failed'),
  ],
  [
    'a listing of its turns',
    async (api, id) => expect((await api.get(`/v1/sessions/${id}/turns`)).body.turns[0].status).toBe('failed'),
  ],
  [
    'a reader of its events',
    async (api, id) => expect((await api.get(`/v1/sessions/${id}/turns/1/events`)).body).toContain('lease_expired'),
  ],
];

it.each(readers)('lists a session whose dead turn %s closed with that close', async (_, read) => {
  const store = new MemoryStore();
  const id = await deadTurn(store);
  const closer = process(store, { clock: hourLater });
  await read(closer.api, id);
  await closer.drain();
  const session = (await closer.api.get(`/v1/sessions/${id}`)).body;
  const listing = (await closer.api.get('/v1/sessions')).body;
  expect(listing.sessions).toHaveLength(1);
  expect(session.counts).toEqual({ items: 1, turns: 1, tool_calls: 0 });
  expect(listing.sessions[0]).toMatchObject({ id, counts: session.counts, usage: session.usage });
});

/** The listing's row of session `id` beside the session and the close of its dead turn 1. */
async function expectListedAfterClose(api: ReturnType<typeof createClient>, id: string) {
  const listing = (await api.get('/v1/sessions')).body;
  const session = (await api.get(`/v1/sessions/${id}`)).body;
  const closed = (await api.get(`/v1/sessions/${id}/turns/1`)).body;
  expect(closed).toMatchObject({ status: 'failed', error: { code: 'lease_expired' } });
  expect(listing.sessions).toHaveLength(1);
  expect(session.counts).toEqual({ items: 1, turns: 1, tool_calls: 0 });
  expect(listing.sessions[0]).toMatchObject({
    id,
    counts: session.counts,
    usage: session.usage,
    last_activity_at: closed.completed_at,
  });
}

it('lists a session whose dead turn a retry under its Idempotency-Key closed, replayed, with that close', async () => {
  const store = new MemoryStore();
  const headers = { 'idempotency-key': 'dead-turn' };
  const id = await deadTurn(store, headers);
  const closer = process(store, { clock: hourLater });
  // The retry's claim finds its key's turn open, its lease run out: it closes it and replays it.
  const retried = await closer.api.post(`/v1/sessions/${id}/turns`, FIRST, headers);
  expect(retried.status).toBeLessThan(500);
  await closer.drain();
  await expectListedAfterClose(closer.api, id);
});

it('lists a session whose dead turn a claim closed, then storing nothing, with that close', async () => {
  const memory = new MemoryStore();
  const id = await deadTurn(memory);
  // The next background turn's claim closes turn 1, then its own record's put fails: it stores nothing.
  const store = new FaultyStore(memory);
  store.failWhen(({ operation, key }) => operation === 'put' && /\/turn\/[^/]+\/\d+$/.test(key), { times: 1 });
  const closer = process(store, { clock: hourLater });
  const second = { input: 'second', model: 'echo', background: true };
  const failed = await closer.api.post(`/v1/sessions/${id}/turns`, second);
  expect(failed.status).toBe(503);
  await closer.drain();
  await expectListedAfterClose(closer.api, id);
});

it('lists no row for a session deleted while the close of its dead turn refreshes its row', async () => {
  const store = new MemoryStore();
  const id = await deadTurn(store);
  const closer = process(store, { clock: hourLater });
  // The read closes turn 1; its refresh of the row runs after the response, beside the delete.
  expect((await closer.api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('failed');
  expect((await closer.api.delete(`/v1/sessions/${id}`)).status).toBe(204);
  await closer.drain();
  expect((await closer.api.get('/v1/sessions')).body.sessions).toEqual([]);
  // No entry is left, only the delete's marker (lib/session/log/index-markers.ts).
  const left = (await store.list('index/', { limit: 10 })).objects.map((object) => object.key);
  expect(left).toEqual([expect.stringMatching(/^index\/\d{13}-[^/]+\/-g/)]);
});

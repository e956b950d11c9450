import { describe, expect, it } from 'vitest';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { appHarness } from '../support/app-harness.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { createClient, parseSse, TOKEN } from './http-suite.ts';

// A turn closed by the process that runs it (a cancel, an `interrupt`, a delete of its session;
// a background response's cancel) stops at once: the close, once its completion landed, aborts
// the turn's model call (lib/turn/running.ts), with the answer its next lease renewal would have
// given. TURN_LEASE_MS is ten minutes, so no renewal comes within a test: a model call aborted
// here was aborted by the close. A second app over the same store is another process: its close
// is found only by storage (test/http/foreground-close.test.ts shows the renewal finding it).

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '600000' };
const stores = await memoryAndFileStores('local-close');

const heldEcho = releasedAfterEach();

/** Resolves once `signal` is aborted (at once if it is). */
function abortOf(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

/** A process on `store` whose model holds `slow` prompts (test/support/slow-echo.ts). */
function processOn(store: ObjectStore) {
  const slow = heldEcho();
  const { options, logs, infos, drain } = heldOptions(slow.model);
  const harness = appHarness(store, environment, options);
  const api = createClient(harness);
  const post = async (path: string, body: unknown) => {
    const response = await harness.fetch(path, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as any };
  };
  /**
   * The signal of the held model call, once it is running, and with `id`, once the claim of turn 1
   * of that session landed (the call starts before the claim's put is answered: a close sent
   * before it lands finds no such turn; a background turn's was claimed before its answer).
   */
  const calling = async (id?: string) => {
    await expect.poll(() => slow.signals.length).toBe(1);
    if (id !== undefined)
      await expect.poll(async () => (await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('in_progress');
    return slow.signals[0]!;
  };
  return { api, post, drain, calling, logs, infos, release: slow.release };
}

function world(storeOf: () => ObjectStore) {
  const store = storeOf();
  return { store, one: processOn(store), two: processOn(store) };
}

/**
 * The keys naming session `id` but its completions (a delete's fence stays) and the delete's
 * marker in the session index (lib/session/log/index-markers.ts).
 */
async function leftOf(store: ObjectStore, id: string): Promise<string[]> {
  const listed = await store.list('');
  return listed.objects
    .map((object) => object.key)
    .filter((key) => key.includes(id) && !key.endsWith('.done') && !/^index\/[^/]+\/-/.test(key));
}

type Close = 'cancel' | 'interrupt' | 'delete';

/** Closes turn 1 of session `id` through `api` as `close` says; the status it is answered. */
async function closeTurn(api: ReturnType<typeof createClient>, id: string, close: Close): Promise<number> {
  if (close === 'delete') return (await api.delete(`/v1/sessions/${id}`)).status;
  if (close === 'cancel') return (await api.post(`/v1/sessions/${id}/turns/1/cancel`)).status;
  const taken = await api.post(`/v1/sessions/${id}/turns`, { input: 'now', on_busy: 'interrupt' });
  expect(taken.body).toMatchObject({ turn: 2, output: [{ content: 'echo: now' }] });
  return taken.status;
}

const closes: [Close, number][] = [
  ['cancel', 200],
  ['interrupt', 200],
  ['delete', 204],
];

describe.each(stores)('a turn closed in the process that runs it: %s', (_, storeOf) => {
  it.each(closes)(
    'a foreground turn: a %s aborts its model call at once, answered as before',
    async (close, status) => {
      const { store, one } = world(storeOf);
      const id = await one.api.session({ strategies: ['inbox'] });
      // The turn takes it (its prompt ends with it): a cancel gives it back, a delete leaves it
      // swept (an interrupt's turn would be held by it).
      const note = { name: 'note.md', content: 'slow note' };
      if (close !== 'interrupt') expect((await one.api.post(`/v1/sessions/${id}/inbox`, note)).status).toBe(201);
      const pending = one.api.post(`/v1/sessions/${id}/turns`, { input: 'slow one' });
      const signal = await one.calling(id);
      expect(await closeTurn(one.api, id, close)).toBe(status);
      await abortOf(signal);
      const answered = await pending;
      if (close === 'delete') {
        expect(answered.status, JSON.stringify(answered.body)).toBe(404);
        expect(answered.body.error).toMatchObject({ code: 'not_found' });
        expect((await one.api.get(`/v1/sessions/${id}`)).status).toBe(404);
        // Stopped once the delete ended: it wrote nothing into the swept session, and removed its fence.
        await one.drain();
        expect(await leftOf(store, id)).toEqual([]);
        expect((await store.list(`sessions/${id}/`)).objects).toEqual([]);
        return;
      }
      expect(answered.status, JSON.stringify(answered.body)).toBe(409);
      expect(answered.body.error).toMatchObject({ code: 'turn_cancelled' });
      expect((await one.api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({
        status: 'cancelled',
        output: null,
      });
      // The notice it took went back.
      await one.drain();
      const inbox = (await one.api.get(`/v1/sessions/${id}/inbox`)).body.pending;
      expect(inbox.map((notice: any) => notice.name)).toEqual(close === 'cancel' ? ['note.md'] : []);
    },
  );

  it.each(closes)(
    'a background turn: a %s aborts its model call at once, answered as before',
    async (close, status) => {
      const { one } = world(storeOf);
      const id = await one.api.session();
      expect((await one.api.post(`/v1/sessions/${id}/turns`, { input: 'slow one', background: true })).status).toBe(
        202,
      );
      const signal = await one.calling(id);
      expect(await closeTurn(one.api, id, close)).toBe(status);
      await abortOf(signal);
      await one.drain();
      if (close === 'delete') {
        expect(one.infos).toContain(`tailgate: background turn 1 of session ${id} stopped: the session was deleted`);
        return;
      }
      expect((await one.api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({
        status: 'cancelled',
        output: null,
      });
      const events = parseSse((await one.api.call('GET', `/v1/sessions/${id}/turns/1/events`)).body);
      expect(events.at(-1)).toMatchObject({ event: 'error', data: { error: { code: 'turn_cancelled' } } });
    },
  );

  it("a background response's cancel aborts its model call at once: cancelled", async () => {
    const { one } = world(storeOf);
    const created = await one.post('/v1/responses', { model: 'echo', input: 'slow one', background: true });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const signal = await one.calling();
    const cancelled = await one.post(`/v1/responses/${created.body.id}/cancel`, {});
    expect(cancelled.body).toMatchObject({ id: created.body.id, status: 'cancelled' });
    await abortOf(signal);
    await one.drain();
    expect((await one.api.get(`/v1/responses/${created.body.id}`)).body).toMatchObject({ status: 'cancelled' });
  });

  it('a cancel through another process does not abort the call: the turn learns of it from storage', async () => {
    const { one, two } = world(storeOf);
    const id = await one.api.session();
    const pending = one.api.post(`/v1/sessions/${id}/turns`, { input: 'slow one' });
    const signal = await one.calling(id);
    expect((await two.api.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
    await two.drain();
    // Its own process knows nothing of the close: the call goes on (until a renewal would read it).
    expect(signal.aborted).toBe(false);
    one.release();
    // Its completion is refused by the cancel's: answered as the renewal would have answered it.
    const answered = await pending;
    expect(answered.status, JSON.stringify(answered.body)).toBe(409);
    expect(answered.body.error).toMatchObject({ code: 'turn_cancelled' });
  });

  it('a background turn cancelled through another process runs on: its model call is not aborted', async () => {
    const { one, two } = world(storeOf);
    const id = await one.api.session();
    expect((await one.api.post(`/v1/sessions/${id}/turns`, { input: 'slow one', background: true })).status).toBe(202);
    const signal = await one.calling(id);
    expect((await two.api.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
    await two.drain();
    expect(signal.aborted).toBe(false);
    one.release();
    await one.drain();
    expect((await one.api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({ status: 'cancelled', output: null });
  });
});

import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { appHarness } from '../support/app-harness.ts';
import { CountingStore } from '../support/counting-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { sseReader } from '../support/sse-reader.ts';
import { createClient, parseSse, TOKEN } from './http-suite.ts';

// A foreground turn (a POST .../turns answered when it ends, streamed or not, and a foreground
// response of the OpenAI facade) closed by another process while its model answers: a cancel,
// an `interrupt`, a delete of its session, each through a second app over the same store. Its
// next lease renewal (a third of TURN_LEASE_MS) finds the close, aborts the model call, and the
// client is answered as a cancelled turn is; a turn whose session was deleted writes nothing
// more into it. On the memory store and the file store. A close in the turn's own process stops
// it at once: test/http/local-close.test.ts.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '3000' };
const stores = await memoryAndFileStores('foreground-close');

const heldEcho = releasedAfterEach();

/**
 * A process on `store` (its writes counted) whose work after its responses is held in `tasks`,
 * and `closer`, a client of another process on the same store.
 */
function world(storeOf: () => ObjectStore) {
  const store = new CountingStore(storeOf());
  const slow = heldEcho();
  const { options, logs, infos, drain } = heldOptions(slow.model);
  const harness = appHarness(store, environment, options);
  const api = createClient(harness);
  // Another process over the same store, which the turn's process learns of only from storage.
  const closer = createClient(appHarness(store, environment, options));
  /**
   * The model call of turn `turn` of session `id` is running and its claim landed (the call
   * starts before the claim's put is answered: a close sent before it lands finds no such turn).
   */
  const calling = async (id: string, turn = 1) => {
    await expect.poll(() => slow.signals.length).toBe(1);
    await expect.poll(async () => (await api.get(`/v1/sessions/${id}/turns/${turn}`)).body.status).toBe('in_progress');
  };
  /** The model call was aborted (its turn's next renewal found the close). */
  const aborted = () => expect.poll(() => slow.signals[0]?.aborted, { timeout: 10_000 }).toBe(true);
  const post = (path: string, body: unknown) =>
    harness.fetch(path, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  /** The keys written (put or deleted) from here on: `written()` lists them. */
  const watch = () => {
    const from = store.putKeys.length;
    const deletes = store.counts.delete;
    return { written: () => store.putKeys.slice(from), deletes: () => store.counts.delete - deletes };
  };
  /**
   * Waits until a renewal of this process's turn would have written, then the work after
   * responses: a turn claimed from here on (of another process, on a store of its own, so none
   * of its writes is watched) has its lease renewed twice. Timers of one period fire in the
   * order they came due, so a renewal timer (or a journal batch's, of the same second) the
   * closed turn left running fires before that turn's first renewal: on the memory store its
   * writes are made by then, on the file store a whole renewal before the second.
   */
  const renewalLater = async () => {
    const other = new CountingStore(new MemoryStore());
    const otherSlow = heldEcho();
    const otherProcess = heldOptions(otherSlow.model);
    const otherApi = createClient(appHarness(other, environment, otherProcess.options));
    const otherId = await otherApi.session();
    const pending = otherApi.post(`/v1/sessions/${otherId}/turns`, { input: 'slow other' });
    const renewals = () => other.putKeys.filter((key) => key.endsWith('.lease')).length;
    await expect.poll(renewals, { timeout: 20_000, interval: 20 }).toBeGreaterThanOrEqual(2);
    otherSlow.release();
    expect((await pending).status).toBe(200);
    await otherProcess.drain();
    await drain();
  };
  return { store, api, closer, post, drain, calling, aborted, watch, renewalLater, logs, infos, signals: slow.signals };
}

/** The completions stored under the session (`.done` objects), one a closed turn. */
async function completions(store: ObjectStore, id: string) {
  const listed = await store.list(`sessions/${id}/`);
  return listed.objects.filter((object) => object.key.endsWith('.done')).length;
}

describe.each(stores)('a foreground turn closed by someone else: %s', (_, storeOf) => {
  it('a cancel aborts its model call and answers it 409 turn_cancelled; nothing more is written', async () => {
    const { closer, store, api, drain, calling, aborted, watch, renewalLater } = world(storeOf);
    const id = await api.session();
    const pending = api.post(`/v1/sessions/${id}/turns`, { input: 'slow one' });
    await calling(id);
    const cancelled = await closer.post(`/v1/sessions/${id}/turns/1/cancel`);
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    await aborted();
    const answered = await pending;
    expect(answered.status, JSON.stringify(answered.body)).toBe(409);
    expect(answered.body.error).toMatchObject({ code: 'turn_cancelled' });
    await drain();
    const after = watch();
    await renewalLater();
    expect(after.written()).toEqual([]);
    expect(after.deletes()).toBe(0);
    const turns = (await api.get(`/v1/sessions/${id}/turns`)).body.turns;
    expect(turns).toMatchObject([{ turn: 1, status: 'cancelled', error: { code: 'turn_cancelled' }, output: null }]);
    expect(await completions(store, id)).toBe(1);
    // Its input stays, with no answer; the session goes on at once.
    const next = await api.post(`/v1/sessions/${id}/turns`, { input: 'next' });
    expect(next.status, JSON.stringify(next.body)).toBe(200);
    const items = (await api.get(`/v1/sessions/${id}/items`)).body.items;
    expect(items.map((item: any) => item.content).reverse()).toEqual(['slow one', 'next', 'echo: next']);
  });

  it('a cancel while it compacts aborts the summary call: 409 turn_cancelled, nothing compacted', async () => {
    const { closer, store, api, calling, aborted, signals } = world(storeOf);
    const id = await api.session();
    for (const input of ['one', 'two', 'three'])
      expect((await api.post(`/v1/sessions/${id}/turns`, { input })).status).toBe(200);
    // Its window's trigger and kept share are a few tokens: it summarizes all but its input.
    const pending = api.post(`/v1/sessions/${id}/turns`, {
      input: 'four',
      strategies: ['compact'],
      strategy_config: { context_limit: 100_000, compact_trigger_ratio: 0.0001, compact_keep_ratio: 0.0001 },
    });
    await calling(id, 4);
    expect((await closer.post(`/v1/sessions/${id}/turns/4/cancel`)).status).toBe(200);
    await aborted();
    const answered = await pending;
    expect(answered.status, JSON.stringify(answered.body)).toBe(409);
    expect(answered.body.error).toMatchObject({ code: 'turn_cancelled' });
    expect((await api.get(`/v1/sessions/${id}/turns/4`)).body).toMatchObject({ status: 'cancelled', output: null });
    expect(await completions(store, id)).toBe(4);
    // No summary was stored, and the turn's own model call was never made.
    const listed = await store.list(`sessions/${id}/`);
    expect(listed.objects.filter((object) => object.key.includes('/context/'))).toEqual([]);
    expect(signals).toHaveLength(1);
  });

  it('a streamed turn cancelled ends with an error event turn_cancelled, journaled once', async () => {
    const { closer, api, post, drain, calling, aborted, watch, renewalLater, logs, infos } = world(storeOf);
    const id = await api.session();
    const response = await post(`/v1/sessions/${id}/turns`, { input: 'slow one', stream: true });
    expect(response.status).toBe(200);
    const reader = sseReader(response);
    await reader.until('event: output_text.delta');
    await calling(id);
    expect((await closer.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
    await aborted();
    const events = parseSse(await reader.rest());
    expect(events.map((event) => event.event)).toEqual(['turn.started', 'output_text.delta', 'error']);
    expect(events.at(-1)!.data.error).toMatchObject({ code: 'turn_cancelled' });
    await drain();
    const after = watch();
    await renewalLater();
    expect(after.written()).toEqual([]);
    // Its journal holds the same events, ended.
    const journaled = parseSse(await (await api.call('GET', `/v1/sessions/${id}/turns/1/events`)).body);
    expect(journaled.map((event) => event.event)).toEqual(['turn.started', 'output_text.delta', 'error']);
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({ status: 'cancelled', output: null });
    // A cancel is no failure of the server: one routine line, not 'streamed turn failed' with its stack.
    expect(logs.filter((line) => line.includes('streamed turn'))).toEqual([]);
    expect(infos.filter((line) => line.includes('streamed turn'))).toEqual([
      `tailgate: a streamed turn of session ${id} stopped: turn_cancelled`,
    ]);
  });

  it('an interrupt aborts its model call and answers it 409 turn_cancelled; the new turn runs', async () => {
    const { closer, store, api, calling, aborted } = world(storeOf);
    const id = await api.session();
    const pending = api.post(`/v1/sessions/${id}/turns`, { input: 'slow one' });
    await calling(id);
    const taken = await closer.post(`/v1/sessions/${id}/turns`, { input: 'now', on_busy: 'interrupt' });
    expect(taken.status, JSON.stringify(taken.body)).toBe(200);
    expect(taken.body).toMatchObject({ turn: 2, output: [{ content: 'echo: now' }] });
    await aborted();
    const answered = await pending;
    expect(answered.status, JSON.stringify(answered.body)).toBe(409);
    expect(answered.body.error).toMatchObject({ code: 'turn_cancelled' });
    const turns = (await api.get(`/v1/sessions/${id}/turns`)).body.turns;
    expect(turns.map((turn: any) => [turn.turn, turn.status])).toEqual([
      [2, 'completed'],
      [1, 'cancelled'],
    ]);
    expect(await completions(store, id)).toBe(2);
    const items = (await api.get(`/v1/sessions/${id}/items`)).body.items;
    expect(items.map((item: any) => item.content).reverse()).toEqual(['slow one', 'now', 'echo: now']);
  });

  it('a delete of its session aborts its model call, answers it 404 and writes nothing into the session', async () => {
    const { closer, api, drain, calling, aborted, watch, renewalLater, logs } = world(storeOf);
    const id = await api.session();
    const pending = api.post(`/v1/sessions/${id}/turns`, { input: 'slow one' });
    await calling(id);
    expect((await closer.delete(`/v1/sessions/${id}`)).status).toBe(204);
    const after = watch();
    await aborted();
    const answered = await pending;
    expect(answered.status, JSON.stringify(answered.body)).toBe(404);
    expect(answered.body.error).toMatchObject({ code: 'not_found' });
    await drain();
    await renewalLater();
    expect(after.written().filter((key) => key.includes(id))).toEqual([]);
    expect(logs.filter((line) => line.includes('lease'))).toEqual([]);
  });

  it('a streamed turn whose session is deleted ends with an error event not_found, journaling no more', async () => {
    const { closer, store, api, post, drain, calling, aborted, watch, renewalLater } = world(storeOf);
    const id = await api.session();
    const response = await post(`/v1/sessions/${id}/turns`, { input: 'slow one', stream: true });
    const reader = sseReader(response);
    await reader.until('event: output_text.delta');
    await calling(id);
    expect((await closer.delete(`/v1/sessions/${id}`)).status).toBe(204);
    const after = watch();
    await aborted();
    const events = parseSse(await reader.rest());
    expect(events.at(-1)).toMatchObject({ event: 'error', data: { error: { code: 'not_found' } } });
    await drain();
    await renewalLater();
    expect(after.written().filter((key) => key.includes(id))).toEqual([]);
    const left = await store.list(`sessions/${id}/`);
    expect(left.objects.filter((object) => object.key.includes('/events/'))).toEqual([]);
  });

  it('a foreground response of the facade cancelled natively is answered 409 turn_cancelled', async () => {
    const { closer, store, api, post, calling, aborted } = world(storeOf);
    const id = await api.session();
    const pending = post('/v1/responses', { model: 'echo', conversation: id, input: 'slow one' });
    await calling(id);
    expect((await closer.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
    await aborted();
    const answered = await pending;
    expect(answered.status).toBe(409);
    expect(((await answered.json()) as any).error).toMatchObject({ code: 'turn_cancelled' });
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({ status: 'cancelled' });
    expect(await completions(store, id)).toBe(1);
  });

  it('a streamed foreground response cancelled natively ends with response.failed, its status cancelled', async () => {
    const { closer, api, post, drain, calling, aborted } = world(storeOf);
    const id = await api.session();
    const response = await post('/v1/responses', { model: 'echo', conversation: id, input: 'slow one', stream: true });
    expect(response.status).toBe(200);
    const reader = sseReader(response);
    await reader.until('response.output_text.delta');
    await calling(id);
    expect((await closer.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
    await aborted();
    const events = parseSse(await reader.rest());
    const last = events.at(-1)!;
    expect(last.event).toBe('response.failed');
    expect(last.data.response).toMatchObject({
      status: 'cancelled',
      error: { code: 'turn_cancelled' },
      completed_at: expect.any(Number),
    });
    await drain();
    const retrieved = await api.get(`/v1/responses/${last.data.response.id}`);
    expect(retrieved.body).toMatchObject({
      status: 'cancelled',
      error: { code: 'turn_cancelled' },
      completed_at: last.data.response.completed_at,
    });
  });
});

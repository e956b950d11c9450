import { describe, expect, it } from 'vitest';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { approximateTokenCounter } from '../../lib/tokens/token-counter.ts';
import { SessionLog } from '../../lib/session/session-log.ts';
import { viewPolicy } from '../../lib/turn/view-policy.ts';
import { appHarness } from '../support/app-harness.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { sseReader } from '../support/sse-reader.ts';
import { createClient, parseSse, SIGNING_KEY, TOKEN } from './http-suite.ts';

// A turn closed by someone else (a cancel, an `interrupt`) stores what its aborted model call
// spent (`spent/<generation>/<turn>`, lib/session/log/unbilled.ts); its receipt (GET of the turn,
// the turn listing, the facade's response of it) shows that as its `usage`, `usage_estimated`
// when the provider reported none, and shows none while nothing readable is stored there. On the
// memory store and the file store.

const environment = { API_TOKEN: TOKEN, TOKEN_SIGNING_KEY: SIGNING_KEY, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '3000' };
/** No lease renewal asks whether the turn was closed while a test holds its model call. */
const slowRenewals = { ...environment, TURN_LEASE_MS: '60000' };
const stores = await memoryAndFileStores('stopped-receipt');
const heldEcho = releasedAfterEach();

function world(store: ObjectStore, env: Record<string, string> = environment) {
  const slow = heldEcho();
  const { options, drain } = heldOptions(slow.model);
  const harness = appHarness(store, env, options);
  const api = createClient(harness);
  // Another process over the same store: its close reaches the turn at its next renewal.
  const closer = createClient(appHarness(store, env, options));
  /**
   * The held model call is running, and with `id`, the claim of turn 1 of that session landed (the
   * call starts before the claim's put is answered: an interrupt sent before it lands finds no
   * turn to close and takes the turn's number itself).
   */
  const calling = async (id?: string) => {
    await expect.poll(() => slow.signals.length).toBe(1);
    if (id !== undefined)
      await expect.poll(async () => (await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('in_progress');
  };
  /** The key the stopped turn 1 of `id` stored its spend at. */
  const spentKey = async (id: string) => {
    const listed = await store.list(`sessions/${id}/spent/`, { limit: 10 });
    expect(listed.objects).toHaveLength(1);
    return listed.objects[0]!.key;
  };
  const spentBody = async (id: string) =>
    JSON.parse(new TextDecoder().decode((await store.get(await spentKey(id)))!.body));
  /** A streamed turn cancelled through the other process once its first delta came. */
  const cancelledStreamed = async (id: string) => {
    const response = await harness.fetch(`/v1/sessions/${id}/turns`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'slow one', stream: true }),
    });
    const reader = sseReader(response);
    await reader.until('event: output_text.delta');
    await calling();
    expect((await closer.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
    await expect.poll(() => slow.signals[0]?.aborted, { timeout: 10_000 }).toBe(true);
    const events = parseSse(await reader.rest());
    await drain();
    return events;
  };
  /**
   * A turn interrupted through the other process while its model call is held, which then
   * answers: the provider's usage, with the turn's own completion refused. The interrupting turn's answer.
   */
  const interruptedAnswered = async (id: string) => {
    const pending = api.post(`/v1/sessions/${id}/turns`, { input: 'slow one' });
    await calling(id);
    const taken = await closer.post(`/v1/sessions/${id}/turns`, { input: 'now', on_busy: 'interrupt' });
    expect(taken.status, JSON.stringify(taken.body)).toBe(200);
    slow.release();
    expect((await pending).status).toBe(409);
    await drain();
    return taken;
  };
  return { api, closer, harness, drain, calling, spentKey, spentBody, cancelledStreamed, interruptedAnswered };
}

describe.each(stores)("a stopped turn's receipt shows what it spent: %s", (_, storeOf) => {
  it('a cancelled streamed turn: its prompt and the output streamed, estimated, on its GET and listing', async () => {
    const { api, spentBody, cancelledStreamed } = world(storeOf());
    const id = await api.session();
    await cancelledStreamed(id);
    const stored = await spentBody(id);
    expect(stored.estimated).toBe(true);
    const turn = await api.get(`/v1/sessions/${id}/turns/1`);
    expect(turn.status, JSON.stringify(turn.body)).toBe(200);
    expect(turn.body).toMatchObject({ status: 'cancelled', usage: stored.usage, usage_estimated: true });
    expect(turn.body.usage).toMatchObject({
      input_tokens: approximateTokenCounter.count('slow one') + 4,
      output_tokens: approximateTokenCounter.count('thinking '),
      // The echo model's price: nothing.
      cost_usd: 0,
    });
    const listed = await api.get(`/v1/sessions/${id}/turns`);
    expect(listed.body.turns[0]).toMatchObject({ turn: 1, usage: stored.usage, usage_estimated: true });
  });

  it("a cancelled streamed turn: its receipt's error is its stream's error event's, naming the turn", async () => {
    const { api, cancelledStreamed } = world(storeOf());
    const id = await api.session();
    const events = await cancelledStreamed(id);
    const ended = events.at(-1)!;
    expect(ended).toMatchObject({ event: 'error', data: { error: { code: 'turn_cancelled' } } });
    const turn = await api.get(`/v1/sessions/${id}/turns/1`);
    expect(turn.body.error).toEqual(ended.data.error);
    expect(turn.body.error).toEqual({
      code: 'turn_cancelled',
      message: 'turn 1 was cancelled; its output was not stored',
      details: { session_id: id, turn: 1 },
    });
    const listed = await api.get(`/v1/sessions/${id}/turns`);
    expect(listed.body.turns[0].error).toEqual(turn.body.error);
  });

  it('an interrupted turn whose provider answered: the usage it reported, not marked estimated', async () => {
    const { api, spentBody, interruptedAnswered } = world(storeOf(), slowRenewals);
    const id = await api.session();
    const taken = await interruptedAnswered(id);
    const stored = await spentBody(id);
    expect(stored.estimated).toBe(false);
    const turn = await api.get(`/v1/sessions/${id}/turns/1`);
    expect(turn.body).toMatchObject({ status: 'cancelled', usage: stored.usage });
    expect(turn.body.error).toMatchObject({ details: { session_id: id, turn: 1, interrupted: true } });
    expect(turn.body.usage.output_tokens).toBeGreaterThan(0);
    expect(turn.body).not.toHaveProperty('usage_estimated');
    const listed = await api.get(`/v1/sessions/${id}/turns`);
    expect(listed.body.turns.map((row: any) => [row.turn, row.usage])).toEqual([
      [2, taken.body.usage],
      [1, stored.usage],
    ]);
    expect(listed.body.turns[1]).not.toHaveProperty('usage_estimated');
  });

  it('packed into a segment, and shared by a fork: the spend its own generation stored', async () => {
    const store = storeOf();
    const { api, spentBody, interruptedAnswered } = world(store, slowRenewals);
    const id = await api.session();
    await interruptedAnswered(id);
    const stored = await spentBody(id);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'third' })).status).toBe(200);
    const packed = await new SessionLog(store, { packMinRecords: 1, keepRecords: 1, viewPolicy }).pack(id);
    expect(packed).toMatchObject({ packed: true });
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body).toMatchObject({
      status: 'cancelled',
      usage: stored.usage,
    });
    const fork = await api.post(`/v1/sessions/${id}/fork`, { at_turn: 2 });
    expect(fork.status, JSON.stringify(fork.body)).toBe(201);
    const shared = await api.get(`/v1/sessions/${fork.body.id}/turns`);
    expect(shared.body.turns.map((row: any) => [row.turn, row.usage !== null])).toEqual([
      [2, true],
      [1, true],
    ]);
    expect(shared.body.turns[1].usage).toEqual(stored.usage);
  });

  it('no spend stored (its process still storing it, or dead): no usage', async () => {
    const store = storeOf();
    const { api, spentKey, cancelledStreamed } = world(store);
    const id = await api.session();
    await cancelledStreamed(id);
    await store.delete([await spentKey(id)]);
    const turn = await api.get(`/v1/sessions/${id}/turns/1`);
    expect(turn.status, JSON.stringify(turn.body)).toBe(200);
    expect(turn.body).toMatchObject({ status: 'cancelled', usage: null });
    expect(turn.body).not.toHaveProperty('usage_estimated');
    expect((await api.get(`/v1/sessions/${id}/turns`)).body.turns[0]).toMatchObject({ turn: 1, usage: null });
  });

  it.each([
    ['not JSON', '{"format":'],
    ['not a spend record', JSON.stringify({ format: 'tailgate.spent.v1', usage: { input_tokens: 'many' } })],
    ['empty (the chain stopped waiting for it)', ''],
  ])('a spend object %s: the receipt without usage, not a 500', async (_, body) => {
    const store = storeOf();
    const { api, spentKey, cancelledStreamed } = world(store);
    const id = await api.session();
    await cancelledStreamed(id);
    await store.put(await spentKey(id), body);
    const turn = await api.get(`/v1/sessions/${id}/turns/1`);
    expect(turn.status, JSON.stringify(turn.body)).toBe(200);
    expect(turn.body).toMatchObject({ status: 'cancelled', usage: null });
    expect(turn.body).not.toHaveProperty('usage_estimated');
    const listed = await api.get(`/v1/sessions/${id}/turns`);
    expect(listed.status).toBe(200);
    expect(listed.body.turns[0]).toMatchObject({ turn: 1, usage: null });
  });
});

describe.each(stores)("a stopped turn's response shows what it spent: %s", (_, storeOf) => {
  it('a streamed response whose turn was cancelled: retrieve shows its usage, estimated', async () => {
    const { api, closer, harness, drain, calling, spentBody } = world(storeOf());
    const id = await api.session();
    const response = await harness.fetch('/v1/responses', {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'echo', input: 'slow one', conversation: id, stream: true }),
    });
    const reader = sseReader(response);
    const created = parseSse(await reader.until('event: response.output_text.delta'))[0]!;
    await calling();
    expect((await closer.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
    const ended = parseSse(await reader.rest()).at(-1)!;
    expect(ended).toMatchObject({ event: 'response.failed', data: { response: { status: 'cancelled' } } });
    await drain();
    const stored = await spentBody(id);
    const retrieved = await api.get(`/v1/responses/${created.data.response.id}`);
    expect(retrieved.status, JSON.stringify(retrieved.body)).toBe(200);
    expect(retrieved.body).toMatchObject({
      status: 'cancelled',
      usage: {
        input_tokens: stored.usage.input_tokens,
        output_tokens: stored.usage.output_tokens,
        total_tokens: stored.usage.input_tokens + stored.usage.output_tokens,
      },
      tailgate: { cost_usd: 0, usage_estimated: true },
    });
    expect(stored.usage.output_tokens).toBe(approximateTokenCounter.count('thinking '));
  });

  it('a background response cancelled while it ran: retrieve shows its usage once its runner stored it', async () => {
    const { api, closer, calling, spentBody } = world(storeOf());
    const created = await api.post('/v1/responses', { model: 'echo', input: 'slow one', background: true });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    await calling();
    const cancelled = await closer.post(`/v1/responses/${created.body.id}/cancel`);
    expect(cancelled.body).toMatchObject({ status: 'cancelled' });
    const retrieve = async () => (await api.get(`/v1/responses/${created.body.id}`)).body;
    await expect.poll(async () => (await retrieve()).usage, { timeout: 10_000 }).not.toBeNull();
    const stored = await spentBody(created.body.tailgate.session_id);
    expect(await retrieve()).toMatchObject({
      status: 'cancelled',
      usage: { input_tokens: stored.usage.input_tokens, output_tokens: stored.usage.output_tokens },
      tailgate: { cost_usd: 0, usage_estimated: true },
    });
  });
});

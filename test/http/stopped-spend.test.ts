import { describe, expect, it } from 'vitest';
import type { Model } from '../../lib/models/model.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { approximateTokenCounter } from '../../lib/tokens/token-counter.ts';
import { appHarness } from '../support/app-harness.ts';
import { HeldStore } from '../support/held-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { sseReader } from '../support/sse-reader.ts';
import { createClient, SIGNING_KEY, TOKEN } from './http-suite.ts';

// A turn closed by someone else while its model answers (a cancel, an `interrupt`, from another
// process over the same store) spent what its provider bills for a call aborted midway: its
// input, and the output generated until then. The closer's completion knows nothing of it, so
// the stopped turn charges its token itself (lib/turn/close-turn.ts): the token's spend and
// budget count it, estimated (the prompt's tokens as counted, the output streamed) since the
// provider reported no usage. It stores what it spent (`spent/<generation>/<turn>`), and the
// session's next write (a turn's claim, before its budget check, or its completion; an append)
// adds it to the session's totals, once: its `usage` and `budget` count it as the token's spend
// does. On the memory store and the file store.

const environment = {
  API_TOKEN: TOKEN,
  TOKEN_SIGNING_KEY: SIGNING_KEY,
  DEFAULT_MODEL: 'echo',
  TURN_LEASE_MS: '3000',
};
/** A turn's tokens, as its answer's usage tells them. */
const tokensOf = (body: { usage: { input_tokens: number; output_tokens: number } }) =>
  body.usage.input_tokens + body.usage.output_tokens;
const stores = await memoryAndFileStores('stopped-spend');
const heldEcho = releasedAfterEach();

/**
 * The held model call of turn `turn` of session `id` is running, and the turn's claim landed: the
 * call starts before the claim's put is answered (lib/turn/pipeline.ts), and a close sent before
 * it lands finds no such turn (a cancel is answered 404, an interrupt takes the turn's number).
 */
async function claimedAndCalling(
  api: ReturnType<typeof createClient>,
  slow: { signals: AbortSignal[] },
  id: string,
  turn = 1,
) {
  await expect.poll(() => slow.signals.length).toBe(1);
  await expect.poll(async () => (await api.get(`/v1/sessions/${id}/turns/${turn}`)).body.status).toBe('in_progress');
}

function world(store: ObjectStore) {
  const slow = heldEcho();
  const { options, drain } = heldOptions(slow.model);
  const harness = appHarness(store, environment, options);
  const api = createClient(harness);
  const closer = createClient(appHarness(store, environment, options));
  /** The held model call of turn `turn` of session `id` is running and its claim landed (claimedAndCalling). */
  const calling = (id: string, turn = 1) => claimedAndCalling(api, slow, id, turn);
  const aborted = () => expect.poll(() => slow.signals[0]?.aborted, { timeout: 10_000 }).toBe(true);
  const mint = async (budget: Record<string, number>) => {
    const minted = await api.post('/v1/tokens', { scopes: ['session:turn', 'session:read'], budget });
    expect(minted.status, JSON.stringify(minted.body)).toBe(201);
    return { authorization: `Bearer ${minted.body.token as string}` };
  };
  /** A token of `max_total_tokens`, and a new session. */
  const budgeted = async (max_total_tokens = 1_000_000) => {
    const auth = await mint({ max_total_tokens });
    return { auth, id: await api.session() };
  };
  const spent = async (auth: Record<string, string>) => (await api.get('/v1/tokens/current', auth)).body.usage;
  const usage = async (id: string) => (await api.get(`/v1/sessions/${id}`)).body.usage;
  /** A streamed turn under `auth`, cancelled through the other app once its first delta came. */
  const cancelledStreamed = async (id: string, auth: Record<string, string>) => {
    const response = await harness.fetch(`/v1/sessions/${id}/turns`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'slow one', stream: true }),
    });
    const reader = sseReader(response);
    await reader.until('event: output_text.delta');
    await calling(id);
    const cancelled = await closer.post(`/v1/sessions/${id}/turns/1/cancel`);
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    await aborted();
    await reader.rest();
    await drain();
  };
  /** A turn under `auth` interrupted through the other app: that app's turn's answer. */
  const interrupted = async (id: string, auth?: Record<string, string>) => {
    const pending = api.post(`/v1/sessions/${id}/turns`, { input: 'slow one' }, auth);
    await calling(id);
    const taken = await closer.post(`/v1/sessions/${id}/turns`, { input: 'now', on_busy: 'interrupt' });
    expect(taken.status, JSON.stringify(taken.body)).toBe(200);
    await aborted();
    expect((await pending).status).toBe(409);
    await drain();
    return taken;
  };
  return { slow, api, closer, calling, aborted, drain, budgeted, spent, usage, cancelledStreamed, interrupted };
}

describe.each(stores)('a turn stopped by someone else charges what it spent: %s', (_, storeOf) => {
  it('a streamed turn cancelled: its prompt and the output streamed count in the token spend', async () => {
    const { budgeted, spent, cancelledStreamed } = world(storeOf());
    const { auth, id } = await budgeted();
    await cancelledStreamed(id, auth);
    const usage = await spent(auth);
    // Counted as no turn (none completed); the echo model costs nothing.
    expect(usage).toMatchObject({ turns: 0, output_tokens: approximateTokenCounter.count('thinking '), cost_usd: 0 });
    // Its prompt: the input message (its text and a fixed overhead), no tools.
    expect(usage.input_tokens).toBe(approximateTokenCounter.count('slow one') + 4);
  });

  it("a turn cancelled while its compaction's summary was made: the summary prompt counts, estimated", async () => {
    const { api, closer, calling, aborted, drain, budgeted, spent } = world(storeOf());
    const { auth, id } = await budgeted();
    for (const input of ['one', 'two', 'three'])
      expect((await api.post(`/v1/sessions/${id}/turns`, { input }, auth)).status).toBe(200);
    await drain();
    const before = await spent(auth);
    // A window whose trigger and kept share are a few tokens: the turn summarizes all but its input.
    const compacting = {
      input: 'four',
      strategies: ['compact'],
      strategy_config: { context_limit: 100_000, compact_trigger_ratio: 0.0001, compact_keep_ratio: 0.0001 },
    };
    const pending = api.post(`/v1/sessions/${id}/turns`, compacting, auth);
    await calling(id, 4);
    const cancelled = await closer.post(`/v1/sessions/${id}/turns/4/cancel`);
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    await aborted();
    expect((await pending).status).toBe(409);
    await drain();
    const after = await spent(auth);
    expect(after).toMatchObject({ turns: before.turns, output_tokens: before.output_tokens });
    expect(after.input_tokens).toBeGreaterThan(before.input_tokens);
  });

  it('a cancel sent as the model call started, before the claim landed, finds no turn: tests wait for it', async () => {
    const store = new HeldStore(storeOf());
    const { slow, api, closer, calling, aborted, drain } = world(store);
    const id = await api.session();
    // Turn 1's record (its claim, create-only) is put only once the cancel below was answered.
    const claim = store.hold(
      ({ operation, keys, options }) =>
        operation === 'put' && options?.onlyIfAbsent === true && /\/turn\/.+\/\d{12}$/.test(keys[0]!),
    );
    const pending = api.post(`/v1/sessions/${id}/turns`, { input: 'slow one' });
    await claim.reached;
    await expect.poll(() => slow.signals.length).toBe(1);
    const early = await closer.post(`/v1/sessions/${id}/turns/1/cancel`);
    expect(early.status, JSON.stringify(early.body)).toBe(404);
    claim.release();
    await calling(id);
    const cancelled = await closer.post(`/v1/sessions/${id}/turns/1/cancel`);
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    await aborted();
    expect((await pending).status).toBe(409);
    await drain();
  });

  it("a cancelled streamed turn: the session listing's row counts what it spent once it was stored", async () => {
    const { api, budgeted, usage, cancelledStreamed } = world(storeOf());
    const { auth, id } = await budgeted();
    // Drained: its spend was stored after the cancel closed the turn, and the row refreshed after it.
    await cancelledStreamed(id, auth);
    const totals = await usage(id);
    expect(totals.total_tokens).toBeGreaterThan(0);
    const listing = (await api.get('/v1/sessions')).body;
    expect(listing.sessions).toHaveLength(1);
    expect(listing.sessions[0]).toMatchObject({ id, usage: totals });
  });

  it("interrupted turns count in the token's budget: the next turn is refused once it is spent", async () => {
    const { api, budgeted, spent, interrupted } = world(storeOf());
    const { auth, id } = await budgeted(5);
    await interrupted(id, auth);
    // Not streamed: nothing of its output was seen, its prompt is what it spent.
    expect(await spent(auth)).toMatchObject({ turns: 0, input_tokens: 6, output_tokens: 0, total_tokens: 6 });
    const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'go on' }, auth);
    expect(refused.status, JSON.stringify(refused.body)).toBe(402);
    expect(refused.body.error).toMatchObject({
      code: 'budget_exhausted',
      details: { budget: 'token', limit: 'max_total_tokens' },
    });
  });

  it('a cancelled streamed turn: the next turn counts what it spent, once', async () => {
    const { api, drain, budgeted, usage, spent, cancelledStreamed } = world(storeOf());
    const { auth, id } = await budgeted();
    await cancelledStreamed(id, auth);
    const stopped = await spent(auth);
    expect(stopped.total_tokens).toBeGreaterThan(0);
    const next = await api.post(`/v1/sessions/${id}/turns`, { input: 'go on' }, auth);
    expect(next.status, JSON.stringify(next.body)).toBe(200);
    await drain();
    // The session's totals and the token's spend count the same: the stopped call and the turn.
    const totals = await usage(id);
    expect(totals).toEqual(await spent(auth));
    expect(totals.turns).toBe(1);
    expect(totals.total_tokens).toBe(stopped.total_tokens + tokensOf(next.body));
    // Counted once: later writes add only their own.
    expect(
      (await api.post(`/v1/sessions/${id}/items`, { items: [{ type: 'message', role: 'user', content: 'x' }] })).status,
    ).toBe(201);
    const third = await api.post(`/v1/sessions/${id}/turns`, { input: 'again' }, auth);
    await drain();
    expect((await usage(id)).total_tokens).toBe(totals.total_tokens + tokensOf(third.body));
  });

  it("interrupted turns count in the session's budget: a turn is refused once they spent it", async () => {
    const { api, usage, interrupted } = world(storeOf());
    const id = await api.session();
    const taken = await interrupted(id);
    // An append is a write of the session: the stopped turn's spend (its prompt) counts there.
    expect(
      (await api.post(`/v1/sessions/${id}/items`, { items: [{ type: 'message', role: 'user', content: 'x' }] })).status,
    ).toBe(201);
    const totals = await usage(id);
    expect(totals.input_tokens).toBe(6 + taken.body.usage.input_tokens);
    expect(totals.turns).toBe(1);
    // A budget the completed turn alone leaves room in: the stopped turn's spend exhausts it.
    const limit = totals.total_tokens;
    expect(tokensOf(taken.body)).toBeLessThan(limit);
    expect((await api.patch(`/v1/sessions/${id}`, { budget: { max_total_tokens: limit } })).status).toBe(200);
    const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'go on' });
    expect(refused.status, JSON.stringify(refused.body)).toBe(402);
    expect(refused.body.error).toMatchObject({ code: 'budget_exhausted', details: { budget: 'session' } });
  });

  it('a turn that fails as someone else closes it stores its spend all the same: no more waiting', async () => {
    const store = storeOf();
    const slow = heldEcho();
    // Its provider fails once the held call is released: the turn closes itself as failed.
    const failing: Model = {
      ...slow.model,
      async generate(request) {
        await slow.model.generate(request);
        throw new Error('the provider failed');
      },
      async *stream(request) {
        for await (const event of slow.model.stream(request)) {
          if (event.type !== 'text_delta') throw new Error('the provider failed');
          yield event;
        }
      },
    };
    const { options, drain } = heldOptions(failing);
    // A lease long enough that no renewal asks whether the turn was closed before it fails.
    const slowRenewals = { ...environment, TURN_LEASE_MS: '60000' };
    const api = createClient(appHarness(store, slowRenewals, options));
    const closer = createClient(appHarness(store, slowRenewals, options));
    const id = await api.session();
    const pending = api.post(`/v1/sessions/${id}/turns`, { input: 'slow one' });
    await claimedAndCalling(api, slow, id);
    const cancelled = await closer.post(`/v1/sessions/${id}/turns/1/cancel`);
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    slow.release();
    // Its own failed completion is refused: the cancel closed it.
    expect((await pending).status).toBe(409);
    await drain();
    // What its failed completion would have counted (no summary: nothing) is stored, so the
    // session's next write reads it and stops waiting, rather than for two leases.
    const stored = await store.list(`sessions/${id}/spent/`, { limit: 10 });
    expect(stored.objects).toHaveLength(1);
    const body = JSON.parse(new TextDecoder().decode((await store.get(stored.objects[0]!.key))!.body));
    expect(body).toEqual({ format: 'tailgate.spent.v1' });
  });
});

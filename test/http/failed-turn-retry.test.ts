import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { appHarness } from '../support/app-harness.ts';
import { settled } from './background-suite.ts';
import { createClient, freshId, parseSse, SIGNING_KEY, TOKEN } from './http-suite.ts';

// Taking a failed turn again (docs/DEPLOY.md, "Retries, crashes and stuck turns"): a provider
// that fails each session's first call (a `hang-` marker's first call never answers: a cancel
// ends it), then answers. The failed turn's input stays in the history, so the model must get
// the user's message once, not once per attempt: an empty input takes the failed turn again.
let provider: FakeProvider;
let api: ReturnType<typeof createClient>;
const failedOnce = new Set<string>();

beforeAll(async () => {
  provider = await startFakeProvider((request) => {
    const text = JSON.stringify(request.body);
    const marker = /(attempt|hang)-[a-z0-9-]+/.exec(text)?.[0] ?? '';
    if (!failedOnce.has(marker)) {
      failedOnce.add(marker);
      if (marker.startsWith('hang-')) return { hang: true };
      return { status: 500, json: { error: { message: 'upstream exploded', type: 'server_error' } } };
    }
    if (request.body?.stream) return { sse: fixture('openai-chat-text.sse') };
    return { json: JSON.parse(fixture('openai-chat-text.json')) };
  });
  const environment = {
    API_TOKEN: TOKEN,
    TOKEN_SIGNING_KEY: SIGNING_KEY,
    OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
    MODEL_MAX_RETRIES: '0',
    // A cancelled background turn's runner aborts its call at its next renewal.
    TURN_LEASE_MS: '3000',
  };
  api = createClient(appHarness(new MemoryStore(), environment));
});

afterAll(async () => {
  await provider?.close();
});

/** How many times the last call to the provider carried `text` as a user message. */
function userMessagesOfLastCall(text: string): number {
  const messages: { role: string; content: unknown }[] = provider.requests.at(-1)!.body.messages;
  return messages.filter((message) => message.role === 'user' && JSON.stringify(message.content).includes(text)).length;
}

/** A session whose first turn failed (502): its input stays, marked failed. */
async function failedFirstTurn(): Promise<{ id: string; text: string }> {
  const text = freshId('attempt');
  const id = await api.session({ model: 'openai-compatible:fake' });
  const failed = await api.post(`/v1/sessions/${id}/turns`, { input: text }, { 'idempotency-key': freshId('k') });
  expect(failed.status).toBe(502);
  expect((await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('failed');
  return { id, text };
}

/** The session's items, oldest first, as [role, content]. */
async function itemsOf(id: string): Promise<[string, unknown][]> {
  const items = (await api.get(`/v1/sessions/${id}/items`)).body.items;
  return items.reverse().map((item: any) => [item.role, item.content]);
}

/** The fake provider's answer (its JSON and its streamed fixture word it apart). */
const ANSWER = expect.stringMatching(/^Hello! How can I .* today\?$/);

describe('taking a failed turn again', () => {
  it('the same input under a new key reaches the model twice: the failed turn kept it', async () => {
    const { id, text } = await failedFirstTurn();
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: text }, { 'idempotency-key': freshId('k') });
    expect(again.status).toBe(200);
    expect(userMessagesOfLastCall(text)).toBe(2);
  });

  it('a delete of the failed newest turn, then the input under a new key: the model gets it once', async () => {
    const { id, text } = await failedFirstTurn();
    const deleted = await api.delete(`/v1/sessions/${id}/turns/1`);
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(200);
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: text }, { 'idempotency-key': freshId('k') });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body.turn).toBe(1);
    expect(userMessagesOfLastCall(text)).toBe(1);
    const items = (await api.get(`/v1/sessions/${id}/items`)).body.items;
    expect(items.filter((item: any) => item.role === 'user').map((item: any) => item.content)).toEqual([text]);
  });

  it('a session:turn token sends an empty input under a new key: the model answers the message once', async () => {
    const { id, text } = await failedFirstTurn();
    const minted = await api.post('/v1/tokens', { scopes: ['session:turn'], session_id: id });
    expect(minted.status, JSON.stringify(minted.body)).toBe(201);
    const bearer = { authorization: `Bearer ${minted.body.token}` };
    const key = { ...bearer, 'idempotency-key': freshId('k') };
    const calls = provider.requests.length;
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: [] }, key);
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body).toMatchObject({ turn: 2, output: [{ role: 'assistant', content: ANSWER, seq: 2 }] });
    expect(provider.requests.length).toBe(calls + 1);
    expect(userMessagesOfLastCall(text)).toBe(1);
    // The turn stored its answer only, right after the message it answers.
    expect(await itemsOf(id)).toEqual([
      ['user', text],
      ['assistant', ANSWER],
    ]);
    const receipt = (await api.get(`/v1/sessions/${id}/turns/2`)).body;
    expect(receipt).toMatchObject({ status: 'completed', input: null, output: { first_seq: 2, last_seq: 2 } });
    expect((await api.get(`/v1/sessions/${id}`)).body.counts).toMatchObject({ items: 2, turns: 2 });
    // Its key replays it as any turn's, without a model call.
    const replayed = await api.post(`/v1/sessions/${id}/turns`, { input: [] }, key);
    expect(replayed.status, JSON.stringify(replayed.body)).toBe(200);
    expect(replayed.body).toEqual(again.body);
    expect(provider.requests.length).toBe(calls + 1);
  });

  it('an empty input is 400 naming input when the newest turn completed or there is none: nothing stored', async () => {
    const fresh = await api.session({ model: 'openai-compatible:fake' });
    const none = await api.post(`/v1/sessions/${fresh}/turns`, { input: [] });
    expect(none.status, JSON.stringify(none.body)).toBe(400);
    expect(none.body.error).toMatchObject({ code: 'invalid_request', details: { field: 'input' } });
    expect(none.body.error.message).toContain('no turn yet');
    const { id } = await failedFirstTurn();
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: [] })).status).toBe(200);
    const calls = provider.requests.length;
    for (const body of [{ input: [] }, { input: [], background: true }, { input: [], stream: true }]) {
      const answered = await api.post(`/v1/sessions/${id}/turns`, body);
      expect(answered.status, JSON.stringify(answered.body)).toBe(400);
      expect(answered.body.error).toMatchObject({ code: 'invalid_request', details: { field: 'input' } });
      expect(answered.body.error.message).toContain('turn 2 completed');
    }
    expect(provider.requests.length).toBe(calls);
    expect((await api.get(`/v1/sessions/${id}`)).body.counts).toMatchObject({ items: 2, turns: 2 });
  });

  it('an empty input streamed, or in the background, takes the failed turn again', async () => {
    const streamed = await failedFirstTurn();
    const events = await api.post(`/v1/sessions/${streamed.id}/turns`, { input: [], stream: true });
    expect(events.status).toBe(200);
    const frames = parseSse(events.body);
    expect(frames[0]).toMatchObject({ event: 'turn.started', data: { turn: 2, first_seq: 2 } });
    expect(frames.at(-1)?.event).toBe('turn.completed');
    expect(userMessagesOfLastCall(streamed.text)).toBe(1);
    expect(await itemsOf(streamed.id)).toEqual([
      ['user', streamed.text],
      ['assistant', ANSWER],
    ]);

    const background = await failedFirstTurn();
    const queued = await api.post(`/v1/sessions/${background.id}/turns`, { input: [], background: true });
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    expect(queued.body).toEqual({ session_id: background.id, turn: 2, status: 'queued' });
    expect(await settled(api, background.id, 2)).toMatchObject({ status: 'completed', input: null });
    expect(userMessagesOfLastCall(background.text)).toBe(1);
    expect(await itemsOf(background.id)).toEqual([
      ['user', background.text],
      ['assistant', ANSWER],
    ]);
  });

  /** A session whose background turn 1 runs, its model call hanging. */
  async function runningTurn(): Promise<{ id: string; text: string }> {
    const text = freshId('hang');
    const id = await api.session({ model: 'openai-compatible:fake' });
    const running = await api.post(`/v1/sessions/${id}/turns`, { input: text, background: true });
    expect(running.status, JSON.stringify(running.body)).toBe(202);
    for (
      let polls = 0;
      polls < 600 && !provider.requests.some((request) => JSON.stringify(request.body).includes(text));
      polls++
    )
      await new Promise((resolve) => setTimeout(resolve, 20));
    return { id, text };
  }

  it('a cancelled background turn, then an empty input: the model gets the message once', async () => {
    const { id, text } = await runningTurn();
    // While it runs, an empty input is not queued: the turn it would take again has not failed.
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: [], on_busy: 'enqueue' });
    expect(queued.status, JSON.stringify(queued.body)).toBe(409);
    expect(queued.body.error.code).toBe('turn_in_progress');
    expect((await api.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('cancelled');
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: [] }, { 'idempotency-key': freshId('k') });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body.turn).toBe(2);
    expect(userMessagesOfLastCall(text)).toBe(1);
    expect(await itemsOf(id)).toEqual([
      ['user', text],
      ['assistant', ANSWER],
    ]);
  });

  it('an empty input under on_busy interrupt cancels the running turn and takes it again', async () => {
    const { id, text } = await runningTurn();
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: [], on_busy: 'interrupt' });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body.turn).toBe(2);
    expect((await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('cancelled');
    expect(userMessagesOfLastCall(text)).toBe(1);
    expect(await itemsOf(id)).toEqual([
      ['user', text],
      ['assistant', ANSWER],
    ]);
  });
});

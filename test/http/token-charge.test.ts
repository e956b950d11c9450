import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { type ApiResult, createClient, SIGNING_KEY, TOKEN } from './http-suite.ts';
import { answeredHarness, SlowSpendStore } from './slow-spend.ts';

// A token's charge lands before its answer (docs/SECURITY.md, "Token budgets"): a client that
// waits for each answer never passes its token's limit, however slowly the charge is stored.
const environment = {
  API_TOKEN: TOKEN,
  TOKEN_SIGNING_KEY: SIGNING_KEY,
  ALLOW_ANONYMOUS: 'false',
  DEFAULT_MODEL: 'echo',
};

describe('a budgeted token whose requests are sent one after another', () => {
  const store = new SlowSpendStore();
  const harness = appHarness(store, environment);
  const api = createClient(answeredHarness(harness));

  /** Sends `request` as a client that waits for its answer before it sends another. */
  const answered = (request: () => Promise<ApiResult>) => request();

  async function mint(budget: Record<string, number>): Promise<Record<string, string>> {
    const minted = await api.post('/v1/tokens', { scopes: ['session:turn'], budget });
    expect(minted.status, JSON.stringify(minted.body)).toBe(201);
    return { authorization: `Bearer ${minted.body.token}` };
  }

  const sends = {
    turn: (id: string, bearer: Record<string, string>) => () =>
      api.post(`/v1/sessions/${id}/turns`, { input: 'hi' }, bearer),
    streamed: (id: string, bearer: Record<string, string>) => () =>
      api.post(`/v1/sessions/${id}/turns`, { input: 'hi', stream: true }, bearer),
    chat: (_: string, bearer: Record<string, string>) => () =>
      api.post('/v1/chat/completions', { model: 'echo', messages: [{ role: 'user', content: 'hi' }] }, bearer),
    response: (_: string, bearer: Record<string, string>) => () =>
      api.post('/v1/responses', { model: 'echo', input: 'hi', store: false }, bearer),
  };

  for (const [name, send] of Object.entries(sends))
    for (const budget of [{ max_turns: 1 }, { max_total_tokens: 1 }])
      it(`takes one ${name} of ${JSON.stringify(budget)}, the next refused`, async () => {
        const bearer = await mint(budget);
        const id = await api.session();
        const statuses = [];
        for (let n = 0; n < 3; n++) statuses.push((await answered(send(id, bearer))).status);
        expect(statuses).toEqual([200, 402, 402]);
        store.release();
      });

  it('takes one compaction of a token with max_total_tokens, the next refused', async () => {
    const bearer = await mint({ max_total_tokens: 1 });
    const id = await api.session();
    for (const input of ['one', 'two'])
      expect((await api.post(`/v1/sessions/${id}/turns`, { input })).status).toBe(200);
    const compact = () => api.post(`/v1/sessions/${id}/compact`, { keep_tokens: 0 }, bearer);
    const inline = () => api.post('/v1/responses/compact', { model: 'echo', input: 'hello there' }, bearer);
    expect((await answered(compact)).status).toBe(200);
    expect((await answered(inline)).status).toBe(402);
    const other = await mint({ max_total_tokens: 1 });
    expect(
      (await answered(() => api.post('/v1/responses/compact', { model: 'echo', input: 'hi' }, other))).status,
    ).toBe(200);
    const again = () => api.post(`/v1/sessions/${id}/compact`, { keep_tokens: 0 }, other);
    expect((await answered(again)).status).toBe(402);
    store.release();
  });
});

describe("a token's charge that fails to be stored", () => {
  const store = new FaultyStore(new MemoryStore());
  const harness = appHarness(store, environment);
  const api = createClient(harness);

  it('is logged, and the turn or run it charged is answered', async () => {
    const minted = await api.post('/v1/tokens', { scopes: ['session:turn'], budget: { max_turns: 5 } });
    const bearer = { authorization: `Bearer ${minted.body.token}` };
    const id = await api.session();
    store.failWhen(({ operation, key }) => operation === 'put' && key.includes('token-spend/'));
    const turn = await api.post(`/v1/sessions/${id}/turns`, { input: 'hi' }, bearer);
    expect(turn.status, JSON.stringify(turn.body)).toBe(200);
    const chat = await api.post(
      '/v1/chat/completions',
      { model: 'echo', messages: [{ role: 'user', content: 'hi' }] },
      bearer,
    );
    expect(chat.status, JSON.stringify(chat.body)).toBe(200);
    const charges = harness.logged.filter((line) => line.includes('could not charge'));
    expect(charges).toHaveLength(2);
    store.heal();
  });
});

describe("a budgeted token's background turn", () => {
  const api = createClient(appHarness(new MemoryStore(), environment));

  it('is charged before its events end: a client that read them to their end is refused the next', async () => {
    const minted = await api.post('/v1/tokens', { scopes: ['session:turn', 'session:read'], budget: { max_turns: 1 } });
    const bearer = { authorization: `Bearer ${minted.body.token}` };
    const id = await api.session();
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'later', background: true }, bearer);
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    const events = await api.get(`/v1/sessions/${id}/turns/${queued.body.turn}/events`, bearer);
    expect(events.body).toContain('event: turn.completed');
    expect((await api.get('/v1/tokens/current', bearer)).body.usage.turns).toBe(1);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'next' }, bearer)).status).toBe(402);
  });
});

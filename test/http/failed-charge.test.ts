import { afterEach, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { failingEcho } from '../support/failing-echo.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { releasedAfterEach } from '../support/slow-echo.ts';
import { createClient, SIGNING_KEY, TOKEN } from './http-suite.ts';
import { answeredHarness, SlowSpendStore } from './slow-spend.ts';

// What a failed request spent (its provider billed the call all the same: lib/turn/close-turn.ts)
// is charged before its error answer, as a completed turn's before its answer (docs/SECURITY.md,
// "Token budgets"): a client that sends its next request once the error came stops at its limit,
// however slowly the charge is stored (SlowSpendStore holds a charge made after the answer).
const environment = { API_TOKEN: TOKEN, TOKEN_SIGNING_KEY: SIGNING_KEY, DEFAULT_MODEL: 'echo' };

/** The echo model, but `times out` times out and `breaks` fails (test/support/failing-echo.ts). */
const { model: failing, summaries } = failingEcho();

afterEach(() => {
  summaries.timeOut = false;
});

describe('a failed request of a token with max_total_tokens 1, the next sent once its error came', () => {
  const store = new SlowSpendStore();
  const api = createClient(answeredHarness(appHarness(store, environment, { wrapModel: () => failing })));
  afterEach(() => store.release());

  async function mint(): Promise<Record<string, string>> {
    const budget = { max_total_tokens: 1 };
    const minted = await api.post('/v1/tokens', { scopes: ['session:turn', 'session:read'], budget });
    expect(minted.status, JSON.stringify(minted.body)).toBe(201);
    return { authorization: `Bearer ${minted.body.token}` };
  }

  it('a turn that timed out: the next turn is refused', async () => {
    const bearer = await mint();
    const id = await api.session();
    const failed = await api.post(`/v1/sessions/${id}/turns`, { input: 'it times out' }, bearer);
    expect(failed.status, JSON.stringify(failed.body)).toBe(504);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'next' }, bearer)).status).toBe(402);
  });

  it('a streamed turn broken off after output: the next turn is refused', async () => {
    const bearer = await mint();
    const id = await api.session();
    const failed = await api.post(`/v1/sessions/${id}/turns`, { input: 'it breaks', stream: true }, bearer);
    expect(failed.body).toContain('event: error');
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'next' }, bearer)).status).toBe(402);
  });

  it('a store: false response that timed out: the next is refused', async () => {
    const bearer = await mint();
    const response = (input: string) => api.post('/v1/responses', { model: 'echo', input, store: false }, bearer);
    const failed = await response('it times out');
    expect(failed.status, JSON.stringify(failed.body)).toBe(504);
    expect((await response('next')).status).toBe(402);
  });

  it("a session's compaction whose summary timed out: the next compaction is refused", async () => {
    const bearer = await mint();
    const id = await api.session();
    for (const input of ['one', 'two'])
      expect((await api.post(`/v1/sessions/${id}/turns`, { input })).status).toBe(200);
    summaries.timeOut = true;
    const compact = () => api.post(`/v1/sessions/${id}/compact`, { keep_tokens: 0 }, bearer);
    const failed = await compact();
    expect(failed.status, JSON.stringify(failed.body)).toBe(504);
    expect((await compact()).status).toBe(402);
  });

  it('an inline compaction whose summary timed out: the next is refused', async () => {
    const bearer = await mint();
    summaries.timeOut = true;
    const compact = () => api.post('/v1/responses/compact', { model: 'echo', input: 'a long story' }, bearer);
    const failed = await compact();
    expect(failed.status, JSON.stringify(failed.body)).toBe(504);
    expect((await compact()).status).toBe(402);
  });
});

describe('a turn of a token with max_total_tokens 1 cancelled while its model answered', () => {
  const heldEcho = releasedAfterEach();

  it('charges what it spent before its own answer: the next turn sent once it came is refused', async () => {
    const slow = heldEcho();
    const store = new SlowSpendStore();
    const options = { wrapModel: () => slow.model };
    // A close in another process stops the turn once its lease renewal finds it.
    const leased = { ...environment, TURN_LEASE_MS: '3000' };
    const api = createClient(answeredHarness(appHarness(store, leased, options)));
    const closer = createClient(appHarness(store, leased, options));
    const minted = await api.post('/v1/tokens', { scopes: ['session:turn'], budget: { max_total_tokens: 1 } });
    const bearer = { authorization: `Bearer ${minted.body.token}` };
    const id = await api.session();
    const pending = api.post(`/v1/sessions/${id}/turns`, { input: 'slow one' }, bearer);
    // Its call is held and its claim landed (a cancel before finds no turn).
    await expect.poll(() => slow.signals.length).toBe(1);
    await expect.poll(async () => (await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('in_progress');
    expect((await closer.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
    expect((await pending).status).toBe(409);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'next' }, bearer)).status).toBe(402);
    store.release();
  });
});

describe('the charge of a failed request that fails to be stored', () => {
  const store = new FaultyStore(new MemoryStore());
  const harness = appHarness(store, environment, { wrapModel: () => failing });
  const api = createClient(harness);

  it('is logged, and the request is answered its own error', async () => {
    const minted = await api.post('/v1/tokens', { scopes: ['session:turn'], budget: { max_total_tokens: 1 } });
    const bearer = { authorization: `Bearer ${minted.body.token}` };
    const id = await api.session();
    store.failWhen(({ operation, key }) => operation === 'put' && key.includes('token-spend/'));
    const turn = await api.post(`/v1/sessions/${id}/turns`, { input: 'it times out' }, bearer);
    expect(turn.status, JSON.stringify(turn.body)).toBe(504);
    const response = await api.post('/v1/responses', { model: 'echo', input: 'it times out', store: false }, bearer);
    expect(response.status, JSON.stringify(response.body)).toBe(504);
    expect(harness.logged.filter((line) => line.includes('could not charge'))).toHaveLength(2);
    store.heal();
  });
});

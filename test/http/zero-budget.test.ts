import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { queuedRuns } from '../support/queued-runs.ts';
import { createClient, TOKEN } from './http-suite.ts';

// A session `budget` limit of 0 (docs/API.md, "Sessions") is an operator's stop: taken on a
// create and a PATCH, and the next turn is refused 402 `budget_exhausted` as a spent budget's
// is, the inputs queued behind the session waiting until the budget is raised.

/** The app on a memory store whose background turns wait until `runAll` runs them. */
function world(settings: Record<string, string> = {}) {
  const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', ...settings };
  const store = new MemoryStore();
  const { options, runAll } = queuedRuns(
    { store: () => store, readEnvironment: (c) => c.env ?? environment },
    environment,
  );
  return { api: createClient(appHarness(store, environment, options)), runAll };
}

describe('a budget limit of 0', () => {
  it.each([
    ['max_turns', 1],
    ['max_total_tokens', 1],
    ['max_cost_usd', 0],
  ] as const)('%s: 0 is taken by a PATCH, and the next turn is refused 402', async (limit, spentAfterOne) => {
    const { api } = world();
    const id = await api.session();
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'x' })).status).toBe(200);
    const patched = await api.patch(`/v1/sessions/${id}`, { budget: { [limit]: 0 } });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body.budget).toEqual({ [limit]: 0 });
    const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'y' });
    expect(refused.status, JSON.stringify(refused.body)).toBe(402);
    expect(refused.body.error.code).toBe('budget_exhausted');
    expect(refused.body.error.details).toMatchObject({ budget: 'session', limit, value: 0 });
    if (limit !== 'max_total_tokens') expect(refused.body.error.details.spent).toBe(spentAfterOne);
    expect((await api.get(`/v1/sessions/${id}`)).body.counts.turns).toBe(1);
    // The preview shows the prompt (200) and names that refusal; null once the budget is lifted.
    const preview = await api.get(`/v1/sessions/${id}/prompt`);
    expect(preview.status, JSON.stringify(preview.body)).toBe(200);
    expect(preview.body.items.length).toBeGreaterThan(0);
    expect(preview.body.refused).toEqual({ status: refused.status, ...refused.body.error });
    expect((await api.patch(`/v1/sessions/${id}`, { budget: null })).status).toBe(200);
    expect((await api.get(`/v1/sessions/${id}/prompt`)).body.refused).toBeNull();
  });

  it('is taken on a create: the first turn is refused', async () => {
    const { api } = world();
    const id = await api.session({ budget: { max_turns: 0 } });
    const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'x' });
    expect(refused.status).toBe(402);
    expect(refused.body.error.details).toEqual({ budget: 'session', limit: 'max_turns', spent: 0, value: 0 });
    // The message says what lifts the refusal.
    expect(refused.body.error.message).toBe(
      "the session's budget is spent: max_turns is 0, spent 0; a PATCH of the session's budget raises it",
    );
  });

  it('holds a queued input until the budget is raised', async () => {
    const { api, runAll } = world();
    const id = await api.session({ on_busy: 'enqueue' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'holder', background: true })).status).toBe(202);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'queued' })).status).toBe(202);
    expect((await api.patch(`/v1/sessions/${id}`, { budget: { max_turns: 0 } })).status).toBe(200);
    await runAll();
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(1);
    expect((await api.get(`/v1/sessions/${id}`)).body.counts.turns).toBe(1);
    expect((await api.patch(`/v1/sessions/${id}`, { budget: null })).status).toBe(200);
    await runAll();
    expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(0);
    expect((await api.get(`/v1/sessions/${id}`)).body.counts.turns).toBe(2);
  });
});

// A token minted with a 0 limit (docs/API.md, "Tokens") calls no model: its first turn is
// refused 402 with `budget: "token"`; what calls none (reading the session, its spend) it does.
describe('a token budget limit of 0', () => {
  it.each([
    ['max_turns', 0],
    ['max_total_tokens', 0],
    ['max_cost_usd', 0],
  ] as const)('%s: the token is minted, and its first turn refused 402', async (limit, spent) => {
    const { api } = world({ TOKEN_SIGNING_KEY: 'BrZfSyf8sJb29DyhJhnf4tWjPRctEZf4ZNwQaSOaQUg=' });
    const minted = await api.post('/v1/tokens', {
      scopes: ['session:read', 'session:turn'],
      budget: { [limit]: 0 },
    });
    expect(minted.status, JSON.stringify(minted.body)).toBe(201);
    const bearer = { authorization: `Bearer ${minted.body.token}` };
    const id = await api.session();
    const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'x' }, bearer);
    expect(refused.status, JSON.stringify(refused.body)).toBe(402);
    expect(refused.body.error.details).toEqual({ budget: 'token', limit, spent, value: 0 });
    const stateless = await api.post(
      '/v1/chat/completions',
      { model: 'echo', messages: [{ role: 'user', content: 'x' }] },
      bearer,
    );
    expect(stateless.status, JSON.stringify(stateless.body)).toBe(402);
    const current = await api.get('/v1/tokens/current', bearer);
    expect(current.body.remaining).toEqual({ [limit]: 0 });
    expect((await api.get(`/v1/sessions/${id}`, bearer)).status).toBe(200);
  });
});

// DEFAULT_SESSION_BUDGET with a 0 limit (docs/CONFIGURATION.md): a session created without a
// budget of its own takes no turn until a PATCH sets one.
describe('a default session budget limit of 0', () => {
  it('refuses the turns of a session created without a budget until a PATCH sets one', async () => {
    const { api } = world({ DEFAULT_SESSION_BUDGET: '{"max_turns": 0}' });
    const id = await api.session();
    expect((await api.get(`/v1/sessions/${id}`)).body.budget).toEqual({ max_turns: 0 });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'x' })).status).toBe(402);
    expect((await api.patch(`/v1/sessions/${id}`, { budget: { max_turns: 5 } })).status).toBe(200);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'x' })).status).toBe(200);
  });
});

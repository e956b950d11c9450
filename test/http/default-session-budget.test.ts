import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { parseResponseId } from '../../lib/openai/ids.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, TOKEN } from './http-suite.ts';

// DEFAULT_SESSION_BUDGET (docs/CONFIGURATION.md): the budget of every session created without
// one of its own, natively or by the OpenAI-compatible routes, through the app.
const DEFAULT = { max_turns: 1 };
const harness = appHarness(new MemoryStore(), {
  API_TOKEN: TOKEN,
  DEFAULT_MODEL: 'echo',
  DEFAULT_SESSION_BUDGET: JSON.stringify(DEFAULT),
});
const api = createClient(harness);

describe('DEFAULT_SESSION_BUDGET', () => {
  it('is the budget of a session created without one, and refuses its turn with 402 once spent', async () => {
    const id = await api.session();
    expect((await api.get(`/v1/sessions/${id}`)).body.budget).toEqual(DEFAULT);
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'one' })).status).toBe(200);
    const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'two' });
    expect(refused.status).toBe(402);
    expect(refused.body.error).toMatchObject({
      code: 'budget_exhausted',
      details: { budget: 'session', limit: 'max_turns', spent: 1, value: 1 },
    });
    // A PATCH with budget: null removes it.
    expect((await api.patch(`/v1/sessions/${id}`, { budget: null })).body.budget).toBeNull();
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'three' })).status).toBe(200);
  });

  it('gives way to a budget of its own; a null create field takes the default', async () => {
    const own = await api.session({ budget: { max_turns: 5 } });
    expect((await api.get(`/v1/sessions/${own}`)).body.budget).toEqual({ max_turns: 5 });
    const nulled = await api.session({ budget: null });
    expect((await api.get(`/v1/sessions/${nulled}`)).body.budget).toEqual(DEFAULT);
    // A budget naming no limit is a budget of its own: the session has no limit.
    const empty = await api.session({ budget: {} });
    expect((await api.get(`/v1/sessions/${empty}`)).body.budget).toEqual({});
    for (const input of ['one', 'two'])
      expect((await api.post(`/v1/sessions/${empty}/turns`, { input })).status).toBe(200);
  });

  it('caps a conversation /v1/responses starts, and one /v1/conversations creates', async () => {
    const first = await api.post('/v1/responses', { model: 'echo', input: 'one' });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const sessionId = parseResponseId(first.body.id)!.sessionId;
    expect((await api.get(`/v1/sessions/${sessionId}`)).body.budget).toEqual(DEFAULT);
    const second = await api.post('/v1/responses', {
      model: 'echo',
      input: 'two',
      previous_response_id: first.body.id,
    });
    expect(second.status).toBe(402);
    expect(second.body.error).toMatchObject({ type: 'insufficient_quota', code: 'budget_exhausted' });

    const conversation = await api.post('/v1/conversations', {});
    expect(conversation.status, JSON.stringify(conversation.body)).toBe(200);
    expect((await api.get(`/v1/sessions/${conversation.body.id}`)).body.budget).toEqual(DEFAULT);
  });

  it("leaves a fork with its parent's budget, and gives an import without one the default", async () => {
    const parent = await api.session({ budget: { max_turns: 7 } });
    expect((await api.post(`/v1/sessions/${parent}/turns`, { input: 'one' })).status).toBe(200);
    const fork = await api.post(`/v1/sessions/${parent}/fork`, { at_turn: 1 });
    expect(fork.status, JSON.stringify(fork.body)).toBe(201);
    expect(fork.body.budget).toEqual({ max_turns: 7 });
    // A parent whose budget was removed forks into a session without one.
    await api.patch(`/v1/sessions/${parent}`, { budget: null });
    const unbudgeted = await api.post(`/v1/sessions/${parent}/fork`, { at_turn: 1 });
    expect(unbudgeted.body.budget).toBeNull();

    const exported = await api.get(`/v1/sessions/${parent}/export`);
    expect(exported.status).toBe(200);
    const header = JSON.parse((exported.body as string).split('\n')[0]!);
    expect(header.budget).toBeUndefined();
    const renamed = [
      JSON.stringify({ ...header, id: `${parent}-copy` }),
      ...(exported.body as string).split('\n').slice(1),
    ];
    const imported = await api.post('/v1/sessions/import', renamed.join('\n'), {
      'content-type': 'application/x-ndjson',
    });
    expect(imported.status, JSON.stringify(imported.body)).toBe(201);
    expect(imported.body.budget).toEqual(DEFAULT);
    // Its usage goes on from the export's: its one turn spent the default already.
    expect((await api.post(`/v1/sessions/${parent}-copy/turns`, { input: 'two' })).status).toBe(402);
  });

  it('takes DEFAULT_SESSION_BUDGET={} as no default, as unset: a session created without one has none', async () => {
    const env = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', DEFAULT_SESSION_BUDGET: '{}' };
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const created = await harness.fetchWithEnv(env, '/v1/sessions', { method: 'POST', headers, body: '{}' });
    expect(created.status, await created.clone().text()).toBe(201);
    const session = (await created.json()) as { id: string; budget: unknown };
    expect(session.budget).toBeNull();
    for (const input of ['one', 'two']) {
      const turn = await harness.fetchWithEnv(env, `/v1/sessions/${session.id}/turns`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ input }),
      });
      expect(turn.status).toBe(200);
    }
  });

  it('refuses to serve with a bad DEFAULT_SESSION_BUDGET: 503 not_configured naming it and the problem', async () => {
    const response = await harness.fetchWithEnv({ DEFAULT_SESSION_BUDGET: '{"max_cost": 5}' }, '/v1/sessions', {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(response.status).toBe(503);
    const body = (await response.json()) as { error: { code: string; message: string; details: unknown } };
    expect(body.error.code).toBe('not_configured');
    expect(body.error.message).toContain('invalid setting DEFAULT_SESSION_BUDGET: must be JSON like');
    expect(body.error.message).toContain('Unrecognized key: "max_cost"');
    expect(body.error.details).toEqual({ variable: 'DEFAULT_SESSION_BUDGET' });
  });
});

import { sign } from 'hono/jwt';
import { describe, expect, it, vi } from 'vitest';
import { decodeUtf8 } from '../../lib/store/object-store.ts';
import { spendKey } from '../../lib/ledger/token-spend.ts';
import { createClient, SIGNING_KEY, type HttpHarness } from './http-suite.ts';

/**
 * Budgets carried by scoped tokens (docs/SECURITY.md, "Token budgets"): one token's turns
 * across several sessions are charged to one spend record (docs/STORAGE.md, "Token spend"),
 * exactly under concurrent turns, and a turn is refused with 402 once it is spent. Runs through
 * the app on the memory and file stores (test/http/token-budget.test.ts) and inside workerd
 * with R2 (test/workers/http-tokens.test.ts).
 */
export function defineTokenBudgetSuite(label: string, harness: HttpHarness): void {
  const api = createClient(harness);

  async function mint(budget?: Record<string, number>): Promise<string> {
    const minted = await api.post('/v1/tokens', { scopes: ['session:turn'], ...(budget ? { budget } : {}) });
    expect(minted.status, JSON.stringify(minted.body)).toBe(201);
    expect(minted.body.budget).toEqual(budget ?? null);
    return minted.body.token as string;
  }

  /** The token's spend record as stored (null before its first charge). */
  async function spendOf(token: string): Promise<Record<string, number> | null> {
    const claims = JSON.parse(atob(token.split('.')[1]!.replaceAll('-', '+').replaceAll('_', '/')));
    const stored = await harness.store.get(spendKey(harness.keyPrefix, { id: claims.jti, expires: claims.exp }));
    return stored ? JSON.parse(decodeUtf8(stored.body)).ledger : null;
  }

  const turn = (token: string, id: string, input: string) =>
    api.post(`/v1/sessions/${id}/turns`, { input }, { authorization: `Bearer ${token}` });

  describe(`${label}: token budgets`, () => {
    it("charges every turn of a token's sessions exactly, concurrent turns included", async () => {
      const token = await mint({ max_turns: 1000 });
      const sessions = await Promise.all([1, 2, 3, 4].map(() => api.session()));
      // Four sessions at once, three turns each (one at a time within a session).
      await Promise.all(
        sessions.map(async (id) => {
          for (const n of [1, 2, 3]) {
            const answered = await turn(token, id, `turn ${n} of ${id}`);
            expect(answered.status, JSON.stringify(answered.body)).toBe(200);
          }
        }),
      );
      const usages = await Promise.all(sessions.map(async (id) => (await api.get(`/v1/sessions/${id}`)).body.usage));
      const sum = (field: string) => usages.reduce((total, usage) => total + usage[field], 0);
      // Charged before each answer.
      expect((await spendOf(token))?.turns).toBe(12);
      expect(await spendOf(token)).toMatchObject({
        turns: 12,
        input_tokens: sum('input_tokens'),
        output_tokens: sum('output_tokens'),
        cost_usd: 0,
      });
    });

    it('checks a background turn of a budgeted token at its claim, and its runner charges the token', async () => {
      const token = await mint({ max_turns: 2 });
      const id = await api.session();
      const bearer = { authorization: `Bearer ${token}` };
      const background = (input: string) => api.post(`/v1/sessions/${id}/turns`, { input, background: true }, bearer);
      expect((await background('one')).status).toBe(202);
      // Charged by its runner, after the 202, just before its completion: the next turn waits for that.
      await vi.waitFor(
        async () => expect((await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('completed'),
        { timeout: 10_000 },
      );
      expect((await spendOf(token))?.turns).toBe(1);
      expect((await turn(token, id, 'two')).status).toBe(200);
      expect((await spendOf(token))?.turns).toBe(2);
      const refused = await background('three');
      expect(refused.status).toBe(402);
      expect(refused.body.error).toMatchObject({ code: 'budget_exhausted', details: { budget: 'token' } });
      const facade = await api.post('/v1/responses', { model: 'echo', input: 'four', background: true }, bearer);
      expect(facade.status).toBe(402);
      expect((await api.get(`/v1/sessions/${id}`)).body.counts.turns).toBe(2);
    });

    it('refuses a response that would start a conversation before the conversation is created', async () => {
      const token = await mint({ max_turns: 1 });
      expect((await turn(token, await api.session(), 'one')).status).toBe(200);
      const conversations = async () =>
        (await harness.store.list(`${harness.keyPrefix}sessions/conv_`, { limit: 1000 })).objects.map(
          (object) => object.key,
        );
      const before = await conversations();
      for (const key of [undefined, 'spent-start']) {
        const headers = { authorization: `Bearer ${token}`, ...(key ? { 'idempotency-key': key } : {}) };
        const refused = await api.post('/v1/responses', { model: 'echo', input: 'two' }, headers);
        expect(refused.status).toBe(402);
        expect(refused.body.error).toMatchObject({ code: 'budget_exhausted', details: { budget: 'token' } });
      }
      expect(await conversations()).toEqual(before);
    });

    it('refuses a compaction with 402 once the token or the session spent its budget: it calls a model', async () => {
      const token = await mint({ max_turns: 1 });
      const id = await api.session();
      const bearer = { authorization: `Bearer ${token}` };
      expect((await turn(token, id, 'one')).status).toBe(200);
      expect((await spendOf(token))?.turns).toBe(1);
      const native = await api.post(`/v1/sessions/${id}/compact`, { keep_tokens: 0 }, bearer);
      expect(native.status).toBe(402);
      expect(native.body.error).toMatchObject({ code: 'budget_exhausted', details: { budget: 'token' } });
      const facade = await api.post('/v1/responses/compact', { model: 'echo', input: 'hello' }, bearer);
      expect(facade.status).toBe(402);
      // A session whose own budget is spent, whatever token asks.
      const spentSession = await api.session({ budget: { max_turns: 1 } });
      expect((await api.post(`/v1/sessions/${spentSession}/turns`, { input: 'one' })).status).toBe(200);
      const refused = await api.post(`/v1/sessions/${spentSession}/compact`, { keep_tokens: 0 });
      expect(refused.status).toBe(402);
      expect(refused.body.error).toMatchObject({ code: 'budget_exhausted', details: { budget: 'session' } });
    });

    it("charges a compaction's summary to the token and the session as no turn, native and facade", async () => {
      const token = await mint({ max_turns: 1000 });
      const id = await api.session();
      const bearer = { authorization: `Bearer ${token}` };
      for (const input of ['one', 'two']) expect((await turn(token, id, input)).status).toBe(200);
      expect((await spendOf(token))?.turns).toBe(2);
      const before = (await spendOf(token))!;
      const sessionBefore = (await api.get(`/v1/sessions/${id}`)).body.usage;
      const native = await api.post(`/v1/sessions/${id}/compact`, { keep_tokens: 0 }, bearer);
      expect(native.status, JSON.stringify(native.body)).toBe(200);
      const summary = native.body.usage;
      expect(summary.input_tokens).toBeGreaterThan(0);
      expect((await api.get(`/v1/sessions/${id}`)).body.usage).toMatchObject({
        turns: 2,
        input_tokens: sessionBefore.input_tokens + summary.input_tokens,
        output_tokens: sessionBefore.output_tokens + summary.output_tokens,
      });
      const charged = { input_tokens: before.input_tokens + summary.input_tokens };
      expect(await spendOf(token)).toMatchObject(charged);
      expect((await spendOf(token))?.turns).toBe(2);
      const facade = await api.post('/v1/responses/compact', { model: 'echo', input: 'hello there' }, bearer);
      expect(facade.status, JSON.stringify(facade.body)).toBe(200);
      const inline = facade.body.usage.input_tokens;
      expect(inline).toBeGreaterThan(0);
      const inlineCharged = { turns: 2, input_tokens: charged.input_tokens + inline };
      expect(await spendOf(token)).toMatchObject(inlineCharged);
    });

    it('refuses a turn with 402 once the token spent its budget: nothing stored, in any session', async () => {
      const token = await mint({ max_turns: 2 });
      const [a, b, c] = await Promise.all([1, 2, 3].map(() => api.session()));
      expect((await turn(token, a!, 'one')).status).toBe(200);
      expect((await turn(token, b!, 'two')).status).toBe(200);
      expect((await spendOf(token))?.turns).toBe(2);
      const refused = await turn(token, c!, 'three');
      expect(refused.status).toBe(402);
      expect(refused.body.error).toMatchObject({
        code: 'budget_exhausted',
        details: { budget: 'token', limit: 'max_turns', spent: 2, value: 2 },
      });
      expect((await api.get(`/v1/sessions/${c}`)).body.counts).toEqual({ items: 0, turns: 0, tool_calls: 0 });
      // The session's own budget is not touched: the admin token still takes turns there.
      expect((await api.post(`/v1/sessions/${c}/turns`, { input: 'admin' })).status).toBe(200);
      // The OpenAI-compatible routes answer in OpenAI's error shape, stored or not.
      const bearer = { authorization: `Bearer ${token}` };
      for (const [path, body] of [
        ['/v1/responses', { model: 'echo', input: 'hello' }],
        ['/v1/responses', { model: 'echo', input: 'hello', store: false }],
        ['/v1/chat/completions', { model: 'echo', messages: [{ role: 'user', content: 'hello' }] }],
      ] as const) {
        const facade = await api.post(path, body, bearer);
        expect(facade.status, `${path} ${JSON.stringify(body)}`).toBe(402);
        expect(facade.body.error).toMatchObject({
          type: 'insufficient_quota',
          code: 'budget_exhausted',
          details: { budget: 'token', limit: 'max_turns', spent: 2, value: 2 },
        });
      }
    });

    it("charges stateless chat completions to the token's budget too", async () => {
      const token = await mint({ max_turns: 1 });
      const bearer = { authorization: `Bearer ${token}` };
      const chat = { model: 'echo', messages: [{ role: 'user', content: 'hello' }] };
      expect((await api.post('/v1/chat/completions', chat, bearer)).status).toBe(200);
      expect((await spendOf(token))?.turns).toBe(1);
      expect((await api.post('/v1/chat/completions', chat, bearer)).status).toBe(402);
    });

    it('overshoots by at most the turns already running when the limit was reached', async () => {
      const limit = 3;
      const token = await mint({ max_turns: limit });
      const sessions = await Promise.all([1, 2, 3, 4, 5].map(() => api.session()));
      expect((await turn(token, sessions[0]!, 'first')).status).toBe(200);
      expect((await spendOf(token))?.turns).toBe(1);
      // Five turns start together at 1 of 3 spent: each may have read the spend before any was charged.
      const racing = await Promise.all(sessions.map((id) => turn(token, id, 'race')));
      const admitted = racing.filter((answer) => answer.status === 200).length;
      for (const answer of racing) expect([200, 402]).toContain(answer.status);
      expect((await spendOf(token))?.turns).toBe(1 + admitted);
      // The bound of docs/SECURITY.md: limit - 1 + the turns in flight (one per session).
      expect(1 + admitted).toBeLessThanOrEqual(limit - 1 + sessions.length);
      expect(admitted).toBeGreaterThanOrEqual(limit - 1);
      // Once charged, every turn of the token is refused.
      for (const id of sessions) expect((await turn(token, id, 'after')).status).toBe(402);
    });

    it('tells the token what its turns spent and what its budget leaves (GET /v1/tokens/current)', async () => {
      const budget = { max_turns: 2, max_total_tokens: 100_000, max_cost_usd: 0.5 };
      const token = await mint(budget);
      const bearer = { authorization: `Bearer ${token}` };
      const current = async () => {
        const answered = await api.get('/v1/tokens/current', bearer);
        expect(answered.status, JSON.stringify(answered.body)).toBe(200);
        return answered.body;
      };
      expect(await current()).toMatchObject({
        scopes: ['session:turn'],
        session_id: null,
        budget,
        usage: { turns: 0, total_tokens: 0, cost_usd: 0 },
        remaining: budget,
      });
      // Two turns in two sessions: the spend is the sum of their usage.
      const usages: Record<string, number>[] = [];
      for (const input of ['one', 'two']) {
        const answered = await turn(token, await api.session(), input);
        expect(answered.status, JSON.stringify(answered.body)).toBe(200);
        usages.push(answered.body.usage);
      }
      const sum = (field: string) => usages.reduce((total, usage) => total + (usage[field] ?? 0), 0);
      const total = sum('input_tokens') + sum('output_tokens');
      expect(total).toBeGreaterThan(0);
      expect((await current()).usage.turns).toBe(2);
      const spent = await current();
      expect(spent.usage).toMatchObject({
        turns: 2,
        input_tokens: sum('input_tokens'),
        output_tokens: sum('output_tokens'),
        cached_input_tokens: sum('cached_input_tokens'),
        total_tokens: total,
        cost_usd: 0,
      });
      // max_turns is reached: 0 left, and the next turn is refused.
      expect(spent.remaining).toEqual({ max_turns: 0, max_total_tokens: 100_000 - total, max_cost_usd: 0.5 });
      expect((await turn(token, await api.session(), 'three')).status).toBe(402);
    });

    it('a token without a budget writes no spend record and is never refused for one', async () => {
      const prefix = `${harness.keyPrefix}token-spend/`;
      const before = (await harness.store.list(prefix)).objects.length;
      const token = await mint();
      const id = await api.session({ budget: { max_turns: 100 } });
      for (const n of [1, 2, 3]) expect((await turn(token, id, `turn ${n}`)).status).toBe(200);
      const after = (await harness.store.list(prefix)).objects.length;
      expect(after).toBe(before);
    });

    it('a signed token with a budget but no id, or an id but no budget, is malformed (401)', async () => {
      const id = await api.session();
      const now = Math.floor(Date.now() / 1000);
      const claims = { scope: 'session:turn', iat: now, exp: now + 600 };
      for (const extra of [{ bud: { max_turns: 5 } }, { jti: 'a'.repeat(32) }]) {
        const token = await sign({ ...claims, ...extra }, SIGNING_KEY, 'HS256');
        const refused = await turn(token, id, 'hello');
        expect(refused.status, JSON.stringify(extra)).toBe(401);
        expect(refused.body.error.message).toMatch(/malformed/);
      }
    });

    it('a malformed budget is a 400 naming the field', async () => {
      const bad = await api.post('/v1/tokens', { scopes: ['session:turn'], budget: { max_turns: -1 } });
      expect(bad.status).toBe(400);
      expect(bad.body.error.details.field).toBe('budget.max_turns');
    });
  });
}

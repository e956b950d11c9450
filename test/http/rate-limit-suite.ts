import { describe, expect, it } from 'vitest';
import { freshId, TOKEN, type HttpHarness } from './http-suite.ts';

/**
 * Turns per minute per session and per token (functions/rate-limit.ts): three turns a minute
 * under each limit the test turns on. `limits.session` and `limits.token` are the environment
 * overrides that set one of them to 3 (the settings on Node, a Rate Limiting binding in workerd).
 * Run through the app (test/http/rate-limit.test.ts) and through the worker (test/workers/http.test.ts).
 */
export function defineRateLimitSuite(
  label: string,
  harness: HttpHarness,
  limits: { session: Record<string, unknown>; token: Record<string, unknown> },
): void {
  const call = async (env: Record<string, unknown>, token: string, method: string, path: string, body?: unknown) => {
    const response = await harness.fetchWithEnv(env as Record<string, string>, path, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: response.status, headers: response.headers, body: (await response.json()) as any };
  };
  const session = async () => {
    const id = freshId('rl');
    expect((await call({}, TOKEN, 'POST', '/v1/sessions', { id })).status).toBe(201);
    return id;
  };
  // Tokens minted in the same second with the same claims are the same token: each gets other scopes.
  const extra = [[], ['session:read'], ['inbox:read'], ['inbox:write']];
  let minted = 0;
  const mint = async () =>
    (await call({}, TOKEN, 'POST', '/v1/tokens', { scopes: ['session:turn', ...extra[minted++ % extra.length]!] })).body
      .token;
  const expectLimited = (refused: { status: number; headers: Headers }) => {
    expect(refused.status).toBe(429);
    const wait = Number(refused.headers.get('retry-after'));
    expect(Number.isInteger(wait) && wait >= 1 && wait <= 60, `Retry-After ${wait}`).toBe(true);
  };

  describe(`${label}: turns per minute`, () => {
    it('a session gets 429 rate_limited past its limit; nothing is stored; other sessions go on', async () => {
      const id = await session();
      for (let turn = 1; turn <= 3; turn++)
        expect((await call(limits.session, TOKEN, 'POST', `/v1/sessions/${id}/turns`, { input: 'hi' })).status).toBe(
          200,
        );
      const refused = await call(limits.session, TOKEN, 'POST', `/v1/sessions/${id}/turns`, { input: 'over' });
      expectLimited(refused);
      expect(refused.body.error.code).toBe('rate_limited');
      expect(refused.body.error.details.per).toBe('session');
      const stored = await call({}, TOKEN, 'GET', `/v1/sessions/${id}`);
      expect(stored.body.counts.turns).toBe(3);
      const other = await session();
      expect((await call(limits.session, TOKEN, 'POST', `/v1/sessions/${other}/turns`, { input: 'hi' })).status).toBe(
        200,
      );
    });

    it("a token gets 429 past its limit across sessions; another token's turns go on", async () => {
      const token = await mint();
      for (let turn = 1; turn <= 3; turn++) {
        const taken = await call(limits.token, token, 'POST', `/v1/sessions/${await session()}/turns`, { input: 'hi' });
        expect(taken.status, JSON.stringify(taken.body)).toBe(200);
      }
      const id = await session();
      const refused = await call(limits.token, token, 'POST', `/v1/sessions/${id}/turns`, { input: 'over' });
      expectLimited(refused);
      expect(refused.body.error).toMatchObject({ code: 'rate_limited', details: { per: 'token' } });
      expect((await call(limits.token, await mint(), 'POST', `/v1/sessions/${id}/turns`, { input: 'hi' })).status).toBe(
        200,
      );
    });

    it("the OpenAI-compatible routes answer 429 in OpenAI's shape, per token and per conversation", async () => {
      const token = await mint();
      const chat = { model: 'echo', messages: [{ role: 'user', content: 'hello' }] };
      for (let turn = 1; turn <= 3; turn++)
        expect((await call(limits.token, token, 'POST', '/v1/chat/completions', chat)).status).toBe(200);
      const refused = await call(limits.token, token, 'POST', '/v1/chat/completions', chat);
      expectLimited(refused);
      expect(refused.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limited', param: null });

      const conversation = (await call({}, TOKEN, 'POST', '/v1/conversations', {})).body.id;
      const response = { model: 'echo', input: 'hi', conversation };
      for (let turn = 1; turn <= 3; turn++)
        expect((await call(limits.session, TOKEN, 'POST', '/v1/responses', response)).status).toBe(200);
      const over = await call(limits.session, TOKEN, 'POST', '/v1/responses', response);
      expectLimited(over);
      expect(over.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limited' });
      expect((await call({}, TOKEN, 'GET', `/v1/sessions/${conversation}`)).body.counts.turns).toBe(3);
    });
  });
}

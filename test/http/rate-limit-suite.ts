import { describe, expect, it } from 'vitest';
import { freshId, TOKEN, type HttpHarness } from './http-suite.ts';

/**
 * Turns per minute per session and per token (functions/rate-limit.ts): three turns a minute
 * under each limit the test turns on. `limits.session` and `limits.token` are the environment
 * overrides that set one of them to 3 (the settings on Node, a Rate Limiting binding in workerd).
 * Run through the app (test/http/rate-limit.test.ts) and through the worker (test/workers/http-tokens.test.ts).
 *
 * `windows`: the in-process limiter counts a sliding minute, so exactly 3 turns pass; the Rate
 * Limiting binding counts minutes aligned to the wall clock, so turns that straddle a minute's
 * end may pass 3 more (a slow machine makes that likely). The suite sends until refused, at most
 * 7 turns (two windows hold at most 6), and checks the count each kind allows.
 */
export function defineRateLimitSuite(
  label: string,
  harness: HttpHarness,
  limits: { session: Record<string, unknown>; token: Record<string, unknown> },
  windows: 'sliding' | 'clock-aligned',
): void {
  const call = async (
    env: Record<string, unknown>,
    token: string,
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ) => {
    const response = await harness.fetchWithEnv(env as Record<string, string>, path, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
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
  const LIMIT = 3;
  /** Sends until one is refused; every answer before it must be 200. */
  const untilRefused = async (send: () => Promise<{ status: number; headers: Headers; body: any }>) => {
    for (let accepted = 0; accepted <= 2 * LIMIT; accepted++) {
      const answer = await send();
      if (answer.status !== 200) {
        if (windows === 'sliding') expect(accepted).toBe(LIMIT);
        else expect(accepted >= LIMIT && accepted <= 2 * LIMIT, `${accepted} accepted`).toBe(true);
        return { accepted, refused: answer };
      }
    }
    throw new Error(`no refusal after ${2 * LIMIT + 1} turns`);
  };
  const expectLimited = (refused: { status: number; headers: Headers }) => {
    expect(refused.status).toBe(429);
    const wait = Number(refused.headers.get('retry-after'));
    expect(Number.isInteger(wait) && wait >= 1 && wait <= 60, `Retry-After ${wait}`).toBe(true);
  };

  describe(`${label}: turns per minute`, () => {
    it('a session gets 429 rate_limited past its limit; nothing is stored; other sessions go on', async () => {
      const id = await session();
      const { accepted, refused } = await untilRefused(() =>
        call(limits.session, TOKEN, 'POST', `/v1/sessions/${id}/turns`, { input: 'hi' }),
      );
      expectLimited(refused);
      expect(refused.body.error.code).toBe('rate_limited');
      expect(refused.body.error.details.per).toBe('session');
      const stored = await call({}, TOKEN, 'GET', `/v1/sessions/${id}`);
      expect(stored.body.counts.turns).toBe(accepted);
      const other = await session();
      expect((await call(limits.session, TOKEN, 'POST', `/v1/sessions/${other}/turns`, { input: 'hi' })).status).toBe(
        200,
      );
    });

    it("a token gets 429 past its limit across sessions; another token's turns go on", async () => {
      const token = await mint();
      const id = await session();
      const { refused } = await untilRefused(async () =>
        call(limits.token, token, 'POST', `/v1/sessions/${await session()}/turns`, { input: 'hi' }),
      );
      expectLimited(refused);
      expect(refused.body.error).toMatchObject({ code: 'rate_limited', details: { per: 'token' } });
      expect((await call(limits.token, await mint(), 'POST', `/v1/sessions/${id}/turns`, { input: 'hi' })).status).toBe(
        200,
      );
    });

    it('counts a token once however its base64 is spelled', async () => {
      const token = await mint();
      // The last character of the signature carries spare bits: other spellings of the same token.
      const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
      const last = ALPHABET.indexOf(token.at(-1)!);
      const spellings = [0, 1, 2, 3].map((low) => token.slice(0, -1) + ALPHABET[(last & ~3) | low]);
      const answers: number[] = [];
      for (const spelling of [...spellings, ...spellings])
        answers.push(
          (await call(limits.token, spelling, 'POST', `/v1/sessions/${await session()}/turns`, { input: 'hi' })).status,
        );
      expect(answers.filter((status) => status === 200)).toHaveLength(LIMIT);
      expect(answers.filter((status) => status !== 200).every((status) => status === 429)).toBe(true);
    });

    it('counts the tokens a budgeted token mints, which share its budget, under its one limit', async () => {
      const minted = await call({}, TOKEN, 'POST', '/v1/tokens', { scopes: ['admin'], budget: { max_turns: 100 } });
      expect(minted.status, JSON.stringify(minted.body)).toBe(201);
      const parent = minted.body.token as string;
      const children: string[] = [];
      for (const scopes of extra) {
        const child = await call({}, parent, 'POST', '/v1/tokens', { scopes: ['session:turn', ...scopes] });
        expect(child.status, JSON.stringify(child.body)).toBe(201);
        children.push(child.body.token);
      }
      const senders = [parent, ...children];
      let sent = 0;
      const { refused } = await untilRefused(async () =>
        call(limits.token, senders[sent++ % senders.length]!, 'POST', `/v1/sessions/${await session()}/turns`, {
          input: 'hi',
        }),
      );
      expectLimited(refused);
      expect(refused.body.error).toMatchObject({ code: 'rate_limited', details: { per: 'token' } });
    });

    it('a chat completion naming a session in x-tailgate-session counts under that session', async () => {
      const chat = { model: 'echo', messages: [{ role: 'user', content: 'hello' }] };
      const named = (id: string) => ({ 'x-tailgate-session': id });
      const id = await session();
      const { refused } = await untilRefused(() =>
        call(limits.session, TOKEN, 'POST', '/v1/chat/completions', chat, named(id)),
      );
      expectLimited(refused);
      expect(refused.body.error).toMatchObject({ code: 'rate_limited', details: { per: 'session' } });
      // Another session's go on.
      const other = await call(limits.session, TOKEN, 'POST', '/v1/chat/completions', chat, named(await session()));
      expect(other.status).toBe(200);
    });

    it("a token bound to another session spends none of a session's limit naming it (403)", async () => {
      const [own, other] = [await session(), await session()];
      const minted = await call({}, TOKEN, 'POST', '/v1/tokens', { scopes: ['session:turn'], session_id: own });
      const chat = { model: 'echo', messages: [{ role: 'user', content: 'hello' }] };
      for (let sent = 0; sent <= 2 * LIMIT; sent++) {
        const refused = await call(limits.session, minted.body.token, 'POST', '/v1/chat/completions', chat, {
          'x-tailgate-session': other,
        });
        expect(refused.status).toBe(403);
      }
      // The session named is as fresh as before: its own turns go on.
      const turn = await call(limits.session, TOKEN, 'POST', `/v1/sessions/${other}/turns`, { input: 'hi' });
      expect(turn.status).toBe(200);
    });

    it("counts compactions (model calls): a stateless one under its token, a session's under the session", async () => {
      // A lifetime of its own: a token of its claims no other test minted.
      const minted = await call({}, TOKEN, 'POST', '/v1/tokens', { scopes: ['session:turn'], ttl_seconds: 1234 });
      const token = minted.body.token as string;
      const inline = { model: 'echo', input: 'a long story to summarize' };
      const { refused } = await untilRefused(() => call(limits.token, token, 'POST', '/v1/responses/compact', inline));
      expectLimited(refused);
      expect(refused.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limited', param: null });

      const id = await session();
      expect((await call({}, TOKEN, 'POST', `/v1/sessions/${id}/turns`, { input: 'hi' })).status).toBe(200);
      const over = await untilRefused(() => call(limits.session, TOKEN, 'POST', `/v1/sessions/${id}/compact`, {}));
      expectLimited(over.refused);
      expect(over.refused.body.error).toMatchObject({ code: 'rate_limited', details: { per: 'session' } });
    });

    it('a revoked token bound to the session spends none of its limit: refused (401) uncounted', async () => {
      const id = await session();
      const minted = await call({}, TOKEN, 'POST', '/v1/tokens', { scopes: ['session:turn'], session_id: id });
      expect((await call({}, TOKEN, 'POST', `/v1/sessions/${id}/tokens/revoke`)).status).toBe(200);
      for (let sent = 0; sent <= 2 * LIMIT; sent++) {
        const refused = await call(limits.session, minted.body.token, 'POST', `/v1/sessions/${id}/turns`, {
          input: 'hi',
        });
        expect(refused.status, JSON.stringify(refused.body)).toBe(401);
      }
      const turn = await call(limits.session, TOKEN, 'POST', `/v1/sessions/${id}/turns`, { input: 'hi' });
      expect(turn.status, JSON.stringify(turn.body)).toBe(200);
    });

    it("a revoked bound token spends none of its token's limit either, which a budget's tokens share", async () => {
      const id = await session();
      const parent = await call({}, TOKEN, 'POST', '/v1/tokens', { scopes: ['admin'], budget: { max_turns: 100 } });
      const child = await call({}, parent.body.token, 'POST', '/v1/tokens', {
        scopes: ['session:turn'],
        session_id: id,
      });
      expect(child.status, JSON.stringify(child.body)).toBe(201);
      expect((await call({}, TOKEN, 'POST', `/v1/sessions/${id}/tokens/revoke`)).status).toBe(200);
      const both = { ...limits.session, ...limits.token };
      for (let sent = 0; sent <= 2 * LIMIT; sent++) {
        const refused = await call(both, child.body.token, 'POST', `/v1/sessions/${id}/turns`, { input: 'hi' });
        expect(refused.status, JSON.stringify(refused.body)).toBe(401);
      }
      // The budget's other tokens, the one that minted it here, go on.
      const turn = await call(both, parent.body.token, 'POST', `/v1/sessions/${await session()}/turns`, {
        input: 'hi',
      });
      expect(turn.status, JSON.stringify(turn.body)).toBe(200);
    });

    it("a revoked bound token spends none of its budget's limit where only the token limit is set", async () => {
      const id = await session();
      const parent = await call({}, TOKEN, 'POST', '/v1/tokens', { scopes: ['admin'], budget: { max_turns: 101 } });
      const child = await call({}, parent.body.token, 'POST', '/v1/tokens', {
        scopes: ['session:turn'],
        session_id: id,
      });
      expect(child.status, JSON.stringify(child.body)).toBe(201);
      expect((await call({}, TOKEN, 'POST', `/v1/sessions/${id}/tokens/revoke`)).status).toBe(200);
      for (let sent = 0; sent <= 2 * LIMIT; sent++) {
        const refused = await call(limits.token, child.body.token, 'POST', `/v1/sessions/${id}/turns`, {
          input: 'hi',
        });
        expect(refused.status, JSON.stringify(refused.body)).toBe(401);
      }
      const turn = await call(limits.token, parent.body.token, 'POST', `/v1/sessions/${await session()}/turns`, {
        input: 'hi',
      });
      expect(turn.status, JSON.stringify(turn.body)).toBe(200);
    });

    it("a bound token naming no session spends none of its budget's limit: refused (403, 401) uncounted", async () => {
      const id = await session();
      const parent = await call({}, TOKEN, 'POST', '/v1/tokens', { scopes: ['admin'], budget: { max_turns: 102 } });
      const child = await call({}, parent.body.token, 'POST', '/v1/tokens', {
        scopes: ['session:turn'],
        session_id: id,
      });
      expect((await call({}, TOKEN, 'POST', `/v1/sessions/${id}/tokens/revoke`)).status).toBe(200);
      const chat = { model: 'echo', messages: [{ role: 'user', content: 'hello' }] };
      // A response naming none may continue the token's session (its history finds it): revoked, 401.
      const sends = [
        [403, () => call(limits.token, child.body.token, 'POST', '/v1/chat/completions', chat)],
        [401, () => call(limits.token, child.body.token, 'POST', '/v1/responses', { model: 'echo', input: 'hi' })],
        [
          403,
          () => call(limits.token, child.body.token, 'POST', '/v1/responses/compact', { model: 'echo', input: 'hi' }),
        ],
      ] as const;
      for (let sent = 0; sent <= 2 * LIMIT; sent++) {
        const [status, send] = sends[sent % sends.length]!;
        const refused = await send();
        expect(refused.status, JSON.stringify(refused.body)).toBe(status);
      }
      const turn = await call(limits.token, parent.body.token, 'POST', `/v1/sessions/${await session()}/turns`, {
        input: 'hi',
      });
      expect(turn.status, JSON.stringify(turn.body)).toBe(200);
    });

    it('a bound token whose session was deleted, naming none, is refused (403) as without a limit', async () => {
      const id = await session();
      const parent = await call({}, TOKEN, 'POST', '/v1/tokens', { scopes: ['admin'], budget: { max_turns: 103 } });
      const child = await call({}, parent.body.token, 'POST', '/v1/tokens', {
        scopes: ['session:turn'],
        session_id: id,
      });
      const deleted = await harness.fetchWithEnv({}, `/v1/sessions/${id}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(deleted.status).toBe(204);
      const send = (env: Record<string, unknown>) =>
        call(env, child.body.token, 'POST', '/v1/responses', { model: 'echo', input: 'hi' });
      const unlimited = await send({});
      expect(unlimited.status, JSON.stringify(unlimited.body)).toBe(403);
      for (let sent = 0; sent <= 2 * LIMIT; sent++) {
        const refused = await send(limits.token);
        expect(refused.status, JSON.stringify(refused.body)).toBe(403);
        expect(refused.body.error.message).toBe(unlimited.body.error.message);
      }
      const turn = await call(limits.token, parent.body.token, 'POST', `/v1/sessions/${await session()}/turns`, {
        input: 'hi',
      });
      expect(turn.status, JSON.stringify(turn.body)).toBe(200);
    });

    it("the OpenAI-compatible routes answer 429 in OpenAI's shape, per token and per conversation", async () => {
      const token = await mint();
      const chat = { model: 'echo', messages: [{ role: 'user', content: 'hello' }] };
      const { refused } = await untilRefused(() => call(limits.token, token, 'POST', '/v1/chat/completions', chat));
      expectLimited(refused);
      expect(refused.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limited', param: null });

      const conversation = (await call({}, TOKEN, 'POST', '/v1/conversations', {})).body.id;
      const response = { model: 'echo', input: 'hi', conversation };
      const over = await untilRefused(() => call(limits.session, TOKEN, 'POST', '/v1/responses', response));
      expectLimited(over.refused);
      expect(over.refused.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limited' });
      expect((await call({}, TOKEN, 'GET', `/v1/sessions/${conversation}`)).body.counts.turns).toBe(over.accepted);
    });
  });
}

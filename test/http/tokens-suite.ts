import { sign, verify } from 'hono/jwt';
import { describe, expect, it, vi } from 'vitest';
import { spendKey } from '../../lib/ledger/token-spend.ts';
import { freshId, SIGNING_KEY, TOKEN, type HttpHarness } from './http-suite.ts';

/**
 * Scoped tokens through the real app (README "Give a notice poster its own token"): minting,
 * verification, scopes, session binding, revocation, and the route-by-scope matrix read from
 * /openapi.json. Runs in Node (test/http/http.test.ts) and inside workerd
 * (test/workers/http-tokens.test.ts).
 */

const SCOPES = ['inbox:write', 'inbox:read', 'session:read', 'session:turn', 'admin'] as const;
type Scope = (typeof SCOPES)[number];

/** What each scope lets a token do, written out independently of the implementation. */
const ALLOWS: Record<Scope, Scope[]> = {
  'inbox:write': ['inbox:write'],
  'inbox:read': ['inbox:read'],
  'session:read': ['session:read'],
  'session:turn': ['session:turn', 'session:read'],
  admin: [...SCOPES],
};

/** The scope each route needs (docs/API.md), written out independently of the routes; `any`: any token. */
const EXPECTED_SCOPES: Record<string, Scope | 'any'> = {
  'POST /v1/sessions': 'admin',
  'POST /v1/sessions/import': 'admin',
  'POST /v1/sessions/{id}/fork': 'admin',
  'GET /v1/sessions/{id}/export': 'session:read',
  'GET /v1/sessions/{id}': 'session:read',
  'PATCH /v1/sessions/{id}': 'admin',
  'DELETE /v1/sessions/{id}': 'admin',
  'DELETE /v1/sessions/{id}/turns/{turn}': 'admin',
  'POST /v1/sessions/{id}/turns': 'session:turn',
  'POST /v1/sessions/{id}/items': 'session:turn',
  'GET /v1/sessions/{id}/items': 'session:read',
  'GET /v1/sessions/{id}/blobs/{sha256}': 'session:read',
  'GET /v1/sessions/{id}/prompt': 'session:read',
  'GET /v1/sessions/{id}/queue': 'session:read',
  'DELETE /v1/sessions/{id}/queue/{queued_turn}': 'session:turn',
  'GET /v1/sessions/{id}/forks': 'session:read',
  'POST /v1/sessions/{id}/compact': 'session:turn',
  'POST /v1/sessions/{id}/inbox': 'inbox:write',
  'GET /v1/sessions/{id}/inbox': 'inbox:read',
  'GET /v1/sessions/{id}/inbox/delivered': 'inbox:read',
  'GET /v1/sessions/{id}/inbox/unreadable': 'inbox:read',
  'DELETE /v1/sessions/{id}/inbox/{name}': 'inbox:write',
  'POST /v1/tokens': 'admin',
  'GET /v1/tokens/current': 'any',
  'POST /v1/sessions/{id}/tokens/revoke': 'admin',
  'POST /v1/sessions/{id}/turns/{turn}/cancel': 'session:turn',
  'GET /v1/sessions/{id}/turns/{turn}/events': 'session:read',
  'POST /v1/responses': 'session:turn',
  'POST /v1/responses/compact': 'session:turn',
  'POST /v1/responses/input_tokens': 'session:turn',
  'GET /v1/responses/{id}': 'session:read',
  'GET /v1/responses/{id}/input_items': 'session:read',
  'DELETE /v1/responses/{id}': 'admin',
  'GET /v1/sessions': 'admin',
  'GET /v1/sessions/{id}/turns': 'session:read',
  'GET /v1/sessions/{id}/turns/{turn}': 'session:read',
  'GET /v1/sessions/{id}/turns/{turn}/items': 'session:read',
  'POST /v1/conversations': 'session:turn',
  'GET /v1/conversations/{id}': 'session:read',
  'POST /v1/conversations/{id}': 'admin',
  'DELETE /v1/conversations/{id}': 'admin',
  'POST /v1/conversations/{id}/items': 'session:turn',
  'GET /v1/conversations/{id}/items': 'session:read',
  'GET /v1/conversations/{id}/items/{item_id}': 'session:read',
  'DELETE /v1/conversations/{id}/items/{item_id}': 'admin',
  'POST /v1/chat/completions': 'session:turn',
  'POST /v1/responses/{id}/cancel': 'session:turn',
  'GET /v1/models': 'session:read',
  'GET /v1/models/{id}': 'session:read',
};

/** Routes that name no session and that a token bound to any session may use. */
const ANY_BINDING = new Set(['GET /v1/models', 'GET /v1/models/{id}', 'GET /v1/tokens/current']);

/** Bodies that make an allowed request succeed (2xx, or 404 for a notice that is not there). */
const SAMPLE_BODIES: Record<string, () => unknown> = {
  'POST /v1/sessions': () => ({ id: freshId('m') }),
  'PATCH /v1/sessions/{id}': () => ({ instructions: 'be brief' }),
  'POST /v1/sessions/{id}/turns': () => ({ input: 'hello' }),
  'POST /v1/sessions/{id}/items': () => ({ items: [{ type: 'message', role: 'user', content: 'note' }] }),
  'POST /v1/sessions/{id}/compact': () => ({}),
  'POST /v1/sessions/{id}/inbox': () => ({ name: '0001-budget.md', content: 'Budget left: 2 USD' }),
  'POST /v1/tokens': () => ({ scopes: ['inbox:read'] }),
  // Starts a new session: only a token bound to no session may.
  'POST /v1/responses': () => ({ model: 'echo', input: 'hello' }),
  // Inline input alone: compacted statelessly, so only a token bound to no session may.
  'POST /v1/responses/compact': () => ({ model: 'echo', input: 'hello' }),
  // Inline input alone: counted as a `store: false` response's, so only a token bound to no session may.
  'POST /v1/responses/input_tokens': () => ({ model: 'echo', input: 'hello' }),
  'POST /v1/conversations': () => ({ metadata: { topic: 'tokens' } }),
  'POST /v1/conversations/{id}': () => ({ metadata: { topic: 'tokens' } }),
  'POST /v1/conversations/{id}/items': () => ({ items: [{ type: 'message', role: 'user', content: 'note' }] }),
  // Without x-tailgate-session it touches no session: only a token bound to none may.
  'POST /v1/chat/completions': () => ({ model: 'echo', messages: [{ role: 'user', content: 'hello' }] }),
};

/** The OpenAI-compatible routes whose `{id}` names the session: a response id of turn 1 of it. */
const RESPONSE_ROUTE = /^\/v1\/responses\/\{id\}/;
/** A conversation id is the session id. */
const CONVERSATION_ROUTE = /^\/v1\/conversations\/\{id\}/;

function concretePath(path: string, id: string): string {
  const sessionPath = RESPONSE_ROUTE.test(path) ? path.replace('{id}', `resp_${id}_1_1_2`) : path.replace('{id}', id);
  return sessionPath
    .replace('{name}', '0001-budget.md')
    .replace('{turn}', '1')
    .replace('{item_id}', `msg_${id}_1`)
    .replace('{sha256}', '0'.repeat(64))
    .replace('{queued_turn}', '0'.repeat(64));
}

interface Operation {
  key: string;
  method: string;
  path: string;
  security: { bearer?: string[] }[] | undefined;
}

/** Another strong key (`openssl rand -base64 32`), for rotations and a second deployment. */
const OTHER_KEY = 'BO16QfLiGKHtmKA3k61l1bFyUP2Sw4Lyt5NZyd2rmEQ=';
const DAY = 24 * 3600;

/** What an HS256 key made of API_TOKEN would be: a token holder could test guesses of API_TOKEN against it. */
async function keyDerivedFromApiToken(): Promise<CryptoKey> {
  const hmac = { name: 'HMAC', hash: 'SHA-256' } as const;
  const encoder = new TextEncoder();
  const base = await crypto.subtle.importKey('raw', encoder.encode(TOKEN), hmac, false, ['sign']);
  const material = await crypto.subtle.sign('HMAC', base, encoder.encode('tailgate token signing key v1'));
  return crypto.subtle.importKey('raw', material, hmac, false, ['sign', 'verify']);
}

async function readJson(response: Response): Promise<any> {
  const text = await response.text();
  return text === '' ? null : JSON.parse(text);
}

export function defineTokenSuite(label: string, harness: HttpHarness): void {
  async function call(
    token: string | null,
    method: string,
    path: string,
    body?: unknown,
    env?: Record<string, string | undefined>,
  ) {
    const headers: Record<string, string> = token === null ? {} : { authorization: `Bearer ${token}` };
    const init: RequestInit = { method, headers };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      headers['content-type'] = 'application/json';
    }
    const response = env ? await harness.fetchWithEnv(env, path, init) : await harness.fetch(path, init);
    return { status: response.status, headers: response.headers, body: await readJson(response) };
  }

  async function createSession(): Promise<string> {
    const id = freshId('tok');
    const created = await call(TOKEN, 'POST', '/v1/sessions', { id });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    return id;
  }

  async function mint(
    body: { scopes: Scope[]; session_id?: string; ttl_seconds?: number },
    env?: Record<string, string | undefined>,
    admin = TOKEN,
  ): Promise<string> {
    const minted = await call(admin, 'POST', '/v1/tokens', body, env);
    expect(minted.status, JSON.stringify(minted.body)).toBe(201);
    return minted.body.token as string;
  }

  function expectInvalidToken(result: { status: number; headers: Headers; body: any }, reason: RegExp): void {
    expect(result.status, JSON.stringify(result.body)).toBe(401);
    expect(result.body.error.code).toBe('unauthorized');
    expect(result.body.error.message).toMatch(reason);
    const challenge = result.headers.get('www-authenticate') ?? '';
    expect(challenge).toMatch(/^Bearer error="invalid_token", error_description="[^"]+"$/);
    expect(challenge).toMatch(reason);
  }

  describe(`${label}: minting tokens`, () => {
    it('mints a token bound to a session with its scopes and a one-hour default lifetime (201)', async () => {
      const id = await createSession();
      const before = Date.now();
      const minted = await call(TOKEN, 'POST', '/v1/tokens', { scopes: ['inbox:write'], session_id: id });
      expect(minted.status).toBe(201);
      expect(minted.body).toEqual({
        token: expect.any(String),
        scopes: ['inbox:write'],
        session_id: id,
        budget: null,
        expires_at: expect.any(String),
      });
      const lifetime = Date.parse(minted.body.expires_at) - before;
      expect(lifetime).toBeGreaterThan(3590_000);
      expect(lifetime).toBeLessThanOrEqual(3601_000);
      const unbound = await call(TOKEN, 'POST', '/v1/tokens', {
        scopes: ['session:read', 'session:read'],
        ttl_seconds: 30 * 24 * 3600,
      });
      expect(unbound.status).toBe(201);
      expect(unbound.body.session_id).toBeNull();
      expect(unbound.body.scopes).toEqual(['session:read']);
      expect(Date.parse(unbound.body.expires_at) - before).toBeGreaterThan(30 * 24 * 3600_000 - 10_000);
    });

    it('a minted admin token mints nothing that outlives it or escapes its budget', async () => {
      const shortLived = await call(TOKEN, 'POST', '/v1/tokens', { scopes: ['admin'], ttl_seconds: 60 });
      const long = await call(shortLived.body.token, 'POST', '/v1/tokens', {
        scopes: ['admin'],
        ttl_seconds: 30 * 24 * 3600,
      });
      expect(long.status, JSON.stringify(long.body)).toBe(201);
      expect(long.body.expires_at).toBe(shortLived.body.expires_at);
      // A budgeted token's children share its budget, spend record and expiry.
      const id = await createSession();
      const budgeted = await call(TOKEN, 'POST', '/v1/tokens', { scopes: ['admin'], budget: { max_turns: 1 } });
      expect((await call(budgeted.body.token, 'POST', `/v1/sessions/${id}/turns`, { input: 'one' })).status).toBe(200);
      const child = await call(budgeted.body.token, 'POST', '/v1/tokens', { scopes: ['admin'], ttl_seconds: 60 });
      expect(child.status, JSON.stringify(child.body)).toBe(201);
      expect(child.body).toMatchObject({ budget: { max_turns: 1 }, expires_at: budgeted.body.expires_at });
      // The turn is charged after its answer: once it is, the child is refused by the shared spend.
      const claims = JSON.parse(atob(budgeted.body.token.split('.')[1].replaceAll('-', '+').replaceAll('_', '/')));
      const spend = spendKey(harness.keyPrefix, { id: claims.jti, expires: claims.exp });
      await vi.waitFor(async () => expect(await harness.store.get(spend)).not.toBeNull(), { timeout: 10_000 });
      const refused = await call(child.body.token, 'POST', `/v1/sessions/${id}/turns`, { input: 'two' });
      expect(refused.status).toBe(402);
      expect(refused.body.error.details).toMatchObject({ budget: 'token', spent: 1 });
      const own = await call(budgeted.body.token, 'POST', '/v1/tokens', {
        scopes: ['admin'],
        budget: { max_turns: 100 },
      });
      expect(own.status).toBe(403);
      expect(own.body.error.code).toBe('forbidden');
      // API_TOKEN mints any lifetime and budget.
      const fresh = await call(TOKEN, 'POST', '/v1/tokens', { scopes: ['admin'], budget: { max_turns: 100 } });
      expect(fresh.status).toBe(201);
    });

    it.each([
      ['a lifetime above 30 days', { scopes: ['inbox:write'], ttl_seconds: 30 * 24 * 3600 + 1 }],
      ['an unknown scope', { scopes: ['inbox:delete'] }],
      ['no scopes', { scopes: [] }],
      ['an unknown field', { scopes: ['admin'], owner: 'ci' }],
    ])('refuses %s with 400', async (_name, body) => {
      const refused = await call(TOKEN, 'POST', '/v1/tokens', body);
      expect(refused.status).toBe(400);
      expect(refused.body.error.code).toBe('invalid_request');
    });

    it('refuses a token for a session that does not exist (404)', async () => {
      const refused = await call(TOKEN, 'POST', '/v1/tokens', {
        scopes: ['inbox:write'],
        session_id: freshId('missing'),
      });
      expect(refused.status).toBe(404);
    });

    it('cannot mint with API_TOKEN alone: 503 not_configured naming TOKEN_SIGNING_KEY', async () => {
      const refused = await call(
        TOKEN,
        'POST',
        '/v1/tokens',
        { scopes: ['inbox:write'] },
        { TOKEN_SIGNING_KEY: undefined },
      );
      expect(refused.status).toBe(503);
      expect(refused.body.error.code).toBe('not_configured');
      expect(refused.body.error.message).toMatch(/TOKEN_SIGNING_KEY.*openssl rand -base64 32/);
      expect(refused.body.error.details).toEqual({ variable: 'TOKEN_SIGNING_KEY' });
      // API_TOKEN itself still opens everything.
      expect((await call(TOKEN, 'GET', '/v1/sessions', undefined, { TOKEN_SIGNING_KEY: undefined })).status).toBe(200);
    });

    it('anonymous local mode cannot mint without TOKEN_SIGNING_KEY (503) but lets everything else in', async () => {
      const anonymous = { API_TOKEN: undefined, TOKEN_SIGNING_KEY: undefined, ALLOW_ANONYMOUS: 'true' };
      const refused = await call(null, 'POST', '/v1/tokens', { scopes: ['admin'] }, anonymous);
      expect(refused.status).toBe(503);
      expect(refused.body.error.code).toBe('not_configured');
      const id = freshId('anon');
      expect((await call(null, 'POST', '/v1/sessions', { id }, anonymous)).status).toBe(201);
      expect((await call(null, 'POST', `/v1/sessions/${id}/tokens/revoke`, undefined, anonymous)).status).toBe(200);
      expect((await call(null, 'DELETE', `/v1/sessions/${id}`, undefined, anonymous)).status).toBe(204);
    });

    it('signs with TOKEN_SIGNING_KEY only: neither API_TOKEN nor a key derived from it checks a token', async () => {
      const id = await createSession();
      const token = await mint({ scopes: ['inbox:write'], session_id: id });
      await expect(verify(token, SIGNING_KEY, 'HS256')).resolves.toMatchObject({ scope: 'inbox:write' });
      await expect(verify(token, await keyDerivedFromApiToken(), 'HS256')).rejects.toThrow(/signature/i);
      await expect(verify(token, TOKEN, 'HS256')).rejects.toThrow(/signature/i);
      // A changed API_TOKEN leaves the token valid; the old API_TOKEN no longer opens anything.
      const rotated = { API_TOKEN: 'another-admin-token' };
      expect((await call(token, 'POST', `/v1/sessions/${id}/inbox`, { name: 'n', content: 'c' }, rotated)).status).toBe(
        201,
      );
      expect((await call(TOKEN, 'GET', `/v1/sessions/${id}`, undefined, rotated)).status).toBe(401);
      const now = Math.floor(Date.now() / 1000);
      const withRawToken = await sign({ scope: 'admin', iat: now, exp: now + 600 }, TOKEN, 'HS256');
      expectInvalidToken(await call(withRawToken, 'GET', `/v1/sessions/${id}`), /signature/);
      const withDerivedKey = await sign(
        { scope: 'admin', iat: now, exp: now + 600 },
        await keyDerivedFromApiToken(),
        'HS256',
      );
      expectInvalidToken(await call(withDerivedKey, 'GET', `/v1/sessions/${id}`), /signature/);
    });

    it('accepts no scoped token without TOKEN_SIGNING_KEY, only API_TOKEN (401)', async () => {
      const id = await createSession();
      const token = await mint({ scopes: ['session:read'], session_id: id });
      expectInvalidToken(
        await call(token, 'GET', `/v1/sessions/${id}`, undefined, { TOKEN_SIGNING_KEY: undefined }),
        /no TOKEN_SIGNING_KEY/,
      );
    });

    it('verifies tokens signed with TOKEN_SIGNING_KEY, also with no API_TOKEN set', async () => {
      const id = await createSession();
      const env = { TOKEN_SIGNING_KEY: OTHER_KEY };
      const token = await mint({ scopes: ['session:read'], session_id: id }, env);
      expect((await call(token, 'GET', `/v1/sessions/${id}`, undefined, env)).status).toBe(200);
      // Another deployment's key: the token does not verify.
      expectInvalidToken(await call(token, 'GET', `/v1/sessions/${id}`), /signature/);
      const now = Math.floor(Date.now() / 1000);
      const external = await sign({ scope: 'admin', iat: now, exp: now + 600 }, OTHER_KEY, 'HS256');
      const keyOnly = { API_TOKEN: undefined, TOKEN_SIGNING_KEY: OTHER_KEY };
      expect((await call(external, 'GET', `/v1/sessions/${id}`, undefined, keyOnly)).status).toBe(200);
      expect((await call(TOKEN, 'GET', `/v1/sessions/${id}`, undefined, keyOnly)).status).toBe(401);
    });
  });

  describe(`${label}: the signing key`, () => {
    it.each([
      ['a word', 'tailgate', /decodes to 6 bytes, fewer than 32/],
      ['one letter', 'x', /is not base64 or base64url text/],
      ['fewer than 32 bytes', 'aXgG7TWfirGzinwJdeHqr8xHQEH5yHGTO7JxU49q', /decodes to 30 bytes/],
      ['32 bytes that repeat', 'A'.repeat(44), /repeats its bytes/],
      ['a passphrase', 'correct horse battery staple of the tailgate service', /not base64/],
    ])('refuses %s as TOKEN_SIGNING_KEY on every request (503 naming it)', async (_name, key, reason) => {
      for (const [variable, env] of [
        ['TOKEN_SIGNING_KEY', { TOKEN_SIGNING_KEY: key }],
        ['TOKEN_SIGNING_KEY_PREVIOUS', { TOKEN_SIGNING_KEY_PREVIOUS: key }],
      ] as const) {
        const refused = await call(TOKEN, 'GET', '/v1/sessions', undefined, env);
        expect(refused.status, JSON.stringify(refused.body)).toBe(503);
        expect(refused.body.error.code).toBe('not_configured');
        expect(refused.body.error.details).toEqual({ variable });
        expect(refused.body.error.message).toContain(`invalid setting ${variable}: must be at least 32 random bytes`);
        expect(refused.body.error.message).toContain('openssl rand -base64 32');
        expect(refused.body.error.message).toMatch(reason);
      }
    });

    it('refuses TOKEN_SIGNING_KEY_PREVIOUS without TOKEN_SIGNING_KEY (503 naming it)', async () => {
      const env = { TOKEN_SIGNING_KEY: undefined, TOKEN_SIGNING_KEY_PREVIOUS: OTHER_KEY };
      const refused = await call(TOKEN, 'GET', '/v1/sessions', undefined, env);
      expect(refused.status).toBe(503);
      expect(refused.body.error.details).toEqual({ variable: 'TOKEN_SIGNING_KEY_PREVIOUS' });
    });

    it('rotates without downtime: the previous key verifies, only the new one signs', async () => {
      const id = await createSession();
      const old = { TOKEN_SIGNING_KEY: SIGNING_KEY };
      const preparing = { TOKEN_SIGNING_KEY: SIGNING_KEY, TOKEN_SIGNING_KEY_PREVIOUS: OTHER_KEY };
      const rotating = { TOKEN_SIGNING_KEY: OTHER_KEY, TOKEN_SIGNING_KEY_PREVIOUS: SIGNING_KEY };
      const rotated = { TOKEN_SIGNING_KEY: OTHER_KEY };
      const before = await mint({ scopes: ['session:read'], session_id: id }, old);
      const after = await mint({ scopes: ['session:read'], session_id: id }, rotating);
      // The token minted during the rotation is signed with the new key, not the previous one.
      await expect(verify(after, OTHER_KEY, 'HS256')).resolves.toBeDefined();
      expectInvalidToken(await call(after, 'GET', `/v1/sessions/${id}`, undefined, old), /signature/);
      // A server still on the old key that already verifies with the new one accepts it.
      expect((await call(after, 'GET', `/v1/sessions/${id}`, undefined, preparing)).status).toBe(200);
      for (const token of [before, after])
        expect((await call(token, 'GET', `/v1/sessions/${id}`, undefined, rotating)).status).toBe(200);
      // Once the previous key is dropped, only tokens of the new key work.
      expect((await call(after, 'GET', `/v1/sessions/${id}`, undefined, rotated)).status).toBe(200);
      expectInvalidToken(await call(before, 'GET', `/v1/sessions/${id}`, undefined, rotated), /signature/);
      // A forgery under neither key is refused during the rotation too.
      const now = Math.floor(Date.now() / 1000);
      const forged = await sign({ scope: 'admin', iat: now, exp: now + 60 }, 'guessed', 'HS256');
      expectInvalidToken(await call(forged, 'GET', `/v1/sessions/${id}`, undefined, rotating), /signature/);
    });
  });

  describe(`${label}: refusing tokens`, () => {
    it('answers a tampered, malformed or expired token with 401 and a WWW-Authenticate reason', async () => {
      const id = await createSession();
      const key = OTHER_KEY;
      const env = { TOKEN_SIGNING_KEY: key };
      const token = await mint({ scopes: ['inbox:read'], session_id: id }, env);
      const [header, payload, signature] = token.split('.') as [string, string, string];
      const claims = JSON.parse(atob(payload.replaceAll('-', '+').replaceAll('_', '/')));
      const widened = btoa(JSON.stringify({ ...claims, scope: 'admin' }))
        .replaceAll('=', '')
        .replaceAll('+', '-')
        .replaceAll('/', '_');
      expectInvalidToken(
        await call(`${header}.${widened}.${signature}`, 'GET', `/v1/sessions/${id}`, undefined, env),
        /signature/,
      );
      expectInvalidToken(await call('not.a-jwt', 'GET', `/v1/sessions/${id}`, undefined, env), /malformed/);
      // A string that is no JWT at all is most likely a mistyped API_TOKEN: the reason says so.
      expectInvalidToken(
        await call('nope', 'GET', `/v1/sessions/${id}`, undefined, env),
        /the token is not API_TOKEN, nor a scoped token \(a signed JWT\)/,
      );
      const now = Math.floor(Date.now() / 1000);
      const expired = await sign(
        { scope: 'session:read', session_id: id, gen: 0, iat: now - 120, exp: now - 60 },
        key,
        'HS256',
      );
      expectInvalidToken(await call(expired, 'GET', `/v1/sessions/${id}`, undefined, env), /expired/);
      const unknownScope = await sign({ scope: 'root', iat: now, exp: now + 60 }, key, 'HS256');
      expectInvalidToken(await call(unknownScope, 'GET', `/v1/sessions/${id}`, undefined, env), /malformed/);
    });

    it.each([
      [
        'an iat and nbf 30 s ahead (the clock tolerance is 60 s)',
        (now: number) => ({ iat: now + 30, nbf: now + 30, exp: now + 600 }),
        null,
      ],
      ['a lifetime of exactly 30 days', (now: number) => ({ iat: now - 60, exp: now - 60 + 30 * DAY }), null],
      ['an iat an hour ahead', (now: number) => ({ iat: now + 3600, exp: now + 7200 }), /issued in the future/],
      ['an nbf an hour ahead', (now: number) => ({ iat: now, nbf: now + 3600, exp: now + 7200 }), /not valid before/],
      [
        'a lifetime of 30 days and 1 s',
        (now: number) => ({ iat: now - 60, exp: now - 59 + 30 * DAY }),
        /lifetime exceeds 30 days/,
      ],
      [
        'an exp a year ahead',
        (now: number) => ({ iat: now - 10 * DAY, exp: now + 365 * DAY }),
        /lifetime exceeds 30 days/,
      ],
      ['no iat', (now: number) => ({ exp: now + 600 }), /malformed/],
      ['an iat that is not a number', (now: number) => ({ iat: 'now', exp: now + 600 }), /malformed/],
    ])('checks the time claims against the clock: %s', async (_name, claims, refusal) => {
      const id = await createSession();
      const token = await sign(
        { scope: 'session:read', ...claims(Math.floor(Date.now() / 1000)) },
        SIGNING_KEY,
        'HS256',
      );
      const result = await call(token, 'GET', `/v1/sessions/${id}/turns`);
      if (refusal === null) expect(result.status, JSON.stringify(result.body)).toBe(200);
      else expectInvalidToken(result, refusal);
    });

    it('refuses a bound token that names no incarnation of its session (401)', async () => {
      const id = await createSession();
      const now = Math.floor(Date.now() / 1000);
      const claims = { scope: 'session:read', session_id: id, gen: 0, iat: now, exp: now + 600 };
      const withoutIncarnation = await sign(claims, SIGNING_KEY, 'HS256');
      expectInvalidToken(await call(withoutIncarnation, 'GET', `/v1/sessions/${id}`), /malformed/);
      expect((await call(TOKEN, 'DELETE', `/v1/sessions/${id}`)).status).toBe(204);
      expect((await call(TOKEN, 'POST', '/v1/sessions', { id })).status).toBe(201);
      expectInvalidToken(await call(withoutIncarnation, 'GET', `/v1/sessions/${id}`), /malformed/);
      const withoutGeneration = await sign({ ...claims, gen: undefined, inc: '' }, SIGNING_KEY, 'HS256');
      expectInvalidToken(await call(withoutGeneration, 'GET', `/v1/sessions/${id}`), /malformed/);
    });

    it('answers a token without the route scope with 403 forbidden naming the scope', async () => {
      const id = await createSession();
      const token = await mint({ scopes: ['inbox:write'], session_id: id });
      const refused = await call(token, 'GET', `/v1/sessions/${id}/inbox`);
      expect(refused.status).toBe(403);
      expect(refused.body.error.code).toBe('forbidden');
      expect(refused.body.error.message).toContain('inbox:read');
      expect(refused.body.error.details).toEqual({ required_scope: 'inbox:read' });
      expect(refused.headers.get('www-authenticate')).toBe('Bearer error="insufficient_scope", scope="inbox:read"');
    });

    it('refuses a bound token a fork of its session: the fork is another session (403)', async () => {
      const id = await createSession();
      expect((await call(TOKEN, 'POST', `/v1/sessions/${id}/turns`, { input: 'hello' })).status).toBe(200);
      const bound = await mint({ scopes: ['admin'], session_id: id });
      const forkId = freshId('fork');
      const refused = await call(bound, 'POST', `/v1/sessions/${id}/fork`, { at_turn: 1, id: forkId });
      expect(refused.status, JSON.stringify(refused.body)).toBe(403);
      expect(refused.body.error.details).toEqual({ session_id: id });
      expect((await call(TOKEN, 'GET', `/v1/sessions/${forkId}`)).status).toBe(404);
      const unbound = await mint({ scopes: ['admin'] });
      expect((await call(unbound, 'POST', `/v1/sessions/${id}/fork`, { at_turn: 1, id: forkId })).status).toBe(201);
    });

    it('tells a bound token to name its session in x-tailgate-session on a chat completion (403)', async () => {
      const id = await createSession();
      const bound = await mint({ scopes: ['session:turn'], session_id: id });
      const body = { model: 'echo', messages: [{ role: 'user', content: 'hello' }] };
      const refused = await call(bound, 'POST', '/v1/chat/completions', body);
      expect(refused.status, JSON.stringify(refused.body)).toBe(403);
      expect(refused.body.error.message).toBe(
        `this token is bound to session ${id}: send x-tailgate-session: ${id} (without it no session is touched)`,
      );
      const named = await harness.fetch('/v1/chat/completions', {
        method: 'POST',
        headers: { authorization: `Bearer ${bound}`, 'content-type': 'application/json', 'x-tailgate-session': id },
        body: JSON.stringify(body),
      });
      expect(named.status).toBe(200);
    });

    it('lets a notice poster post into its session only', async () => {
      const id = await createSession();
      const other = await createSession();
      const poster = await mint({ scopes: ['inbox:write'], session_id: id });
      const posted = await call(poster, 'POST', `/v1/sessions/${id}/inbox`, {
        name: '0001-budget.md',
        content: 'Budget left: 2 USD',
      });
      expect(posted.status).toBe(201);
      const pending = await call(TOKEN, 'GET', `/v1/sessions/${id}/inbox`);
      expect(pending.body.pending.map((notice: { name: string }) => notice.name)).toEqual(['0001-budget.md']);
      const elsewhere = await call(poster, 'POST', `/v1/sessions/${other}/inbox`, { name: 'x', content: 'y' });
      expect(elsewhere.status).toBe(403);
      expect(elsewhere.body.error.details).toEqual({ session_id: id });
      expect((await call(TOKEN, 'GET', `/v1/sessions/${other}/inbox`)).body.pending).toEqual([]);
      expect((await call(poster, 'GET', `/v1/sessions/${id}`)).status).toBe(403);
      expect((await call(poster, 'POST', `/v1/sessions/${id}/turns`, { input: 'hi' })).status).toBe(403);
      expect((await call(poster, 'DELETE', `/v1/sessions/${id}/inbox/0001-budget.md`)).status).toBe(204);
    });
  });

  describe(`${label}: a bound token on the facade's token count`, () => {
    /** A session with one response of the facade: its id and that response's. */
    async function conversation(): Promise<{ id: string; response: string }> {
      const id = await createSession();
      const answered = await call(TOKEN, 'POST', '/v1/responses', { model: 'echo', input: 'hello', conversation: id });
      expect(answered.status, JSON.stringify(answered.body)).toBe(200);
      return { id, response: answered.body.id as string };
    }

    /** What a request answered, without what differs between two requests (the request id). */
    function answer(result: { status: number; headers: Headers; body: any }) {
      return { status: result.status, challenge: result.headers.get('www-authenticate'), body: result.body };
    }

    it('counts its own conversation (by conversation or previous_response_id) as an unbound token does', async () => {
      const own = await conversation();
      const bound = await mint({ scopes: ['session:turn'], session_id: own.id });
      for (const named of [{ conversation: own.id }, { previous_response_id: own.response }]) {
        const body = { model: 'echo', input: 'and then?', ...named };
        const counted = await call(bound, 'POST', '/v1/responses/input_tokens', body);
        expect(counted.status, JSON.stringify(counted.body)).toBe(200);
        expect(counted.body).toEqual(await call(TOKEN, 'POST', '/v1/responses/input_tokens', body).then((r) => r.body));
        expect(counted.body.input_tokens).toBeGreaterThan(0);
      }
      // An older response than the newest is counted in the branch a create would make, a new
      // conversation: refused as that create is (403).
      const newer = { model: 'echo', input: 'more', previous_response_id: own.response };
      expect((await call(TOKEN, 'POST', '/v1/responses', newer)).status).toBe(200);
      const branch = { model: 'echo', input: 'instead', previous_response_id: own.response };
      const branched = await call(bound, 'POST', '/v1/responses/input_tokens', branch);
      expect(branched.status, JSON.stringify(branched.body)).toBe(403);
      expect(answer(branched)).toEqual(answer(await call(bound, 'POST', '/v1/responses', branch)));
      // Once revoked, the count is refused as every request of the token is.
      await call(TOKEN, 'POST', `/v1/sessions/${own.id}/tokens/revoke`);
      const body = { model: 'echo', input: 'and then?', conversation: own.id };
      expectInvalidToken(await call(bound, 'POST', '/v1/responses/input_tokens', body), /revoked/);
    });

    it("refuses another session's conversation as POST /v1/responses refuses it (403)", async () => {
      const own = await conversation();
      const other = await conversation();
      const bound = await mint({ scopes: ['session:turn'], session_id: own.id });
      const missing = `conv_${'0'.repeat(24)}`;
      const items = await call(TOKEN, 'GET', `/v1/conversations/${(await conversation()).id}/items`);
      const third = items.body.data[0].id as string;
      const named = [
        { conversation: other.id },
        { conversation: { id: other.id } },
        { previous_response_id: other.response },
        { conversation: missing },
        // Both named, the conversation another session's: the create's 403, not the 400 of both set.
        { conversation: other.id, previous_response_id: own.response },
        // Another session's response, its input referring to a third's item: refused for the response's.
        { previous_response_id: other.response, input: [{ type: 'item_reference', id: third }] },
      ];
      for (const elsewhere of named) {
        const body = { model: 'echo', input: 'and then?', ...elsewhere };
        const counted = await call(bound, 'POST', '/v1/responses/input_tokens', body);
        const created = await call(bound, 'POST', '/v1/responses', body);
        expect(counted.status, JSON.stringify(counted.body)).toBe(403);
        expect(counted.body.error.code).toBe('forbidden');
        expect(answer(counted)).toEqual(answer(created));
      }
      expect((await call(TOKEN, 'GET', `/v1/sessions/${other.id}`)).body.counts.turns).toBe(1);
    });

    it('refuses a count of inline input alone as POST /v1/responses refuses a stateless response (403)', async () => {
      const own = await conversation();
      const bound = await mint({ scopes: ['session:turn'], session_id: own.id });
      const body = { model: 'echo', input: 'hello' };
      const counted = await call(bound, 'POST', '/v1/responses/input_tokens', body);
      expect(counted.status, JSON.stringify(counted.body)).toBe(403);
      expect(counted.body.error.details).toEqual({ session_id: own.id });
      expect(answer(counted)).toEqual(answer(await call(bound, 'POST', '/v1/responses', { ...body, store: false })));
      expect(answer(counted)).toEqual(answer(await call(bound, 'POST', '/v1/responses', body)));
      // An unbound token counts it.
      expect((await call(TOKEN, 'POST', '/v1/responses/input_tokens', body)).status).toBe(200);
    });
  });

  describe(`${label}: GET /v1/tokens/current`, () => {
    const nothing = { budget: null, usage: null, remaining: null };

    it('answers any token what applies to it, whatever its scopes or binding; no budget: nothing counted', async () => {
      const id = await createSession();
      const poster = await mint({ scopes: ['inbox:write'], session_id: id, ttl_seconds: 600 });
      const answered = await call(poster, 'GET', '/v1/tokens/current');
      expect(answered.status, JSON.stringify(answered.body)).toBe(200);
      const { exp } = JSON.parse(atob(poster.split('.')[1]!.replaceAll('-', '+').replaceAll('_', '/')));
      expect(answered.body).toEqual({
        scopes: ['inbox:write'],
        session_id: id,
        expires_at: new Date(exp * 1000).toISOString(),
        ...nothing,
      });
      const reader = await mint({ scopes: ['session:read'] });
      expect((await call(reader, 'GET', '/v1/tokens/current')).body).toMatchObject({ session_id: null, ...nothing });
      // API_TOKEN and anonymous access are the admin: no binding, expiry nor budget.
      const admin = { scopes: ['admin'], session_id: null, expires_at: null, ...nothing };
      expect((await call(TOKEN, 'GET', '/v1/tokens/current')).body).toEqual(admin);
      const anonymous = await call(null, 'GET', '/v1/tokens/current', undefined, {
        API_TOKEN: undefined,
        TOKEN_SIGNING_KEY: undefined,
        ALLOW_ANONYMOUS: 'true',
      });
      expect(anonymous.status).toBe(200);
      expect(anonymous.body).toEqual(admin);
      // POST /v1/tokens keeps its admin scope.
      expect((await call(reader, 'POST', '/v1/tokens', { scopes: ['session:read'] })).status).toBe(403);
    });

    it('refuses a missing or invalid token (401), and a bound token once revoked', async () => {
      expect((await call(null, 'GET', '/v1/tokens/current')).status).toBe(401);
      expectInvalidToken(await call('not-a-token', 'GET', '/v1/tokens/current'), /not API_TOKEN/);
      const id = await createSession();
      const bound = await mint({ scopes: ['session:read'], session_id: id });
      expect((await call(bound, 'GET', '/v1/tokens/current')).status).toBe(200);
      await call(TOKEN, 'POST', `/v1/sessions/${id}/tokens/revoke`);
      expectInvalidToken(await call(bound, 'GET', '/v1/tokens/current'), /revoked/);
    });
  });

  describe(`${label}: revocation`, () => {
    it('refuses the tokens of a session minted before a revoke with 401, and only those', async () => {
      const id = await createSession();
      const other = await createSession();
      const poster = await mint({ scopes: ['inbox:write'], session_id: id });
      const client = await mint({ scopes: ['session:turn'], session_id: id });
      const bystander = await mint({ scopes: ['session:read'], session_id: other });
      const unbound = await mint({ scopes: ['session:read'] });
      expect((await call(client, 'POST', `/v1/sessions/${id}/turns`, { input: 'hi' })).status).toBe(200);

      expect((await call(client, 'POST', `/v1/sessions/${id}/tokens/revoke`)).status).toBe(403);
      const revoked = await call(TOKEN, 'POST', `/v1/sessions/${id}/tokens/revoke`);
      expect(revoked).toMatchObject({ status: 200, body: { session_id: id, token_generation: 1 } });

      expectInvalidToken(
        await call(poster, 'POST', `/v1/sessions/${id}/inbox`, { name: 'late', content: 'x' }),
        /revoked/,
      );
      expectInvalidToken(await call(client, 'POST', `/v1/sessions/${id}/turns`, { input: 'again' }), /revoked/);
      expectInvalidToken(await call(client, 'GET', `/v1/sessions/${id}`), /revoked/);
      // Nothing was stored by the refused requests.
      const history = await call(TOKEN, 'GET', `/v1/sessions/${id}`);
      expect(history.body.counts.turns).toBe(1);
      expect((await call(TOKEN, 'GET', `/v1/sessions/${id}/inbox`)).body.pending).toEqual([]);

      const fresh = await mint({ scopes: ['session:turn'], session_id: id });
      expect((await call(fresh, 'GET', `/v1/sessions/${id}`)).status).toBe(200);
      expect((await call(bystander, 'GET', `/v1/sessions/${other}`)).status).toBe(200);
      expect((await call(unbound, 'GET', `/v1/sessions/${id}`)).status).toBe(200);
      expect((await call(TOKEN, 'POST', `/v1/sessions/${id}/tokens/revoke`)).body.token_generation).toBe(2);
      expectInvalidToken(await call(fresh, 'GET', `/v1/sessions/${id}/items`), /revoked/);
    });

    it('refuses a token of a deleted session on a session created again with its id (401)', async () => {
      const id = await createSession();
      const client = await mint({ scopes: ['session:turn', 'inbox:read'], session_id: id });
      expect((await call(client, 'GET', `/v1/sessions/${id}`)).status).toBe(200);
      expect((await call(TOKEN, 'DELETE', `/v1/sessions/${id}`)).status).toBe(204);
      expect((await call(TOKEN, 'POST', '/v1/sessions', { id })).status).toBe(201);
      expectInvalidToken(await call(client, 'GET', `/v1/sessions/${id}`), /earlier session with this id/);
      expectInvalidToken(
        await call(client, 'POST', `/v1/sessions/${id}/turns`, { input: 'hi' }),
        /earlier session with this id/,
      );
      expectInvalidToken(await call(client, 'GET', `/v1/sessions/${id}/inbox`), /earlier session with this id/);
      const fresh = await mint({ scopes: ['session:turn'], session_id: id });
      expect((await call(fresh, 'POST', `/v1/sessions/${id}/turns`, { input: 'hi' })).status).toBe(200);
    });

    it('keeps a bound token across a delete of the newest turn (native and facade): same incarnation', async () => {
      const id = await createSession();
      for (const input of ['one', 'two'])
        expect((await call(TOKEN, 'POST', `/v1/sessions/${id}/turns`, { input })).status).toBe(200);
      const client = await mint({ scopes: ['session:turn'], session_id: id });
      const owner = await mint({ scopes: ['admin'], session_id: id });
      // A token minted before incarnations were creation times names the storage generation.
      const generation = (await harness.store.list(`${harness.keyPrefix}sessions/${id}/turn/`)).objects[0]!.key.split(
        '/',
      ).at(-2)!;
      const now = Math.floor(Date.now() / 1000);
      const claims = { scope: 'session:read', session_id: id, gen: 0, inc: generation, iat: now, exp: now + 600 };
      const older = await sign(claims, SIGNING_KEY, 'HS256');
      expect((await call(older, 'GET', `/v1/sessions/${id}`)).status).toBe(200);
      expect((await call(TOKEN, 'DELETE', `/v1/sessions/${id}/turns/2`)).status).toBe(200);
      const read = await call(client, 'GET', `/v1/sessions/${id}`);
      expect(read.status, JSON.stringify(read.body)).toBe(200);
      expect((await call(client, 'POST', `/v1/sessions/${id}/turns`, { input: 'three' })).status).toBe(200);
      expect((await call(older, 'GET', `/v1/sessions/${id}`)).status).toBe(200);
      // The facade's delete of the newest response, by a token bound to the conversation.
      const answered = await call(owner, 'POST', '/v1/responses', { model: 'echo', input: 'four', conversation: id });
      expect(answered.status, JSON.stringify(answered.body)).toBe(200);
      expect((await call(owner, 'DELETE', `/v1/responses/${answered.body.id}`)).status).toBe(200);
      expect((await call(owner, 'GET', `/v1/conversations/${id}`)).status).toBe(200);
      expect((await call(client, 'GET', `/v1/sessions/${id}/items`)).status).toBe(200);
    });

    it('refuses a replayed turn (Idempotency-Key) of a revoked token', async () => {
      const id = await createSession();
      const client = await mint({ scopes: ['session:turn'], session_id: id });
      const send = () =>
        harness.fetch(`/v1/sessions/${id}/turns`, {
          method: 'POST',
          headers: { authorization: `Bearer ${client}`, 'content-type': 'application/json', 'idempotency-key': 'k1' },
          body: JSON.stringify({ input: 'hi' }),
        });
      expect((await send()).status).toBe(200);
      expect((await send()).status).toBe(200);
      await call(TOKEN, 'POST', `/v1/sessions/${id}/tokens/revoke`);
      expect((await send()).status).toBe(401);
    });
  });

  describe(`${label}: the route-by-scope matrix from /openapi.json`, () => {
    async function operations(): Promise<Operation[]> {
      const document = (await call(TOKEN, 'GET', '/openapi.json')).body;
      expect(document.components.securitySchemes.bearer).toEqual({ type: 'http', scheme: 'bearer' });
      const found: Operation[] = [];
      for (const [path, item] of Object.entries(
        document.paths as Record<string, Record<string, { security?: Operation['security'] }>>,
      )) {
        for (const [method, operation] of Object.entries(item)) {
          found.push({
            key: `${method.toUpperCase()} ${path}`,
            method: method.toUpperCase(),
            path,
            security: operation.security,
          });
        }
      }
      return found;
    }

    /**
     * The one scope a route declares (`any`: a bearer with no scope, any token; null: public); a
     * route without one fails the matrix here.
     */
    function declaredScope(operation: Operation): Scope | 'any' | null {
      expect(operation.security, `${operation.key} declares no security`).toBeDefined();
      if (operation.security!.length === 0) return null;
      if (operation.security!.length === 1 && operation.security![0]!.bearer?.length === 0) return 'any';
      const scopes = operation.security!.flatMap((requirement) => requirement.bearer ?? []);
      expect(scopes, `${operation.key} must declare one bearer scope`).toHaveLength(1);
      expect(SCOPES, `${operation.key} declares an unknown scope`).toContain(scopes[0]);
      return scopes[0] as Scope;
    }

    it('declares on every route the scope of the table above', async () => {
      const declared: Record<string, Scope | 'any' | null> = {};
      for (const operation of await operations()) declared[operation.key] = declaredScope(operation);
      expect(declared['GET /healthz']).toBeNull();
      for (const [key, scope] of Object.entries(declared)) {
        if (key === 'GET /healthz') continue;
        expect(EXPECTED_SCOPES[key], `${key} is missing from the scope table of this test`).toBeDefined();
        expect(scope, key).toBe(EXPECTED_SCOPES[key]);
      }
    });

    // Some hundred requests: about 8 s alone, several times that on a loaded machine.
    it('gives each scope, bound to the route session, to another one or to none, the right status class', async () => {
      const failures: string[] = [];
      // A request the token does not allow is refused before the route runs, so those requests
      // share one route session, with tokens bound to it, to another session and to none, minted
      // once per scope. A request the token allows gets a fresh session, so that the route runs
      // on a session no earlier request has changed (or deleted).
      const routeSession = await createSession();
      const otherSession = await createSession();
      const tokens = new Map<string, string>();
      for (const scope of SCOPES) {
        tokens.set(`${scope} own`, await mint({ scopes: [scope], session_id: routeSession }));
        tokens.set(`${scope} other`, await mint({ scopes: [scope], session_id: otherSession }));
        tokens.set(`${scope} none`, await mint({ scopes: [scope] }));
      }
      for (const operation of await operations()) {
        const required = declaredScope(operation);
        if (required === null) {
          if ((await call(null, operation.method, operation.path)).status !== 200)
            failures.push(`${operation.key} is public but refused`);
          continue;
        }
        const sessionRoute =
          operation.path.startsWith('/v1/sessions/{id}') ||
          RESPONSE_ROUTE.test(operation.path) ||
          CONVERSATION_ROUTE.test(operation.path);
        // An operation's requests each run on a session of their own or are refused before the
        // route runs: they are independent, so they run at once.
        const cases = SCOPES.flatMap((scope) =>
          (['own', 'other', 'none'] as const).map((binding) => ({ scope, binding })),
        );
        await Promise.all(
          cases.map(async ({ scope, binding }) => {
            const allowed =
              (required === 'any' || ALLOWS[scope].includes(required)) &&
              (binding === 'none' || (binding === 'own' && sessionRoute) || ANY_BINDING.has(operation.key));
            const id = allowed ? await createSession() : routeSession;
            const token =
              allowed && binding === 'own'
                ? await mint({ scopes: [scope], session_id: id })
                : tokens.get(`${scope} ${binding}`)!;
            const path = concretePath(operation.path, id);
            const sample = SAMPLE_BODIES[operation.key];
            const body = sample
              ? sample()
              : operation.method === 'POST' || operation.method === 'PATCH'
                ? {}
                : undefined;
            const result = await call(token, operation.method, path, body);
            const label =
              `${operation.key} with ${scope} bound to ${binding}: ${result.status} ` +
              `${JSON.stringify(result.body)}`;
            if (!allowed) {
              if (result.status !== 403 || result.body.error.code !== 'forbidden')
                failures.push(`${label}, expected 403`);
            } else if (sample !== undefined || operation.method === 'GET' || operation.method === 'DELETE') {
              if (!((result.status >= 200 && result.status < 300) || result.status === 404))
                failures.push(`${label}, expected 2xx or 404`);
            } else if (result.status === 401 || result.status === 403 || result.status >= 500) {
              failures.push(`${label}, expected the route to run`);
            }
          }),
        );
      }
      expect(failures).toEqual([]);
    }, 120_000);

    it('refuses a revoked token with 401 on every session route', async () => {
      const failures: string[] = [];
      for (const operation of await operations()) {
        if (!operation.path.startsWith('/v1/sessions/{id}')) continue;
        const id = await createSession();
        const token = await mint({ scopes: ['admin'], session_id: id });
        await call(TOKEN, 'POST', `/v1/sessions/${id}/tokens/revoke`);
        const path = operation.path.replace('{id}', id).replace('{name}', '0001-budget.md').replace('{turn}', '1');
        const body =
          SAMPLE_BODIES[operation.key]?.() ??
          (operation.method === 'POST' || operation.method === 'PATCH' ? {} : undefined);
        const result = await call(token, operation.method, path, body);
        if (result.status !== 401 || !/revoked/.test(result.headers.get('www-authenticate') ?? ''))
          failures.push(`${operation.key}: ${result.status} ${JSON.stringify(result.body)}`);
      }
      expect(failures).toEqual([]);
    });
  });
}

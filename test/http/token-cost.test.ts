import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { CountingStore } from '../support/counting-store.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SIGNING_KEY } from './http-suite.ts';

// What a scoped token costs in storage operations, under the turn limits (functions/rate-limit.ts)
// too, and expiry against the service clock.
const TOKEN = 'cost-token';
const environment = { API_TOKEN: TOKEN, TOKEN_SIGNING_KEY: SIGNING_KEY, DEFAULT_MODEL: 'echo' };

function setup() {
  const store = new CountingStore(new MemoryStore());
  let now = new Date('2030-01-01T00:00:00Z');
  const app = createApp({ store: () => store, readEnvironment: (c) => c.env ?? {}, clock: () => now, log: () => {} });
  // Work after the response (packing) is awaited before the next measurement.
  const background: Promise<unknown>[] = [];
  const executionContext = {
    waitUntil: (task: Promise<unknown>) => void background.push(task),
    passThroughOnException: () => {},
    props: {},
  };
  // Settings a test adds to the environment (the turn limits).
  const settings: Record<string, string> = {};
  const call = async (token: string, method: string, path: string, body?: unknown, extra?: Record<string, string>) => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, ...extra };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const response = await app.request(
      path,
      { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) },
      { ...environment, ...settings },
      executionContext,
    );
    return {
      status: response.status,
      body: (await response.json().catch(() => null)) as any,
      headers: response.headers,
    };
  };
  /** The status of one request and its storage operations. */
  const measure = async (...args: Parameters<typeof call>) => {
    await Promise.all(background.splice(0));
    store.reset();
    const result = await call(...args);
    const counts = store.counts;
    await Promise.all(background.splice(0));
    return { result, operations: counts.get + counts.head + counts.put + counts.list + counts.delete };
  };
  const operations = async (...args: Parameters<typeof call>) => {
    const { result, operations } = await measure(...args);
    expect(result.status, JSON.stringify(result.body)).toBeLessThan(300);
    return operations;
  };
  return { call, operations, measure, settings, advance: (ms: number) => (now = new Date(now.getTime() + ms)) };
}

describe('scoped tokens in storage operations', () => {
  it('verify without storage where the route reads the config anyway, and add one read on the inbox', async () => {
    const { call, operations } = setup();
    // One session per token kind with the same history, so each request finds the same state.
    const tokens: Record<string, string> = {};
    for (const kind of ['api', 'unbound', 'bound']) {
      await call(TOKEN, 'POST', '/v1/sessions', { id: kind });
      await call(TOKEN, 'POST', `/v1/sessions/${kind}/turns`, { input: 'hi' });
      const minted = await call(TOKEN, 'POST', '/v1/tokens', {
        scopes: ['admin'],
        ...(kind === 'bound' ? { session_id: kind } : {}),
      });
      tokens[kind] = kind === 'api' ? TOKEN : (minted.body.token as string);
    }
    const measured: Record<string, number[]> = {};
    for (const [method, route, body] of [
      ['GET', '', undefined],
      ['GET', '/items', undefined],
      ['GET', '/prompt', undefined],
      ['POST', '/turns', { input: 'again' }],
      ['POST', '/items', { items: [{ type: 'message', role: 'user', content: 'note' }] }],
      ['GET', '/inbox', undefined],
      ['POST', '/inbox', { name: 'n1', content: 'x' }],
    ] as const) {
      const row = [];
      for (const kind of ['api', 'unbound', 'bound'])
        row.push(await operations(tokens[kind]!, method, `/v1/sessions/${kind}${route}`, body));
      measured[`${method} ${route || '/'}`] = row;
    }
    // [API_TOKEN, unbound token, bound token]: the same, but one config read on inbox routes. A post
    // lists the inbox to count what is pending (MAX_PENDING_NOTICES) before its put. The newest
    // record is this process's, from the record cache (lib/session/log/record-cache.ts), not got.
    expect(measured).toEqual({
      'GET /': [3, 3, 3],
      'GET /items': [3, 3, 3],
      'GET /prompt': [7, 7, 7],
      'POST /turns': [6, 6, 6],
      'POST /items': [4, 4, 4],
      'GET /inbox': [2, 2, 3],
      'POST /inbox': [3, 3, 4],
    });
  });

  it("a budgeted token's turn or run: one get with its reads and one put, the charge, before its answer", async () => {
    const { call, operations } = setup();
    await call(TOKEN, 'POST', '/v1/sessions', { id: 'budgeted' });
    await call(TOKEN, 'POST', '/v1/sessions/budgeted/turns', { input: 'hi' });
    const mint = async (budget?: Record<string, number>) =>
      (await call(TOKEN, 'POST', '/v1/tokens', { scopes: ['session:turn'], ...(budget ? { budget } : {}) })).body
        .token as string;
    const measured: Record<string, number[]> = {};
    for (const [name, path, body] of [
      ['turn', '/v1/sessions/budgeted/turns', { input: 'again' }],
      ['chat', '/v1/chat/completions', { model: 'echo', messages: [{ role: 'user', content: 'hi' }] }],
      ['response', '/v1/responses', { model: 'echo', input: 'hi', store: false }],
    ] as const) {
      const [plain, budgeted] = [await mint(), await mint({ max_turns: 10 })];
      // The first charge creates the record, the next writes over the one read: the same count.
      measured[name] = [
        await operations(plain, 'POST', path, body),
        await operations(budgeted, 'POST', path, body),
        await operations(budgeted, 'POST', path, body),
      ];
    }
    expect(measured).toEqual({ turn: [6, 8, 8], chat: [0, 2, 2], response: [0, 2, 2] });
  });

  it('refuses a token once the service clock passes its expiry', async () => {
    const { call, advance } = setup();
    await call(TOKEN, 'POST', '/v1/sessions', { id: 'expiry' });
    const minted = (
      await call(TOKEN, 'POST', '/v1/tokens', { scopes: ['session:read'], session_id: 'expiry', ttl_seconds: 60 })
    ).body;
    expect(minted.expires_at).toBe('2030-01-01T00:01:00.000Z');
    advance(59_000);
    expect((await call(minted.token, 'GET', '/v1/sessions/expiry')).status).toBe(200);
    advance(1_000);
    const expired = await call(minted.token, 'GET', '/v1/sessions/expiry');
    expect(expired.status).toBe(401);
    expect(expired.headers.get('www-authenticate')).toBe(
      'Bearer error="invalid_token", error_description="the token expired at 2030-01-01T00:01:00.000Z"',
    );
  });
});

describe('the turn limits in storage operations', () => {
  const KINDS = ['api', 'unbound', 'bound'] as const;
  /** A session per token kind, each with a turn, and a token of each kind (bound: to its session). */
  const tokensFor = async (call: ReturnType<typeof setup>['call'], prefix: string) => {
    const tokens: Record<string, string> = {};
    for (const kind of KINDS) {
      const id = `${prefix}-${kind}`;
      await call(TOKEN, 'POST', '/v1/sessions', { id });
      await call(TOKEN, 'POST', `/v1/sessions/${id}/turns`, { input: 'hi' });
      const minted = await call(TOKEN, 'POST', '/v1/tokens', {
        scopes: ['session:turn', 'session:read'],
        ...(kind === 'bound' ? { session_id: id } : {}),
      });
      tokens[kind] = kind === 'api' ? TOKEN : (minted.body.token as string);
    }
    return tokens;
  };

  it('either limit adds one config read for a bound token only (its revocation check)', async () => {
    const { call, operations, settings } = setup();
    const tokens = await tokensFor(call, 'cost');
    const sends = {
      turn: (id: string) => [`/v1/sessions/${id}/turns`, { input: 'again' }] as const,
      keyed: (id: string) => [`/v1/sessions/${id}/turns`, { input: 'keyed' }] as const,
      response: (id: string) => ['/v1/responses', { model: 'echo', input: 'hi', conversation: id }] as const,
    };
    const measured: Record<string, Record<string, number[]>> = {};
    let key = 0;
    for (const [limit, limits] of Object.entries({
      none: {},
      token: { RATE_LIMIT_TURNS_PER_MINUTE_PER_TOKEN: '1000' },
      session: { RATE_LIMIT_TURNS_PER_MINUTE_PER_SESSION: '1000' },
    })) {
      Object.assign(settings, limits);
      measured[limit] = {};
      for (const [name, send] of Object.entries(sends)) {
        const row: number[] = [];
        for (const kind of KINDS) {
          const [path, body] = send(`cost-${kind}`);
          const headers = name === 'keyed' ? { 'idempotency-key': `k${key++}` } : {};
          row.push(await operations(tokens[kind]!, 'POST', path, body, headers));
        }
        measured[limit]![name] = row;
      }
      for (const name of Object.keys(limits)) delete settings[name];
    }
    for (const [name, [api, unbound, bound]] of Object.entries(measured.none!)) {
      expect(measured.token![name], name).toEqual([api, unbound, bound! + 1]);
      expect(measured.session![name], name).toEqual([api, unbound, bound! + 1]);
    }
  });

  it("a turn over a limit (429) does no storage work, but for a bound token's config read", async () => {
    const { call, measure, settings } = setup();
    const tokens = await tokensFor(call, 'over');
    for (const [per, limits] of Object.entries({
      token: { RATE_LIMIT_TURNS_PER_MINUTE_PER_TOKEN: '1' },
      session: { RATE_LIMIT_TURNS_PER_MINUTE_PER_SESSION: '1' },
    })) {
      Object.assign(settings, limits);
      const counted: number[] = [];
      for (const kind of KINDS) {
        const path = `/v1/sessions/over-${kind}/turns`;
        expect((await call(tokens[kind]!, 'POST', path, { input: `${per} 1` })).status).toBe(200);
        const refused = await measure(tokens[kind]!, 'POST', path, { input: `${per} 2` });
        expect(refused.result.status, `${per} ${kind}`).toBe(429);
        counted.push(refused.operations);
      }
      // Either limit reads a bound token's session config (its revocation check) first: a token's
      // limit is shared by the tokens of its budget, which a revoked one must not spend.
      expect(counted, per).toEqual([0, 0, 1]);
      for (const name of Object.keys(limits)) delete settings[name];
    }
  });
});

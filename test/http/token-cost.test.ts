import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { CountingStore } from '../support/counting-store.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SIGNING_KEY } from './http-suite.ts';

// What a scoped token costs in storage operations, and expiry against the service clock.
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
  const call = async (token: string, method: string, path: string, body?: unknown) => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const response = await app.request(
      path,
      { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) },
      environment,
      executionContext,
    );
    return {
      status: response.status,
      body: (await response.json().catch(() => null)) as any,
      headers: response.headers,
    };
  };
  const operations = async (token: string, method: string, path: string, body?: unknown) => {
    await Promise.all(background.splice(0));
    store.reset();
    const result = await call(token, method, path, body);
    const counts = store.counts;
    await Promise.all(background.splice(0));
    expect(result.status, JSON.stringify(result.body)).toBeLessThan(300);
    return counts.get + counts.head + counts.put + counts.list + counts.delete;
  };
  return { call, operations, advance: (ms: number) => (now = new Date(now.getTime() + ms)) };
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
    // lists the inbox to count what is pending (MAX_PENDING_NOTICES) before its put.
    expect(measured).toEqual({
      'GET /': [4, 4, 4],
      'GET /items': [4, 4, 4],
      'GET /prompt': [9, 9, 9],
      'POST /turns': [7, 7, 7],
      'POST /items': [5, 5, 5],
      'GET /inbox': [2, 2, 3],
      'POST /inbox': [3, 3, 4],
    });
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

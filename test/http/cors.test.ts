import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { CORS_REQUEST_HEADERS } from '../../functions/cors.ts';
import { MemoryStore } from '../../lib/store/memory.ts';

// CORS_ORIGINS (docs/CONFIGURATION.md): a page on an allowed origin may call the API, its
// preflight answered before auth; unset, nothing changes (docs/API.md, "Browsers").
const TOKEN = 'cors-token';
const PAGE = 'https://app.example.com';
const STRANGER = 'https://elsewhere.example.com';

function appWith(env: Record<string, string>) {
  const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', ...env };
  const store = new MemoryStore();
  return createApp({ store: () => store, readEnvironment: () => environment, log: () => {}, logLine: () => {} });
}

/** A browser's preflight of a POST /v1/responses from `origin` with the official client's headers. */
function preflight(app: ReturnType<typeof appWith>, origin: string) {
  return app.request('/v1/responses', {
    method: 'OPTIONS',
    headers: {
      origin,
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'authorization,content-type,x-stainless-os,x-stainless-retry-count',
    },
  });
}

/** The POST the preflight was for, from `origin`, with `token`. */
function create(app: ReturnType<typeof appWith>, origin: string, token = TOKEN) {
  return app.request('/v1/responses', {
    method: 'POST',
    headers: { origin, authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'echo', input: 'hi' }),
  });
}

const corsHeaders = (response: Response) =>
  [...response.headers.keys()].filter((name) => name.startsWith('access-control-'));

describe('CORS_ORIGINS', () => {
  it('unset: a preflight is refused as any OPTIONS and no answer carries a CORS header', async () => {
    const app = appWith({});
    const answered = await preflight(app, PAGE);
    // Auth comes first: a request without a token is a 401 (a 404 with anonymous access).
    expect(answered.status).toBe(401);
    expect((await preflight(appWith({ API_TOKEN: '', ALLOW_ANONYMOUS: 'true' }), PAGE)).status).toBe(404);
    expect(corsHeaders(answered)).toEqual([]);
    const created = await create(app, PAGE);
    expect(created.status).toBe(200);
    expect(corsHeaders(created)).toEqual([]);
    expect(created.headers.get('vary')).toBeNull();
  });

  it("answers an allowed origin's preflight 204 with the methods and headers, before auth", async () => {
    const app = appWith({ CORS_ORIGINS: `${PAGE}, https://other.example.com:8443` });
    const answered = await preflight(app, PAGE);
    expect(answered.status).toBe(204);
    expect(answered.headers.get('access-control-allow-origin')).toBe(PAGE);
    expect(answered.headers.get('access-control-allow-methods')?.split(',')).toEqual(
      expect.arrayContaining(['GET', 'POST', 'PATCH', 'DELETE']),
    );
    const allowed = answered.headers.get('access-control-allow-headers')!.toLowerCase().split(',');
    for (const name of [
      'authorization',
      'content-type',
      'idempotency-key',
      'x-stainless-os',
      'x-stainless-retry-count',
    ])
      expect(allowed).toContain(name);
    expect(answered.headers.get('vary')).toContain('Origin');
    expect(answered.headers.get('x-request-id')).toMatch(/^req_/);
  });

  it("lets an allowed origin read an answer and its headers, an error's too", async () => {
    const app = appWith({ CORS_ORIGINS: PAGE });
    const created = await create(app, PAGE);
    expect(created.status).toBe(200);
    expect(created.headers.get('access-control-allow-origin')).toBe(PAGE);
    const exposed = created.headers.get('access-control-expose-headers')!.toLowerCase().split(',');
    for (const name of ['x-request-id', 'retry-after', 'retry-after-ms', 'x-should-retry', 'tailgate-max-body-bytes'])
      expect(exposed).toContain(name);
    expect(created.headers.get('vary')).toContain('Origin');

    const refused = await create(app, PAGE, 'wrong');
    expect(refused.status).toBe(401);
    expect(refused.headers.get('access-control-allow-origin')).toBe(PAGE);
  });

  it('lets an allowed origin read a 405 and its Allow', async () => {
    const app = appWith({ CORS_ORIGINS: PAGE });
    const refused = await app.request('/v1/responses', {
      method: 'DELETE',
      headers: { origin: PAGE, authorization: `Bearer ${TOKEN}` },
    });
    expect(refused.status).toBe(405);
    expect(refused.headers.get('allow')).toBe('POST');
    expect(refused.headers.get('access-control-allow-origin')).toBe(PAGE);
    expect(refused.headers.get('access-control-expose-headers')!.toLowerCase().split(',')).toContain('allow');
    expect(refused.headers.get('vary')).toContain('Origin');
  });

  it('allows no other origin: its preflight and answers carry no Allow-Origin', async () => {
    const app = appWith({ CORS_ORIGINS: PAGE });
    const answered = await preflight(app, STRANGER);
    expect(answered.headers.get('access-control-allow-origin')).toBeNull();
    const created = await create(app, STRANGER);
    expect(created.status).toBe(200);
    expect(created.headers.get('access-control-allow-origin')).toBeNull();
    // A cache keeps the answer apart from the listed origin's (docs/API.md, "Browsers").
    expect(created.headers.get('vary')).toContain('Origin');
    const unnamed = await app.request('/v1/sessions', { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(unnamed.headers.get('vary')).toContain('Origin');
  });

  it('"*" allows every origin', async () => {
    const app = appWith({ CORS_ORIGINS: '*' });
    expect((await preflight(app, STRANGER)).headers.get('access-control-allow-origin')).toBe('*');
    expect((await create(app, STRANGER)).headers.get('access-control-allow-origin')).toBe('*');
  });

  it('allows every header the official client sends (those a browser asks a preflight for)', async () => {
    let sent: Headers | undefined;
    const client = new OpenAI({
      apiKey: TOKEN,
      organization: 'org',
      project: 'project',
      baseURL: 'http://tailgate.test/v1',
      maxRetries: 0,
      fetch: async (_url: string | URL | Request, init?: RequestInit) => {
        sent = new Headers(init?.headers);
        return Response.json(
          { error: { message: 'no', type: 'invalid_request_error', code: null, param: null } },
          { status: 400 },
        );
      },
    });
    await client.responses.create({ model: 'echo', input: 'hi' }).catch(() => undefined);
    // Accept is CORS-safelisted; a browser sends its own User-Agent.
    const asked = [...sent!.keys()].filter((name) => name !== 'accept' && name !== 'user-agent');
    expect(asked).toContain('x-stainless-retry-count');
    expect(CORS_REQUEST_HEADERS.map((name) => name.toLowerCase())).toEqual(expect.arrayContaining(asked));
  });
});

describe('anonymous access and other sites', () => {
  // A page the developer has open may send a POST without a body to a local service without a
  // preflight: anonymous access would take it as the admin (docs/SECURITY.md).
  const anonymous = (env: Record<string, string> = {}) => appWith({ API_TOKEN: '', ALLOW_ANONYMOUS: 'true', ...env });
  const converse = (app: ReturnType<typeof appWith>, origin?: string) =>
    app.request('http://127.0.0.1:8787/v1/conversations', {
      method: 'POST',
      headers: origin === undefined ? {} : { origin },
    });
  const created = async (app: ReturnType<typeof appWith>) => {
    const response = await app.request('http://127.0.0.1:8787/v1/sessions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: 's1' }),
    });
    expect(response.status).toBe(201);
    return app;
  };

  it("refuses a request that changes something from another site's page, before it runs", async () => {
    const app = await created(anonymous());
    for (const origin of [STRANGER, 'null', 'http://127.0.0.1:9999']) {
      const refused = await converse(app, origin);
      expect(refused.status, origin).toBe(403);
      const body = (await refused.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('forbidden');
      expect(body.error.message).toContain('ALLOW_ANONYMOUS');
    }
    const listed = await app.request('http://127.0.0.1:8787/v1/sessions');
    expect(((await listed.json()) as { sessions: unknown[] }).sessions).toHaveLength(1);
  });

  it('takes one from its own origin, from one of CORS_ORIGINS or without an Origin, and reads from any', async () => {
    const app = await created(anonymous({ CORS_ORIGINS: PAGE }));
    expect((await converse(app, 'http://127.0.0.1:8787')).status).toBe(200);
    expect((await converse(app, PAGE)).status).toBe(200);
    expect((await converse(app)).status).toBe(200);
    const read = await app.request('http://127.0.0.1:8787/v1/sessions/s1', { headers: { origin: STRANGER } });
    expect(read.status).toBe(200);
  });

  it("refuses one without an Origin that the browser says comes from another site's page", async () => {
    const app = await created(anonymous());
    for (const site of ['cross-site', 'same-site']) {
      const refused = await app.request('http://127.0.0.1:8787/v1/conversations', {
        method: 'POST',
        headers: { 'sec-fetch-site': site },
      });
      expect(refused.status, site).toBe(403);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('forbidden');
    }
    for (const site of ['same-origin', 'none']) {
      const taken = await app.request('http://127.0.0.1:8787/v1/conversations', {
        method: 'POST',
        headers: { 'sec-fetch-site': site },
      });
      expect(taken.status, site).toBe(200);
    }
  });

  it('refuses a request to a public name, which a page can point at this machine (DNS rebinding)', async () => {
    const app = await created(anonymous());
    for (const host of ['rebind.attacker.example', '127.0.0.1.nip.io', 'localhost.attacker.example', 'EVIL.example.']) {
      const refused = await app.request(`http://${host}:8787/v1/sessions/s1`);
      expect(refused.status, host).toBe(403);
      const body = (await refused.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('forbidden');
      expect(body.error.message).toContain('API_TOKEN');
    }
    // The pages need no data: the inspector's is served whatever the name.
    expect((await app.request('http://rebind.attacker.example:8787/ui')).status).toBe(200);
  });

  it('takes a request to an address, localhost or a name no public DNS hands out', async () => {
    const app = await created(anonymous());
    const hosts = ['127.0.0.1', '[::1]', '192.168.1.20', 'localhost', 'app.localhost', 'devbox', 'devbox.local'];
    for (const host of [...hosts, 'tailgate.test', 'devbox.internal', 'devbox.home.arpa', 'LocalHost.']) {
      expect((await app.request(`http://${host}:8787/v1/sessions/s1`)).status, host).toBe(200);
    }
  });

  it('leaves a token holder alone: the token is what a page cannot send', async () => {
    const app = appWith({});
    expect((await create(app, STRANGER)).status).toBe(200);
    const named = await app.request('https://tailgate.example.com/v1/sessions', {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(named.status).toBe(200);
  });
});

import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { Metrics } from '../../functions/metrics.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, TOKEN } from './http-suite.ts';

// A path the API serves, asked with a method it does not serve, is a 405 `method_not_allowed`
// in the API's error JSON with `Allow` naming the methods it serves (docs/API.md, "Errors"); an
// unknown path stays a 404, and OPTIONS and HEAD (of a GET) are answered as before.
const harness = appHarness(new MemoryStore(), { API_TOKEN: TOKEN, ALLOW_ANONYMOUS: 'false', DEFAULT_MODEL: 'echo' });
const api = createClient(harness);

describe('a method a known path does not serve', () => {
  it("is a 405 naming the path's methods in Allow, in OpenAI's shape under its paths", async () => {
    const put = await api.call('PUT', '/v1/responses', {});
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('POST');
    expect(put.body.error).toEqual({
      message: 'PUT is not allowed on /v1/responses (it takes POST)',
      type: 'invalid_request_error',
      param: null,
      code: 'method_not_allowed',
      details: { allow: ['POST'] },
    });
    // A concrete path of the OpenAI family is its own, not a response id.
    const compact = await api.call('DELETE', '/v1/responses/compact');
    expect(compact.status).toBe(405);
    expect(compact.headers.get('allow')).toBe('POST');
    expect(compact.body.error).toMatchObject({ code: 'method_not_allowed', type: 'invalid_request_error' });
    const models = await api.call('POST', '/v1/models');
    expect(models.status).toBe(405);
    expect(models.headers.get('allow')).toBe('GET, HEAD');
  });

  it("is a 405 in tailgate's shape under its own paths", async () => {
    const id = await api.session();
    const put = await api.call('PUT', `/v1/sessions/${id}`, {});
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('GET, HEAD, PATCH, DELETE');
    expect(put.body.error).toEqual({
      code: 'method_not_allowed',
      message: `PUT is not allowed on /v1/sessions/${id} (it takes GET, HEAD, PATCH, DELETE)`,
      details: { allow: ['GET', 'HEAD', 'PATCH', 'DELETE'] },
    });
    const sessions = await api.call('DELETE', '/v1/sessions');
    expect(sessions.status).toBe(405);
    expect(sessions.headers.get('allow')).toBe('GET, HEAD, POST');
    // A session may be named as a concrete path is: its own routes still read it.
    expect((await api.post('/v1/sessions', { id: 'import' })).status).toBe(201);
    expect((await api.get('/v1/sessions/import')).body.id).toBe('import');
    expect((await api.call('PUT', '/v1/sessions/import')).headers.get('allow')).toBe('GET, HEAD, POST, PATCH, DELETE');
  });

  it('leaves unknown paths at 404, and OPTIONS and HEAD as they were', async () => {
    expect((await api.call('PUT', '/v1/nothing')).status).toBe(404);
    expect((await api.call('GET', '/v1/nothing')).body.error.code).toBe('not_found');
    expect((await api.call('PUT', '/v1/sessions/s1/nothing')).status).toBe(404);
    const options = await api.call('OPTIONS', '/v1/responses');
    expect(options.status).toBe(404);
    const head = await harness.fetch('/v1/sessions', { method: 'HEAD', headers: { authorization: `Bearer ${TOKEN}` } });
    expect(head.status).toBe(200);
    expect(await head.text()).toBe('');
  });

  it('is answered to any caller, before the token is checked', async () => {
    const answer = await harness.fetch('/v1/responses', { method: 'PUT' });
    expect(answer.status).toBe(405);
    expect(answer.headers.get('allow')).toBe('POST');
  });

  it('is answered while the settings do not parse, which every request it could run answers 503', async () => {
    const broken = appHarness(new MemoryStore(), { API_TOKEN: TOKEN, MAX_BODY_BYTES: 'lots', DEFAULT_MODEL: 'echo' });
    const put = await broken.fetch('/v1/responses', { method: 'PUT' });
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('POST');
    expect(((await put.json()) as any).error).toMatchObject({
      code: 'method_not_allowed',
      details: { allow: ['POST'] },
    });
    const post = await broken.fetch('/healthz', { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    await post.body?.cancel();
    for (const [method, path] of [
      ['POST', '/v1/responses'],
      ['GET', '/healthz'],
      ['GET', '/v1/sessions/s1'],
      ['OPTIONS', '/v1/nothing'],
    ] as const) {
      const answer = await broken.fetch(path, { method, headers: { authorization: `Bearer ${TOKEN}` } });
      expect(answer.status, `${method} ${path}`).toBe(503);
      expect(((await answer.json()) as any).error).toMatchObject({
        code: 'not_configured',
        details: { variable: 'MAX_BODY_BYTES' },
      });
    }
  });
});

// A Worker serves no /metrics (docs/API.md, "Service"): its 404 saying so answers every method,
// where a 405 naming GET would send the caller to that 404.
describe("a Worker's /metrics", () => {
  it('is a 404 whatever the method, never a 405 naming GET', async () => {
    const store = new MemoryStore();
    const app = createApp({ store: () => store, log: () => {}, logLine: () => {}, tokenSetting: 'workers' });
    for (const environment of [{ API_TOKEN: TOKEN }, { API_TOKEN: TOKEN, MAX_BODY_BYTES: 'lots' }])
      for (const method of ['GET', 'HEAD', 'POST', 'PUT', 'DELETE']) {
        const answer = await app.request('/metrics', { method }, environment);
        expect(answer.status, `${method} /metrics`).toBe(404);
        expect(answer.headers.get('allow'), `${method} /metrics`).toBeNull();
        await answer.body?.cancel();
      }
  });
});

// An unknown path is a 404 `not_found` whatever the settings, as a method its path does not take
// is a 405: decided from the routes alone (docs/API.md, "Errors").
describe('a path no route serves, while the settings do not parse', () => {
  const broken = appHarness(new MemoryStore(), { API_TOKEN: TOKEN, MAX_BODY_BYTES: 'lots', DEFAULT_MODEL: 'echo' });
  const answer = async (method: string, path: string) => {
    const response = await broken.fetch(path, { method, headers: { authorization: `Bearer ${TOKEN}` } });
    return { status: response.status, error: ((await response.json()) as any).error };
  };

  it("is a 404 not_found, in tailgate's shape under its own paths and elsewhere", async () => {
    for (const [method, path] of [
      ['GET', '/nothing'],
      ['PUT', '/v1/sessions/s1/nothing'],
      ['POST', '/v1/tokens/t1/nothing'],
    ] as const)
      expect(await answer(method, path), `${method} ${path}`).toEqual({
        status: 404,
        error: { code: 'not_found', message: `no route for ${method} ${path}` },
      });
  });

  it("is a 404 in OpenAI's shape under its paths", async () => {
    for (const [method, path] of [
      ['GET', '/v1/nothing'],
      ['PUT', '/v1/nothing'],
      ['DELETE', '/v1/responses/r1/nothing'],
    ] as const)
      expect(await answer(method, path), `${method} ${path}`).toEqual({
        status: 404,
        error: {
          message: `no route for ${method} ${path}`,
          type: 'invalid_request_error',
          param: null,
          code: 'not_found',
        },
      });
  });
});

// Every route an app registers, whichever entry builds it (Node and Deno bring /metrics and the
// scripts of /docs and /ui; Workers neither), is served with its method, and HEAD with GET: the
// 405 answers only what no route serves.
describe('every registered route', () => {
  it.each([
    ['Node and Deno', { metrics: new Metrics(), docsScript: script, inspectorScript: script }],
    ['Workers', { tokenSetting: 'workers' as const }],
  ])('%s: is answered with its method, never 405', async (_entry, options) => {
    const store = new MemoryStore();
    const app = createApp({ store: () => store, log: () => {}, logLine: () => {}, ...options });
    const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', METRICS_TOKEN: 'metrics' };
    const routes = app.routes.filter((route) => route.method !== 'ALL');
    expect(routes.map((route) => route.path)).toEqual(expect.arrayContaining(['/healthz', '/docs', '/ui']));
    for (const route of routes) {
      const path = route.path.replaceAll(/:[a-z_0-9]+/g, 'x1');
      for (const method of route.method === 'GET' ? ['GET', 'HEAD'] : [route.method]) {
        const answer = await app.request(path, { method }, environment);
        expect(answer.status, `${method} ${route.path}`).not.toBe(405);
        await answer.body?.cancel();
      }
    }
  });
});

async function script(): Promise<Uint8Array<ArrayBuffer>> {
  return new Uint8Array(new ArrayBuffer(0));
}

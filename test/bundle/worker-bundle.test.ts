import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningServer, SLOW_SERVER_START_MS, startHookTimeout, startServer } from '../support/server-process.ts';
import { type OtlpReceiver, startOtlpReceiver } from '../support/otlp-receiver.ts';
import { type FakeProvider, fixture, startFakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';

// The Worker as `npm run build` bundled it into dist/ (wrangler.toml's [alias] applied, with
// esbuild's metafile), served unbundled again by wrangler dev in workerd. .ci/run builds, then
// runs this (`npm run test:bundle`).
const root = fileURLToPath(new URL('../..', import.meta.url));
const directory = join(root, 'dist');
/** wrangler dev's local state: outside the served directory, which wrangler dev watches. */
let state: string;
let worker: RunningServer;
/** Where the served Worker exports its turns' spans (OTEL_EXPORTER_OTLP_ENDPOINT). */
let receiver: OtlpReceiver;
/** The Anthropic Messages API the served Worker's `anthropic:` models call (ANTHROPIC_BASE_URL). */
let anthropic: FakeProvider;

/** The settings of the served Worker (`--env local` with the `--var`s below), for the app in this process. */
const WORKER_SETTINGS = { ALLOW_ANONYMOUS: 'true', API_TOKEN: 'bundle-token', PUBLIC_DOCS: 'false' };

/** What a client sees of a response but for what differs from one response to the next, or is the transport's. */
async function seen(response: Response) {
  const headers = Object.fromEntries(
    [...response.headers].filter(
      ([name]) => !/^(date|x-request-id|content-length|connection|keep-alive|transfer-encoding)$/.test(name),
    ),
  );
  expect(response.headers.get('x-request-id')).toMatch(/^req_[0-9a-f]{24}$/);
  return { status: response.status, headers, body: await response.text() };
}

/**
 * Each request answered by the served Worker and by `local` (the same app in this process),
 * compared by what a client sees: uncompressed, as the app in this process answers (workerd
 * gzips for a client that takes it), a redirect's location relative, and `normalize` applied.
 */
async function expectSameAnswers(
  local: ReturnType<typeof createApp>,
  requests: [string, string, Record<string, string>?][],
  normalize: (answer: Awaited<ReturnType<typeof seen>>) => void = () => {},
) {
  for (const [method, path, headers] of requests) {
    const served = await fetch(`${worker.origin}${path}`, {
      method,
      headers: { 'accept-encoding': 'identity', ...headers },
      redirect: 'manual',
    });
    const inProcess = await local.request(`http://localhost${path}`, { method, headers: { ...headers } });
    const expected = await seen(inProcess);
    if (expected.headers.location)
      expected.headers.location = expected.headers.location.replace('http://localhost', '');
    const actual = await seen(served);
    if (actual.headers.location) actual.headers.location = actual.headers.location.replace(worker.origin, '');
    normalize(expected);
    normalize(actual);
    expect(actual, `${method} ${path}`).toEqual(expected);
  }
}

/** The built Worker's esbuild metafile: each module bundled, with what it imports. */
async function bundledModules(): Promise<Record<string, { imports: { path: string }[] }>> {
  const meta = JSON.parse(await readFile(join(directory, 'meta.json'), 'utf8')) as {
    inputs: Record<string, { imports: { path: string }[] }>;
  };
  return meta.inputs;
}

beforeAll(
  async () => {
    if (!existsSync(join(directory, 'worker.js')) || !existsSync(join(directory, 'meta.json')))
      throw new Error('dist/ holds no build: run npm run build first');
    state = await mkdtemp(join(tmpdir(), 'tailgate-worker-state-'));
    receiver = await startOtlpReceiver();
    anthropic = await startFakeProvider((request) =>
      request.body?.stream
        ? { sse: fixture('anthropic-message-text.sse') }
        : { json: JSON.parse(fixture('anthropic-message-text.json')) },
    );
    // A stale OpenAPI document where `npm run assets` writes the Worker's: wrangler's build
    // (wrangler.toml [build]) writes it again before it serves the Worker, as before a deploy; the
    // comparison of /openapi.json with the app in this process below fails if it did not.
    await writeFile(join(root, '.assets/openapi/worker.json'), JSON.stringify({ openapi: '3.0.3', stale: true }));
    const wrangler = join(root, 'node_modules/.bin/wrangler');
    worker = await startServer(
      wrangler,
      ['dev', join(directory, 'worker.js'), '--no-bundle', '--config', join(root, 'wrangler.toml'), '--env', 'local']
        .concat(['--local', '--ip', '127.0.0.1', '--port', '0', '--persist-to', state])
        .concat(['--var', 'API_TOKEN:bundle-token', '--var', `OTEL_EXPORTER_OTLP_ENDPOINT:${receiver.endpoint}`])
        .concat(['--var', 'PUBLIC_DOCS:false'])
        .concat(['--var', 'ANTHROPIC_API_KEY:bundle-key', '--var', `ANTHROPIC_BASE_URL:${anthropic.baseURL}`]),
      { cwd: root, env: { WRANGLER_SEND_METRICS: 'false', CI: '1' }, timeoutMs: SLOW_SERVER_START_MS },
    );
  },
  startHookTimeout(SLOW_SERVER_START_MS, 75_000),
);
afterAll(async () => {
  await worker?.stop();
  await receiver?.close();
  await anthropic?.close();
  await rm(state, { recursive: true, force: true });
});

describe('the built Worker', () => {
  it("bundles zod's English messages and no other language", async () => {
    const meta = JSON.parse(await readFile(join(directory, 'meta.json'), 'utf8')) as {
      inputs: Record<string, unknown>;
    };
    const locales = Object.keys(meta.inputs).filter((path) => /zod\/v4\/locales\//.test(path));
    expect(locales.map((path) => path.replace(/.*zod\/v4\/locales\//, ''))).toEqual(['en.js']);
  });

  it('answers a bad body with a 400 whose message is readable English', async () => {
    const response = await fetch(`${worker.origin}/v1/tokens`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer bundle-token' },
      body: JSON.stringify({ scopes: ['admin'], ttl_seconds: 'long' }),
    });
    expect(response.status, worker.output()).toBe(400);
    const body = (await response.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('invalid_request');
    expect(body.error.message).toMatch(/ttl_seconds.*Invalid input: expected number, received string/);

    const openai = await fetch(`${worker.origin}/v1/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer bundle-token' },
      body: JSON.stringify({
        model: 'echo',
        input: 'hi',
        context_management: [{ type: 'compaction', compact_threshold: 0 }],
      }),
    });
    expect(openai.status).toBe(400);
    const refused = (await openai.json()) as { error: { param: string; message: string } };
    expect(refused.error.param).toBe('context_management[0].compact_threshold');
    expect(refused.error.message).toMatch(/Too small: expected number to be >=1/);
  });

  it("exports a turn's spans with the OTLP exporter's fetch build", async () => {
    const meta = JSON.parse(await readFile(join(directory, 'meta.json'), 'utf8')) as {
      inputs: Record<string, unknown>;
    };
    const exporter = Object.keys(meta.inputs).filter((path) => /exporter-trace-otlp-http\/dist\/platform\//.test(path));
    // The browser build sends with fetch; the node one (node:http) is not in the bundle.
    expect([...new Set(exporter.map((path) => path.replace(/.*\/dist\/platform\/([^/]+)\/.*/, '$1')))]).toEqual([
      'browser',
    ]);
    const id = `bundle-trace-${Date.now()}`;
    const headers = { 'content-type': 'application/json', authorization: 'Bearer bundle-token' };
    const post = (path: string, body: unknown) =>
      fetch(`${worker.origin}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
    expect((await post('/v1/sessions', { id })).status, worker.output()).toBe(201);
    expect((await post(`/v1/sessions/${id}/turns`, { input: 'traced' })).status).toBe(200);
    await expect
      .poll(() => receiver.spans().filter((span) => span.attributes['gen_ai.conversation.id'] === id).length, {
        timeout: 20_000,
        interval: 100,
      })
      .toBe(1);
  });

  it('leaves out the modules only Node and Deno or no caller use', async () => {
    const paths = Object.keys(await bundledModules()).map((path) => path.replace(/.*node_modules\//, ''));
    // Of hono's middleware only hono/cors (functions/cors.ts, CORS_ORIGINS); not hono/jwt's,
    // whose `Jwt` object would keep verifyWithJwks and decode (functions/tokens.ts imports hono's
    // JWT functions themselves).
    const middleware = paths.filter((path) => path.startsWith('hono/dist/middleware/'));
    expect(middleware).toEqual(['hono/dist/middleware/cors/index.js']);
    // GET /metrics, which the Node and Deno servers' metrics (functions/metrics.ts) bring.
    expect(paths.filter((path) => /^functions\/(routes\/)?metrics\.ts$/.test(path))).toEqual([]);
  });

  it('answers a turn of an anthropic: model without the modules wrangler.toml [alias] leaves out', async () => {
    const modules = await bundledModules();
    const paths = Object.keys(modules);
    const leftOut =
      /provider-utils\/dist\/experimental-|zod\/v4\/core\/compile\.js|zod\/v4\/classic\/from-json-schema\.js/;
    expect(paths.filter((path) => leftOut.test(path))).toEqual([]);
    // The Messages model from @ai-sdk/anthropic's internal entry (lib/models/anthropic-messages.ts),
    // without the provider `createAnthropic` makes (its batches, files, skills and tools).
    expect(
      paths.filter((path) => path.includes('@ai-sdk/anthropic/')).map((path) => path.replace(/.*node_modules\//, '')),
    ).toEqual(['@ai-sdk/anthropic/dist/internal/index.js']);
    // A stand-in is reached only through the import it was put in place of.
    const importers = (standIn: string) =>
      Object.entries(modules)
        .filter(([, module]) => module.imports.some((imported) => imported.path === standIn))
        .map(([path]) => path.replace(/.*node_modules\//, ''));
    expect(importers('functions/zod-compile.ts')).toEqual(['zod/v4/core/index.js']);
    expect(importers('functions/zod-from-json-schema.ts')).toEqual(['zod/v4/classic/external.js']);
    expect(importers('functions/otel-no-metrics.ts').sort()).toEqual([
      '@opentelemetry/otlp-exporter-base/dist/index.mjs',
      '@opentelemetry/otlp-exporter-base/dist/platform/browser/configuration/create-legacy-browser-delegate.mjs',
      '@opentelemetry/sdk-trace/dist/Tracer.mjs',
      '@opentelemetry/sdk-trace/dist/export/BatchSpanProcessorBase.mjs',
      '@opentelemetry/sdk-trace/dist/export/SimpleSpanProcessor.mjs',
    ]);
    expect(paths.filter((path) => /\/(Tracer|SpanProcessor|Exporter)Metrics\.mjs$/.test(path))).toEqual([]);

    const headers = { 'content-type': 'application/json', authorization: 'Bearer bundle-token' };
    const post = (path: string, body: unknown) =>
      fetch(`${worker.origin}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
    const id = `bundle-anthropic-${Date.now()}`;
    expect((await post('/v1/sessions', { id, model: 'anthropic:claude-sonnet-4-5' })).status, worker.output()).toBe(
      201,
    );
    const turn = await post(`/v1/sessions/${id}/turns`, { input: 'Who are you?' });
    const answered = (await turn.json()) as { output: unknown[] };
    expect(turn.status, JSON.stringify(answered)).toBe(200);
    expect(answered.output).toEqual([
      { type: 'message', role: 'assistant', content: 'Hi! My name is Claude.', seq: expect.any(Number) },
    ]);
    expect(anthropic.requests.at(-1)!.headers['x-api-key']).toBe('bundle-key');
  });

  it("answers the inspector's page, stylesheet and icon as Node and Deno do, read from its assets", async () => {
    // The page, stylesheet and icon are static assets (.assets/ui/, `npm run assets`) the Worker
    // reads through its ASSETS binding (wrangler.toml [assets], functions/ui/inspector-assets.ts),
    // not modules of its bundle.
    const paths = Object.keys(await bundledModules());
    expect(paths.filter((path) => /^functions\/ui\/(page|styles|inspector-files)\.ts$/.test(path))).toEqual([]);
    // The same app in this process, with the modules themselves, and the served Worker's settings.
    const local = createApp({
      store: () => {
        throw new Error('the inspector reads no store');
      },
      readEnvironment: () => WORKER_SETTINGS,
    });
    await expectSameAnswers(local, [
      ['GET', '/ui'],
      ['GET', '/ui?session=s1'],
      ['HEAD', '/ui'],
      ['GET', '/ui/'],
      ['GET', '/ui/app.css'],
      ['GET', '/ui/app.css', { 'if-none-match': '*' }],
      ['HEAD', '/ui/app.css'],
      ['GET', '/ui/favicon.svg'],
      ['POST', '/ui/app.css'],
      ['GET', '/ui/page.html'],
      ['GET', '/ui/page'],
    ]);
  });

  it('answers /openapi.json and /docs as Node and Deno do, the document read from its assets', async () => {
    // The document is the one `npm run assets` generated from the Worker's app
    // (.assets/openapi/worker.json), read through the ASSETS binding (functions/openapi-asset.ts in
    // place of functions/openapi-document.ts), and zod-to-openapi's generators are left out
    // (functions/zod-to-openapi-no-generators.ts in place of the package for @hono/zod-openapi).
    const modules = await bundledModules();
    const importers = (standIn: string) =>
      Object.entries(modules)
        .filter(([, module]) => module.imports.some((imported) => imported.path === standIn))
        .map(([path]) => path.replace(/.*node_modules\//, ''));
    expect(Object.keys(modules).filter((path) => /^functions\/openapi-document\.ts$/.test(path))).toEqual([]);
    expect(importers('functions/openapi-asset.ts')).toEqual(['functions/routes/service.ts']);
    expect(importers('functions/zod-to-openapi-no-generators.ts')).toEqual(['@hono/zod-openapi/dist/index.mjs']);
    // Each generator defines `generateDocument`; @hono/zod-openapi's getOpenAPIDocument only calls it.
    expect(await readFile(join(directory, 'worker.js'), 'utf8')).not.toMatch(/\bgenerateDocument\([\w$]*\)\{/);

    // A request with a token passes the services' middleware, which makes the store.
    const store = new MemoryStore();
    const local = createApp({ store: () => store, readEnvironment: () => WORKER_SETTINGS });
    const token = { authorization: 'Bearer bundle-token' };
    // The Worker's route table: no GET /metrics (Node's and Deno's), the session API.
    const document = (await (await local.request('http://localhost/openapi.json', { headers: token })).json()) as {
      paths: Record<string, unknown>;
    };
    expect(Object.keys(document.paths)).toContain('/v1/sessions');
    expect(Object.keys(document.paths)).not.toContain('/metrics');
    // The /docs page's nonce, its own in each response, in its policy and its scripts.
    const sameNonce = (answer: Awaited<ReturnType<typeof seen>>) => {
      const nonce = /'nonce-([^']+)'/.exec(answer.headers['content-security-policy'] ?? '')?.[1];
      if (nonce === undefined) return;
      answer.headers['content-security-policy'] = answer.headers['content-security-policy']!.replaceAll(nonce, 'N');
      answer.body = answer.body.replaceAll(nonce, 'N');
    };
    await expectSameAnswers(
      local,
      [
        // PUBLIC_DOCS off: the token is asked, and a wrong one refused.
        ['GET', '/openapi.json'],
        ['GET', '/openapi.json', { authorization: 'Bearer not-the-token' }],
        ['GET', '/openapi.json', token],
        ['HEAD', '/openapi.json', token],
        ['POST', '/openapi.json', token],
        ['GET', '/docs'],
        ['GET', '/docs', token],
        ['GET', '/docs/?x=1', token],
        // The asset itself is no path the platform serves: the Worker answers it as any other.
        ['GET', '/openapi/worker.json'],
        ['GET', '/openapi/worker.json', token],
        ['HEAD', '/openapi/worker.json', token],
        ['GET', '/openapi/worker', token],
        ['GET', '/openapi/', token],
      ],
      sameNonce,
    );
    const served = await fetch(`${worker.origin}/openapi.json`, { headers: token });
    expect(await served.json()).toEqual(document);
    expect((await fetch(`${worker.origin}/openapi/worker.json`, { headers: token })).status).toBe(404);
  });

  it("matches with hono's TrieRouter, its RegExpRouter left out (it refuses the app's routes)", async () => {
    const modules = await bundledModules();
    const paths = Object.keys(modules).map((path) => path.replace(/.*node_modules\//, ''));
    expect(paths.filter((path) => path.startsWith('hono/dist/router/reg-exp-router/'))).toEqual([]);
    expect(paths).toContain('hono/dist/router/trie-router/router.js');
    const importers = Object.entries(modules)
      .filter(([, module]) => module.imports.some((imported) => imported.path === 'functions/hono-no-regexp-router.ts'))
      .map(([path]) => path.replace(/.*node_modules\//, ''));
    expect(importers).toEqual(['hono/dist/hono.js']);
    // Static paths beside parameters of the same method (test/http/router-choice.test.ts), matched.
    const headers = { 'content-type': 'application/json', authorization: 'Bearer bundle-token' };
    const id = `bundle-router-${Date.now()}`;
    const created = await fetch(`${worker.origin}/v1/sessions`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ id }),
    });
    expect(created.status, worker.output()).toBe(201);
    const turn = await fetch(`${worker.origin}/v1/sessions/${id}/turns`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ input: 'hi' }),
    });
    expect(turn.status).toBe(200);
    const forked = await fetch(`${worker.origin}/v1/sessions/${id}/fork`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ id: `${id}-fork`, at_turn: 1 }),
    });
    expect(forked.status).toBe(201);
    const imported = await fetch(`${worker.origin}/v1/sessions/import`, { method: 'POST', headers, body: '{}' });
    expect(imported.status).toBe(400);
    expect(((await imported.json()) as { error: { code: string } }).error.code).toBe('invalid_request');
  });
});

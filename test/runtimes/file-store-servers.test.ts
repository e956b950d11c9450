import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { FileStore } from '../../lib/store/file.ts';
import {
  type RunningServer,
  runScenario,
  SLOW_SERVER_START_MS,
  startDenoServer,
  startHookTimeout,
  startNodeServer,
  startServers,
} from './runtime-process.ts';

const TOKEN = 'file-store-token';
let dataDir: string;
let node: RunningServer;
let denoServer: RunningServer;

// A Node and a Deno server with no S3 settings, sharing one DATA_DIR, started the way
// `npm run start:node` and `npm run start:deno` start them (port after the file name).
beforeAll(
  async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'tailgate-data-'));
    const environment = { API_TOKEN: TOKEN, DATA_DIR: dataDir, DEFAULT_MODEL: 'echo' };
    [node, denoServer] = await startServers([startNodeServer(environment), startDenoServer(environment)]);
  },
  startHookTimeout(SLOW_SERVER_START_MS, 10_000),
);

afterAll(async () => {
  await Promise.all([node?.stop(), denoServer?.stop()]);
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

/** Drops a notice into the data directory from this process, as a third writer. */
function fileWriter() {
  const store = new FileStore(dataDir);
  return async (sessionId: string, name: string, content: string) => {
    await store.put(`sessions/${sessionId}/inbox/${name}`, content);
  };
}

it('both servers print the banner: URL, file store, model, access', () => {
  for (const [server, runtime] of [
    [node, 'Node'],
    [denoServer, 'Deno'],
  ] as const) {
    const output = server.output();
    expect(output).toContain(`tailgate (${runtime}`);
    expect(output).toContain(`) on ${server.origin}`);
    expect(output).toContain(`store:  files in ${dataDir}`);
    expect(output).toContain('model:  echo');
    expect(output).toContain('access: bearer token (API_TOKEN)');
  }
});

it('serves the API on Node with the file store', async () => {
  await runScenario(node.origin, TOKEN, fileWriter());
});

it('serves the API on Deno with the file store', async () => {
  await runScenario(denoServer.origin, TOKEN, fileWriter());
});

async function call(
  origin: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
) {
  const response = await fetch(`${origin}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${TOKEN}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: (await response.json()) as any };
}

it('two servers on one directory: 20 retries with one Idempotency-Key store one turn, racing turns never ' +
  'interleave', async () => {
  const id = `race-${Date.now().toString(36)}`;
  expect((await call(node.origin, 'POST', '/v1/sessions', { id })).status).toBe(201);
  const servers = [node.origin, denoServer.origin];
  const keyed = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      call(servers[i % 2]!, 'POST', `/v1/sessions/${id}/turns`, { input: 'once' }, { 'idempotency-key': 'k1' }),
    ),
  );
  for (const response of keyed) expect([200, 409], JSON.stringify(response.body)).toContain(response.status);
  const answered = keyed.filter((response) => response.status === 200);
  expect(answered.length).toBeGreaterThan(0);
  for (const response of answered) expect(response.body.turn).toBe(answered[0]!.body.turn);
  for (const response of keyed.filter((response) => response.status === 409))
    expect(response.body.error.code).toBe('turn_in_progress');
  // Run with --unstable-no-legacy-abort, Deno does not warn about request.signal.
  expect(denoServer.output()).not.toContain('legacy behavior');

  const racing = await Promise.all(
    Array.from({ length: 8 }, (_, i) =>
      call(servers[i % 2]!, 'POST', `/v1/sessions/${id}/turns`, { input: `turn ${i}` }),
    ),
  );
  const won = racing.filter((response) => response.status === 200);
  for (const response of racing.filter((response) => response.status !== 200))
    expect(response.body.error.code).toBe('turn_in_progress');
  expect(won.length).toBeGreaterThan(0);

  const items = await call(denoServer.origin, 'GET', `/v1/sessions/${id}/items?limit=1000`);
  const contents = items.body.items.map((item: { content: string }) => item.content).reverse();
  // One input for the key, then each winning turn's input and answer, in order, nothing else.
  expect(contents.filter((content: string) => content === 'once')).toEqual(['once']);
  expect(contents).toHaveLength(2 + 2 * won.length);
  for (let index = 0; index < contents.length; index += 2) expect(contents[index + 1]).toBe(`echo: ${contents[index]}`);
  expect(items.body.items.map((item: { seq: number }) => item.seq)).toEqual(
    Array.from({ length: contents.length }, (_, i) => contents.length - i),
  );
}, 60_000);

it('two servers on one directory: 40 concurrent token revokes hand out 40 different generations', async () => {
  const id = `revoke-${Date.now().toString(36)}`;
  expect((await call(node.origin, 'POST', '/v1/sessions', { id })).status).toBe(201);
  const servers = [node.origin, denoServer.origin];
  const revoked = await Promise.all(
    Array.from({ length: 40 }, (_, i) => call(servers[i % 2]!, 'POST', `/v1/sessions/${id}/tokens/revoke`, {})),
  );
  for (const response of revoked) expect(response.status, JSON.stringify(response.body)).toBe(200);
  const generations = revoked.map((response) => response.body.token_generation as number).sort((a, b) => a - b);
  // Each revoke moved the generation on by one: no two read-modify-writes passed one etag.
  expect(generations).toEqual(Array.from({ length: 40 }, (_, i) => generations[0]! + i));
}, 60_000);

it('a server sweeps the temp files that a process killed while writing left in DATA_DIR', async () => {
  const leftover = `orphan~t${2 ** 22 + 1}-0badf00d`;
  await writeFile(join(dataDir, leftover), 'partial');
  // A fresh server on the directory: it sweeps when its store is first used.
  const fresh = await startNodeServer({ API_TOKEN: TOKEN, DATA_DIR: dataDir, DEFAULT_MODEL: 'echo' });
  try {
    expect((await call(fresh.origin, 'GET', '/v1/sessions')).status).toBe(200);
    await expect.poll(async () => (await readdir(dataDir)).includes(leftover)).toBe(false);
  } finally {
    await fresh.stop();
  }
}, 60_000);

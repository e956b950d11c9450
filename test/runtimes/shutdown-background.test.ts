import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type FakeProvider, fixture, startFakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { root, type RunningServer, serverCommand, startServer } from './runtime-process.ts';

/**
 * SIGTERM while a background turn (202, run by the process after its response) is still
 * running: the server waits for it, within SHUTDOWN_GRACE_MS, as it waits for open requests,
 * and for the turn its close takes up from the session's queue.
 * The model is an OpenAI-compatible fake provider streaming its answer over about 1.5 s.
 */
const TOKEN = 'shutdown-background-token';
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
let dataDir: string;
let provider: FakeProvider;

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'tailgate-shutdown-background-'));
  provider = await startFakeProvider(() => ({ sse: fixture('openai-chat-text.sse'), gapMs: 300 }));
}, 60_000);

afterAll(async () => {
  await provider?.close();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

/** A POST of `body` as JSON to `path` of `server`, with the token. */
function post(server: RunningServer, path: string, body: unknown): Promise<Response> {
  return fetch(`${server.origin}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
}

/** A turn's status, or the HTTP status of a turn the session does not have. */
async function turnStatus(server: RunningServer, id: string, turn: number): Promise<string | number> {
  const response = await fetch(`${server.origin}/v1/sessions/${id}/turns/${turn}`, { headers });
  return response.status === 200 ? ((await response.json()) as { status: string }).status : response.status;
}

async function start(runtime: 'Node' | 'Deno'): Promise<RunningServer> {
  return startServer(...serverCommand(runtime, 0), {
    timeoutMs: 90_000,
    cwd: root,
    env: {
      API_TOKEN: TOKEN,
      DATA_DIR: dataDir,
      DEFAULT_MODEL: 'openai-compatible:fake',
      OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
      OPENAI_COMPATIBLE_API_KEY: 'test',
      SHUTDOWN_GRACE_MS: '60000',
      DENO_NO_UPDATE_CHECK: '1',
    },
  });
}

it.each(['Node', 'Deno'] as const)(
  '%s: SIGTERM while a background turn runs in the process lets the turn complete before exiting',
  async (runtime) => {
    let server = await start(runtime);
    const id = `bg-${runtime}-${Date.now().toString(36)}`;
    try {
      const created = await post(server, '/v1/sessions', { id });
      expect(created.status).toBe(201);
      const accepted = await post(server, `/v1/sessions/${id}/turns`, { input: 'hello', background: true });
      expect(accepted.status).toBe(202);
      const { turn } = (await accepted.json()) as { turn: number };
      const status = () => turnStatus(server, id, turn);
      await expect.poll(status, { timeout: 30_000 }).toBe('in_progress');
      server.signal('SIGTERM');
      expect(await server.exited, server.output()).toBe(0);
      server = await start(runtime);
      expect(await status()).toBe('completed');
    } finally {
      await server.stop();
    }
  },
  180_000,
);

it.each(['Node', 'Deno'] as const)(
  '%s: SIGTERM while a background turn runs also lets the input queued behind it run before exiting',
  async (runtime) => {
    let server = await start(runtime);
    const id = `bg-queued-${runtime}-${Date.now().toString(36)}`;
    const status = (turn: number) => turnStatus(server, id, turn);
    try {
      const created = await post(server, '/v1/sessions', { id, on_busy: 'enqueue' });
      expect(created.status).toBe(201);
      const accepted = await post(server, `/v1/sessions/${id}/turns`, { input: 'hello', background: true });
      expect(accepted.status).toBe(202);
      await expect.poll(() => status(1), { timeout: 30_000 }).toBe('in_progress');
      const queued = await post(server, `/v1/sessions/${id}/turns`, { input: 'queued behind it' });
      expect(queued.status).toBe(202);
      expect(await queued.json()).toMatchObject({ position: 1 });
      server.signal('SIGTERM');
      expect(await server.exited, server.output()).toBe(0);
      server = await start(runtime);
      expect(await status(1)).toBe('completed');
      expect(await status(2)).toBe('completed');
    } finally {
      await server.stop();
    }
  },
  180_000,
);

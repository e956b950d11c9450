import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { type RunningServer, SLOW_SERVER_START_MS, startServer } from '../support/server-process.ts';

export {
  SLOW_SERVER_START_MS,
  startHookTimeout,
  startServer,
  startServers,
  type RunningServer,
} from '../support/server-process.ts';

export const root = fileURLToPath(new URL('../..', import.meta.url));
const deno = fileURLToPath(new URL('../../node_modules/.bin/deno', import.meta.url));
const denoPermissions = ['--allow-net', '--allow-env', '--allow-read', '--allow-write', '--allow-sys'];

/**
 * The command and arguments that run a server on `port` (0: one the server picks and prints):
 * functions/node.ts as `npm run start:node` runs it (Node's own type stripping), or `npm run
 * start:deno`'s command (deno from npm, `deno run` on functions/deno.ts), from the repository's root.
 */
export function serverCommand(runtime: 'Node' | 'Deno', port: number): [string, string[]] {
  return runtime === 'Node'
    ? [process.execPath, ['functions/node.ts', '--port', String(port)]]
    : [deno, ['run', '--unstable-no-legacy-abort', ...denoPermissions, 'functions/deno.ts', '--port', String(port)]];
}

/** The Node server on a port it picks (startServer reads it from the server's banner). */
export function startNodeServer(env: Record<string, string>): Promise<RunningServer> {
  return startServer(...serverCommand('Node', 0), { cwd: root, env });
}

/** The Deno server on a port it picks. */
export function startDenoServer(env: Record<string, string>): Promise<RunningServer> {
  return startServer(...serverCommand('Deno', 0), {
    cwd: root,
    env: { ...env, DENO_NO_UPDATE_CHECK: '1' },
    timeoutMs: SLOW_SERVER_START_MS,
  });
}

/**
 * The smaller cross-runtime scenario: health, a session, deeply nested JSON refused, one
 * turn, one notice delivered by the next turn and listed as delivered, a notice dropped
 * straight into the bucket, a 401.
 */
export async function runScenario(
  origin: string,
  token: string,
  dropNotice: (sessionId: string, name: string, content: string) => Promise<void>,
): Promise<void> {
  const call = async (method: string, path: string, body?: unknown, auth = true) => {
    const response = await fetch(`${origin}${path}`, {
      method,
      headers: {
        ...(auth ? { authorization: `Bearer ${token}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await response.text();
    return {
      status: response.status,
      body: text && (response.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) : text,
    };
  };
  expect((await call('GET', '/healthz', undefined, false)).body).toEqual({ ok: true });
  expect((await call('GET', '/v1/sessions/x', undefined, false)).status).toBe(401);
  // The inspector is served without a token, and its script is valid JavaScript on this runtime too.
  const page = await call('GET', '/ui', undefined, false);
  expect(page.status).toBe(200);
  expect(page.body).toContain('<title>tailgate inspector</title>');
  const script = await call('GET', '/ui/app.js', undefined, false);
  expect(script.status).toBe(200);
  expect(() => new Function(script.body)).not.toThrow();

  const id = `rt-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  const created = await call('POST', '/v1/sessions', { id, instructions: 'Be brief.' });
  expect(created.status, JSON.stringify(created.body)).toBe(201);

  // JSON nested 20,000 levels deep is a 400 on every runtime (not a 500, not stored).
  const deep = await fetch(`${origin}/v1/sessions/${id}/items`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: `{"items":[${'['.repeat(20_000)}${']'.repeat(20_000)}]}`,
  });
  expect(deep.status).toBe(400);
  expect(((await deep.json()) as { error: { message: string } }).error.message).toContain(
    'nested deeper than 64 levels',
  );

  const first = await call('POST', `/v1/sessions/${id}/turns`, { input: 'hello' });
  expect(first.status, JSON.stringify(first.body)).toBe(200);
  expect(first.body.output).toEqual([{ type: 'message', role: 'assistant', content: 'echo: hello', seq: 2 }]);

  const posted = await call('POST', `/v1/sessions/${id}/inbox`, {
    name: '0001-note.md',
    content: 'Budget left: 2 USD',
  });
  expect(posted.status).toBe(201);
  const second = await call('POST', `/v1/sessions/${id}/turns`, { input: 'go on' });
  expect(second.status).toBe(200);
  expect(second.body.output[0].content).toBe('echo: Budget left: 2 USD');
  expect(second.body.context.notices_delivered).toEqual(['0001-note.md']);
  const delivered = await call('GET', `/v1/sessions/${id}/inbox/delivered`);
  expect(delivered.body.delivered.map((notice: { name: string }) => notice.name)).toEqual(['0001-note.md']);

  await dropNotice(id, '0002-direct.txt', 'written by an S3 client');
  const third = await call('POST', `/v1/sessions/${id}/turns`, { input: 'and now' });
  expect(third.body.context.notices_delivered).toEqual(['0002-direct.txt']);

  const items = await call('GET', `/v1/sessions/${id}/items?limit=2`);
  expect(items.body.items.map((item: { seq: number }) => item.seq)).toEqual([6, 5]);

  // Server-sent events through the runtime's own HTTP server.
  const streamed = await fetch(`${origin}/v1/sessions/${id}/turns`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ input: 'stream it' }),
  });
  expect(streamed.headers.get('content-type')).toMatch(/text\/event-stream/);
  const names = [...(await streamed.text()).matchAll(/^event: (.+)$/gm)].map((match) => match[1]);
  expect(names[0]).toBe('turn.started');
  expect(names.slice(-2)).toEqual(['output_item.done', 'turn.completed']);
  expect(names.filter((name) => name === 'output_text.delta').length).toBeGreaterThan(1);

  // A background turn runs in the server process with no client connected.
  const queued = await call('POST', `/v1/sessions/${id}/turns`, { input: 'in the background', background: true });
  expect(queued.status, JSON.stringify(queued.body)).toBe(202);
  expect(queued.body).toEqual({ session_id: id, turn: 5, status: 'queued' });
  let receipt = await call('GET', `/v1/sessions/${id}/turns/5`);
  for (let polls = 0; polls < 600 && ['queued', 'in_progress'].includes(receipt.body.status); polls++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    receipt = await call('GET', `/v1/sessions/${id}/turns/5`);
  }
  expect(receipt.body).toMatchObject({ turn: 5, status: 'completed', error: null });
  const answer = await call('GET', `/v1/sessions/${id}/items?limit=1`);
  expect(answer.body.items[0].content).toBe('echo: in the background');
  expect((await call('DELETE', `/v1/sessions/${id}`)).status).toBe(204);
}

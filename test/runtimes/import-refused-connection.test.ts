import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type RunningServer, startHookTimeout, startNodeServer } from './runtime-process.ts';

/**
 * An import refused before its body was read to its end (409 `session_exists` after the header
 * line, as the retry of an import whose answer a crash lost gets) leaves the rest of the body
 * unread: the server stops draining it within a moment and ends the socket. The answer must
 * say so (`Connection: close`), or a keep-alive client (fetch) sends its next request on that
 * connection and gets no answer at all.
 */

const TOKEN = 'import-refused-token';
const headers = { authorization: `Bearer ${TOKEN}` };
let dataDir: string;
let server: RunningServer | undefined;

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'tailgate-import-refused-'));
  server = await startNodeServer({ API_TOKEN: TOKEN, DATA_DIR: dataDir, DEFAULT_MODEL: 'echo' });
}, startHookTimeout());

afterAll(async () => {
  await server?.stop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

/** `request`'s answer as `<status> <error code>`, or the connection error that took its place. */
async function answer(request: Promise<Response>): Promise<string> {
  return request.then(
    async (response) => {
      const body = (await response.json()) as { id?: string; error?: { code: string } };
      return `${response.status} ${body.error?.code ?? body.id}`;
    },
    (error: Error & { cause?: { code?: string } }) => `${error.message} (${error.cause?.code})`,
  );
}

it('Node: a request sent after an import refused unread is answered', async () => {
  const { origin } = server!;
  const json = { ...headers, 'content-type': 'application/json' };
  expect((await fetch(`${origin}/v1/sessions`, { method: 'POST', headers: json, body: '{"id":"taken"}' })).status).toBe(
    201,
  );
  const header = (await (await fetch(`${origin}/v1/sessions/taken/export`, { headers })).text()).split('\n')[0]!;
  const item = (seq: number) =>
    JSON.stringify({
      type: 'message',
      role: 'user',
      content: 'x'.repeat(4000),
      seq,
      created_at: '2026-01-01T00:00:00.000Z',
    });
  const body = [header, ...Array.from({ length: 1000 }, (_, i) => item(i + 1)), ''].join('\n');
  const answers: string[] = [];
  for (let attempt = 0; attempt < 4; attempt++) {
    const refused = fetch(`${origin}/v1/sessions/import`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/x-ndjson' },
      body,
    });
    answers.push(await answer(refused));
    answers.push(await answer(fetch(`${origin}/v1/sessions/taken`, { headers })));
  }
  expect(answers).toEqual(Array.from({ length: 4 }, () => ['409 session_exists', '200 taken']).flat());
}, 120_000);

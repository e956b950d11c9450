import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { storeFromConfig } from '../../functions/local-server.ts';
import { parseServiceConfig } from '../../lib/config.ts';
import { NotConfiguredError } from '../../lib/errors.ts';
import { TOKEN } from './http-suite.ts';

// A KEY_PREFIX segment is a directory of the file store (lib/store/file.ts), whose name must
// fit once escaped (upper case: three bytes each): the Node and Deno servers' store refuses one
// that does not, naming KEY_PREFIX, where every request would otherwise fail with "storage failed".
const directory = await mkdtemp(join(tmpdir(), 'tailgate-key-prefix-'));
const tasks: Promise<unknown>[] = [];
afterAll(async () => {
  // The background work after the turn (packing, the session index) ends before the files go.
  await Promise.allSettled(tasks);
  await rm(directory, { recursive: true, force: true });
});

/** The app on the servers' store (functions/local-server.ts) under DATA_DIR `directory`. */
function appWith(keyPrefix: string) {
  const storeFor = storeFromConfig();
  const app = createApp({
    store: (_environment, config) => storeFor(config),
    readEnvironment: (c) => c.env ?? {},
    afterResponse: (task) => void tasks.push(task),
  });
  const environment = { API_TOKEN: TOKEN, DATA_DIR: directory, KEY_PREFIX: keyPrefix, DEFAULT_MODEL: 'echo' };
  return async (method: string, path: string, body?: unknown) => {
    const response = await app.request(
      path,
      {
        method,
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      },
      environment,
    );
    return { status: response.status, body: (await response.json()) as any };
  };
}

describe('KEY_PREFIX on the file store', () => {
  // 77 upper-case letters escape to 231 bytes, one more than a directory name may take.
  const tooLong = `deploy/${'P'.repeat(77)}/`;

  it('a segment too long once escaped is refused as a setting, naming KEY_PREFIX', () => {
    const config = parseServiceConfig({ API_TOKEN: TOKEN, DATA_DIR: directory, KEY_PREFIX: tooLong });
    const storeFor = storeFromConfig();
    expect(() => storeFor(config)).toThrow(NotConfiguredError);
    expect(() => storeFor(config)).toThrow(/^invalid setting KEY_PREFIX: .*at most 230 bytes once escaped/);
  });

  it('a request answers 503 not_configured naming KEY_PREFIX, and nothing is written', async () => {
    const send = appWith(tooLong);
    const created = await send('POST', '/v1/sessions', { id: 'refused' });
    expect(created.status).toBe(503);
    expect(created.body.error.code).toBe('not_configured');
    expect(created.body.error.details).toEqual({ variable: 'KEY_PREFIX' });
    expect(created.body.error.message).toContain('KEY_PREFIX');
    expect(await readdir(directory)).toEqual([]);
  });

  it('the longest segments that fit work: a session is created, takes a turn and is listed', async () => {
    // 76 upper-case letters: 228 bytes escaped, just within the limit.
    const send = appWith(`${'P'.repeat(76)}/${'q'.repeat(170)}/`);
    expect((await send('POST', '/v1/sessions', { id: 'fits' })).status).toBe(201);
    const turn = await send('POST', '/v1/sessions/fits/turns', { input: 'hello' });
    expect(turn.status, JSON.stringify(turn.body)).toBe(200);
    const listed = await send('GET', '/v1/sessions');
    expect(listed.body.sessions.map((session: { id: string }) => session.id)).toEqual(['fits']);
  });
});

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type RunningServer,
  SLOW_SERVER_START_MS,
  startDenoServer,
  startHookTimeout,
  startNodeServer,
  startServers,
} from './runtime-process.ts';

/**
 * A body the Node and Deno servers refuse unread (over MAX_BODY_BYTES, a 413 said before the
 * body is read, with `Connection: close`) while its client is still sending it: the client reads
 * that answer, as any client that sends its whole body before reading does (fetch, the `openai`
 * client). Closing the socket at once would reset the connection under the client's write, which
 * the client sees as a connection error (EPIPE, ECONNRESET) instead of the 413, and the `openai`
 * client retries, sending the body again each time.
 */

const TOKEN = 'refused-body-token';
let dataDir: string;
const servers: Record<'Node' | 'Deno', RunningServer | undefined> = { Node: undefined, Deno: undefined };

beforeAll(
  async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'tailgate-refused-'));
    const environment = { API_TOKEN: TOKEN, DATA_DIR: dataDir };
    [servers.Node, servers.Deno] = await startServers([startNodeServer(environment), startDenoServer(environment)]);
  },
  startHookTimeout(SLOW_SERVER_START_MS, 10_000),
);

afterAll(async () => {
  await Promise.all([servers.Node?.stop(), servers.Deno?.stop()]);
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

describe.each(['Node', 'Deno'] as const)('%s server: a body refused unread', (runtime) => {
  it('is answered 413 to a client still sending it, never a reset connection', async () => {
    const origin = servers[runtime]!.origin;
    const body = JSON.stringify({ input: 'x'.repeat(20 * 1024 * 1024) });
    const answers: string[] = [];
    for (let attempt = 0; attempt < 8; attempt++) {
      const answer = await fetch(`${origin}/v1/responses`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body,
      }).then(
        async (response) => `${response.status} ${((await response.json()) as { error: { code: string } }).error.code}`,
        (error: Error & { cause?: { code?: string } }) => `${error.message} (${error.cause?.code})`,
      );
      answers.push(answer);
    }
    expect(answers).toEqual(Array.from({ length: 8 }, () => '413 payload_too_large'));
  }, 120_000);
});

import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createTestS3Store } from '../support/s3-store.ts';
import {
  SLOW_SERVER_START_MS,
  startDenoServer,
  startHookTimeout,
  startServer,
  startServers,
  type RunningServer,
} from './runtime-process.ts';
import { serverEnvironment, TOKEN } from './s3-environment.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const keyPrefix = `unsupported-${Date.now().toString(36)}/`;
const servers: Record<'Node' | 'Deno', RunningServer | undefined> = { Node: undefined, Deno: undefined };

beforeAll(async () => {
  // functions/node.ts and functions/deno.ts on fauxqs itself, without the gateway that adds
  // conditional writes.
  [servers.Node, servers.Deno] = await startServers([
    startServer(process.execPath, ['--import', 'tsx', 'functions/node.ts'], {
      cwd: root,
      env: serverEnvironment(0, keyPrefix, inject('fauxqsEndpoint')),
    }),
    startDenoServer(serverEnvironment(0, keyPrefix, inject('fauxqsEndpoint'))),
  ]);
}, startHookTimeout(SLOW_SERVER_START_MS));

afterAll(async () => {
  await Promise.all([servers.Node?.stop(), servers.Deno?.stop()]);
});

describe.each(['Node', 'Deno'] as const)('%s', (runtime) => {
  it(
    'a server on a store that ignores conditional writes answers 503 storage_unsupported, stores nothing, and ' +
      'stays healthy',
    async () => {
      for (let attempt = 0; attempt < 2; attempt++) {
        const response = await fetch(`${servers[runtime]!.origin}/v1/sessions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify({ id: 'never-stored' }),
        });
        expect(response.status).toBe(503);
        const { error } = (await response.json()) as { error: { code: string; message: string } };
        expect(error.code).toBe('storage_unsupported');
        expect(error.message).toMatch(
          new RegExp(
            '^the store ignores If-None-Match: a create-only put overwrote an existing object; ' +
              '.*tailgate needs conditional writes \\(R2, AWS S3, MinIO, Ceph RGW\\)$',
          ),
        );
      }
      // Each refusal's log line names what the store ignored once, in its details.
      // (A line may reach the pipe after its response: it is waited for.)
      const logged = () =>
        servers[runtime]!.output()
          .split(/^(?=tailgate: storage_unsupported )/m)
          .slice(1);
      await expect.poll(() => logged().map((line) => /^\{.*\}$/m.test(line))).toEqual([true, true]);
      for (const line of logged()) {
        expect(line.match(/^\{.*\}$/m)?.[0]).toBe(
          '{"code":"storage_unsupported","details":{"missing":["If-None-Match","If-Match"]}}',
        );
      }
      const health = await fetch(`${servers[runtime]!.origin}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ ok: true });
      const store = createTestS3Store(inject('fauxqsEndpoint'), inject('s3Bucket'));
      expect((await store.list(keyPrefix)).objects).toEqual([]);
    },
  );
});

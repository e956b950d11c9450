import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, it } from 'vitest';
import { freePort, runScenario, startServer, type RunningServer } from './runtime-process.ts';
import { directWriter, serverEnvironment, TOKEN } from './s3-environment.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const deno = fileURLToPath(new URL('../../node_modules/.bin/deno', import.meta.url));
const keyPrefix = `deno-${Date.now().toString(36)}/`;
let server: RunningServer;

beforeAll(async () => {
  const port = await freePort();
  // The README's command: deno from npm, `deno serve` on functions/deno.ts, S3 on fauxqs.
  server = await startServer(
    deno,
    ['serve', '--allow-net', '--allow-env', '--allow-read', '--allow-sys', '--host', '127.0.0.1', '--port', String(port), 'functions/deno.ts'],
    { cwd: root, port, env: { ...serverEnvironment(port, keyPrefix), DENO_NO_UPDATE_CHECK: '1' } },
  );
}, 90_000);

afterAll(async () => {
  await server?.stop();
});

it('serves the API on Deno with the S3 adapter', async () => {
  await runScenario(server.origin, TOKEN, directWriter(keyPrefix));
});

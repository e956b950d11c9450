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
  // `npm run start:deno`'s command (deno from npm, `deno run` on functions/deno.ts) with the
  // port after the file name, on S3 (fauxqs).
  server = await startServer(
    deno,
    [
      'run',
      '--unstable-no-legacy-abort',
      '--allow-net',
      '--allow-env',
      '--allow-read',
      '--allow-write',
      '--allow-sys',
      'functions/deno.ts',
      '--port',
      String(port),
    ],
    { cwd: root, port, env: { ...serverEnvironment(port, keyPrefix), DENO_NO_UPDATE_CHECK: '1' } },
  );
}, 90_000);

afterAll(async () => {
  await server?.stop();
});

it('serves the API on Deno with the S3 adapter', async () => {
  await runScenario(server.origin, TOKEN, directWriter(keyPrefix));
});

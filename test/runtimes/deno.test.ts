import { afterAll, beforeAll, it } from 'vitest';
import { freePort, type RunningServer, runScenario, startDenoServer } from './runtime-process.ts';
import { directWriter, serverEnvironment, TOKEN } from './s3-environment.ts';

const keyPrefix = `deno-${Date.now().toString(36)}/`;
let server: RunningServer;

beforeAll(async () => {
  const port = await freePort();
  // `npm run start:deno`'s command (deno from npm, `deno run` on functions/deno.ts) with the
  // port after the file name, on S3 (fauxqs).
  server = await startDenoServer(port, serverEnvironment(port, keyPrefix));
}, 90_000);

afterAll(async () => {
  await server?.stop();
});

it('serves the API on Deno with the S3 adapter', async () => {
  await runScenario(server.origin, TOKEN, directWriter(keyPrefix));
});

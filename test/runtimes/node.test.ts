import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, it } from 'vitest';
import { freePort, runScenario, startServer, type RunningServer } from './runtime-process.ts';
import { directWriter, serverEnvironment, TOKEN } from './s3-environment.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const keyPrefix = `node-${Date.now().toString(36)}/`;
let server: RunningServer;

beforeAll(async () => {
  const port = await freePort();
  // functions/node.ts as a real process (@hono/node-server) on S3 (fauxqs).
  server = await startServer(process.execPath, ['--import', 'tsx', 'functions/node.ts'], { cwd: root, port, env: serverEnvironment(port, keyPrefix) });
}, 60_000);

afterAll(async () => {
  await server?.stop();
});

it('serves the API on Node with the S3 adapter', async () => {
  await runScenario(server.origin, TOKEN, directWriter(keyPrefix));
});

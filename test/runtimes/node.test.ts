import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runScenario, startHookTimeout, startServer, type RunningServer } from './runtime-process.ts';
import { directWriter, serverEnvironment, TOKEN } from './s3-environment.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const keyPrefix = `node-${Date.now().toString(36)}/`;
let server: RunningServer;

beforeAll(async () => {
  // functions/node.ts as a real process (@hono/node-server) on S3 (fauxqs), on a port it picks.
  server = await startServer(process.execPath, ['--import', 'tsx', 'functions/node.ts'], {
    cwd: root,
    env: serverEnvironment(0, keyPrefix),
  });
}, startHookTimeout());

afterAll(async () => {
  await server?.stop();
});

it('prints the S3 store in the banner: bucket, endpoint, region and KEY_PREFIX', () => {
  const env = serverEnvironment(0, keyPrefix);
  expect(server.output()).toContain(
    `  store:  S3 bucket ${env.S3_BUCKET} at ${env.S3_ENDPOINT}, region ${env.S3_REGION}, KEY_PREFIX ${keyPrefix}\n`,
  );
});

it('serves the API on Node with the S3 adapter', async () => {
  await runScenario(server.origin, TOKEN, directWriter(keyPrefix));
});

it.each([
  ['TURN_LEASE_MS', '1000', 'invalid setting TURN_LEASE_MS'],
  // The store's settings too: S3 with no bucket would answer 503 on every request.
  ['S3_ENDPOINT', 'http://127.0.0.1:9', 'invalid setting S3_BUCKET: not set, while S3_ENDPOINT is'],
  // The file store's too: a KEY_PREFIX segment too long for a directory name (DATA_DIR, below).
  [
    'KEY_PREFIX',
    `${'P'.repeat(77)}/`,
    'invalid setting KEY_PREFIX: the file store keeps each segment as a directory name of at most 230 bytes',
  ],
  [
    'TOKEN_SIGNING_KEY',
    'tailgate',
    'invalid setting TOKEN_SIGNING_KEY: must be at least 32 random bytes in base64 or base64url ' +
      '(generate one with `openssl rand -base64 32`)',
  ],
])(
  'refuses to start with a bad %s, naming it',
  async (variable, value, line) => {
    const { spawnSync } = await import('node:child_process');
    const result = spawnSync(process.execPath, ['--import', 'tsx', 'functions/node.ts'], {
      cwd: root,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '/tmp',
        API_TOKEN: 'node-startup-token',
        DATA_DIR: join(tmpdir(), 'tailgate-node-startup'),
        [variable]: value,
        PORT: '0',
      },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(`tailgate: ${line}`);
  },
  40_000,
);

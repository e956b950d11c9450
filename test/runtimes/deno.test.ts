import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  root,
  type RunningServer,
  runScenario,
  SLOW_SERVER_START_MS,
  serverCommand,
  startDenoServer,
  startHookTimeout,
} from './runtime-process.ts';
import { directWriter, serverEnvironment, TOKEN } from './s3-environment.ts';

const keyPrefix = `deno-${Date.now().toString(36)}/`;
let server: RunningServer;

beforeAll(async () => {
  // `npm run start:deno`'s command (deno from npm, `deno run` on functions/deno.ts) with the
  // port after the file name, on S3 (fauxqs).
  server = await startDenoServer(serverEnvironment(0, keyPrefix));
}, startHookTimeout(SLOW_SERVER_START_MS));

afterAll(async () => {
  await server?.stop();
});

it('prints the S3 store in the banner: bucket, endpoint, region and KEY_PREFIX', () => {
  const env = serverEnvironment(0, keyPrefix);
  expect(server.output()).toContain(
    `  store:  S3 bucket ${env.S3_BUCKET} at ${env.S3_ENDPOINT}, region ${env.S3_REGION}, KEY_PREFIX ${keyPrefix}\n`,
  );
});

it('serves the API on Deno with the S3 adapter', async () => {
  await runScenario(server.origin, TOKEN, directWriter(keyPrefix));
});

it('refuses to start with a weak TOKEN_SIGNING_KEY, naming it', async () => {
  const { spawnSync } = await import('node:child_process');
  // The settings are checked before the server listens: no network permission is needed.
  const result = spawnSync(
    serverCommand('Deno', 0)[0],
    ['run', '--allow-env', '--allow-read', '--allow-sys', 'functions/deno.ts'],
    {
      cwd: root,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '/tmp',
        DENO_NO_UPDATE_CHECK: '1',
        API_TOKEN: 'deno-startup-token',
        TOKEN_SIGNING_KEY: 'tailgate',
        PORT: '0',
      },
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  expect(result.status).toBe(1);
  expect(result.stderr).toContain(
    'tailgate: invalid setting TOKEN_SIGNING_KEY: must be at least 32 random bytes in base64 or base64url ' +
      '(generate one with `openssl rand -base64 32`)',
  );
}, 70_000);

import { resolve } from 'node:path';
import { expect, it } from 'vitest';
import { describeStore } from '../../functions/local-server.ts';
import { startupBanner } from '../../functions/startup-banner.ts';
import { parseServiceConfig } from '../../lib/config.ts';

const anonymous = parseServiceConfig({ ALLOW_ANONYMOUS: 'true' });
const access = (url: string, config = anonymous) =>
  startupBanner('Node', url, config, 'files')
    .split('\n')
    .find((line) => line.startsWith('  access:'));

it('says anonymous access plainly on a loopback address', () => {
  for (const url of ['http://127.0.0.1:8787', 'http://localhost:8787', 'http://[::1]:8787'])
    expect(access(url)).toBe('  access: anonymous (no token needed; set API_TOKEN to require one)');
});

it('warns that anonymous access on another address makes whoever reaches the port admin', () => {
  for (const url of ['http://0.0.0.0:9000', 'http://192.0.2.7:8787', 'http://[::]:8787'])
    expect(access(url)).toBe(
      '  access: anonymous on a non-loopback address: whoever reaches this port is admin ' +
        '(set API_TOKEN to require a token)',
    );
  expect(access('http://0.0.0.0:9000', parseServiceConfig({ ALLOW_ANONYMOUS: 'true', API_TOKEN: 'secret' }))).toBe(
    '  access: bearer token (API_TOKEN)',
  );
});

it('names what a server without any token refuses, not /healthz or the open /docs, which still answer', () => {
  expect(access('http://127.0.0.1:8787', parseServiceConfig({}))).toBe(
    '  access: none: set API_TOKEN (every request but /healthz, /ui, /docs and /openapi.json is 503 not_configured)',
  );
  expect(access('http://127.0.0.1:8787', parseServiceConfig({ PUBLIC_DOCS: 'false' }))).toBe(
    '  access: none: set API_TOKEN (every request but /healthz and /ui is 503 not_configured)',
  );
});

// The store line names what decides where the keys land: the bucket, its endpoint, its region
// and KEY_PREFIX, each when set, so an operator reads the deployment's settings off the banner.
it('names the S3 bucket, its endpoint or AWS, its region and KEY_PREFIX when set', () => {
  const aws = { S3_BUCKET: 'tailgate', S3_REGION: 'eu-west-1' };
  expect(describeStore(parseServiceConfig(aws))).toBe('S3 bucket tailgate at AWS, region eu-west-1');
  expect(describeStore(parseServiceConfig({ ...aws, KEY_PREFIX: 'tenant-a/' }))).toBe(
    'S3 bucket tailgate at AWS, region eu-west-1, KEY_PREFIX tenant-a/',
  );
  const endpoint = { S3_BUCKET: 'tailgate', S3_ENDPOINT: 'http://127.0.0.1:9000' };
  expect(describeStore(parseServiceConfig(endpoint))).toBe('S3 bucket tailgate at http://127.0.0.1:9000');
  expect(describeStore(parseServiceConfig({ ...endpoint, S3_REGION: 'us-east-1', KEY_PREFIX: 'p/' }))).toBe(
    'S3 bucket tailgate at http://127.0.0.1:9000, region us-east-1, KEY_PREFIX p/',
  );
});

it('names KEY_PREFIX beside the file store when set', () => {
  const dataDir = resolve('/tmp/tailgate-banner');
  expect(describeStore(parseServiceConfig({ DATA_DIR: dataDir }))).toBe(`files in ${dataDir}`);
  expect(describeStore(parseServiceConfig({ DATA_DIR: dataDir, KEY_PREFIX: 'tenant-a/' }))).toBe(
    `files in ${dataDir}, KEY_PREFIX tenant-a/`,
  );
});

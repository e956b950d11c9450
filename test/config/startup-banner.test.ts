import { expect, it } from 'vitest';
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

import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { startWebhookReceiver, WEBHOOK_SECRET } from '../support/webhook-receiver.ts';
import { root, serverCommand } from './runtime-process.ts';

const run = promisify(execFile);
const script = fileURLToPath(new URL('../support/deno-webhook-fetch.ts', import.meta.url));

// Deno's node:http and node:dns, which functions/webhook-fetch.ts uses there as on Node: a name
// resolving to a private address is refused as the delivery connects, by the test's resolver
// and by the system's, and a name resolving to an allowed one is delivered to that address.
it('Deno: a webhook to a name resolving to a private address is refused, to an allowed one delivered', async () => {
  const receiver = await startWebhookReceiver();
  try {
    const [deno] = serverCommand('Deno', 0);
    const port = new URL(receiver.url).port;
    const { stdout } = await run(deno, ['run', '--allow-net', script, port, WEBHOOK_SECRET], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', DENO_NO_UPDATE_CHECK: '1' },
      timeout: 60_000,
    });
    const refusal = 'resolves to a private or loopback address';
    expect(JSON.parse(stdout)).toEqual({
      refused: `hook.example ${refusal} (127.0.0.1); set WEBHOOK_ALLOW_PRIVATE to allow it`,
      system: expect.stringMatching(/^localhost resolves to a private or loopback address \(/),
      allowed: null,
    });
    expect(receiver.deliveries.map(({ id, verified }) => [id, verified])).toEqual([['msg_allowed', true]]);
  } finally {
    await receiver.close();
  }
}, 90_000);

// Deno's node:https, which the checked deliveries go through, trusts the authority DENO_CERT
// names only while NODE_EXTRA_CA_CERTS is unset; set, the bundled roots and that file's
// (docs/SECURITY.md, "Webhooks"). The receiver's certificate is for hook.test, signed by
// test/support/tls/ca.pem; receiver.key is a file that holds no certificate.
it('Deno: a checked https delivery trusts DENO_CERT without NODE_EXTRA_CA_CERTS, and NODE_EXTRA_CA_CERTS', async () => {
  const tls = fileURLToPath(new URL('../support/tls/', import.meta.url));
  const receiver = createServer(
    { key: readFileSync(`${tls}receiver.key`), cert: readFileSync(`${tls}receiver.pem`) },
    (_request, response) => response.writeHead(204).end(),
  );
  await new Promise<void>((listening) => receiver.listen(0, '127.0.0.1', listening));
  try {
    const { port } = receiver.address() as AddressInfo;
    const [deno] = serverCommand('Deno', 0);
    const tlsScript = fileURLToPath(new URL('../support/deno-webhook-tls.ts', import.meta.url));
    const deliver = async (env: Record<string, string>) => {
      const args = ['run', '--allow-net', '--allow-read', '--allow-env', '--allow-sys', tlsScript, String(port)];
      const { stdout } = await run(deno, args, {
        cwd: root,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', DENO_NO_UPDATE_CHECK: '1', ...env },
        timeout: 60_000,
      });
      return JSON.parse(stdout) as unknown;
    };
    expect(await deliver({ DENO_CERT: `${tls}ca.pem` })).toBe(204);
    expect(await deliver({ DENO_CERT: `${tls}ca.pem`, NODE_EXTRA_CA_CERTS: `${tls}receiver.key` })).toMatch(
      /unable to verify/,
    );
    expect(await deliver({ NODE_EXTRA_CA_CERTS: `${tls}ca.pem` })).toBe(204);
  } finally {
    await new Promise((closed) => receiver.close(closed));
  }
}, 90_000);

import { execFile } from 'node:child_process';
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

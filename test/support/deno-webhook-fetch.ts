import type { LookupFunction } from 'node:net';
import process from 'node:process';
import { webhookFetch } from '../../functions/webhook-fetch.ts';
import { deliverWebhook } from '../../lib/webhooks/deliver.ts';
import { isPrivateAddress } from '../../lib/webhooks/url.ts';

/**
 * Deliveries through functions/webhook-fetch.ts in a Deno process with the servers' network
 * permission (test/runtimes/deno-webhook-fetch.test.ts): `deno-webhook-fetch.ts <port>
 * <secret>`, a receiver on 127.0.0.1:<port>. `hook.example` resolves to 127.0.0.1 by the
 * test's resolver, `localhost` by the system's. Prints one JSON line: each delivery's failure,
 * or null when it was delivered.
 */
const [port, secret] = process.argv.slice(2);
const resolve: LookupFunction = (_hostname, _options, callback) =>
  callback(null, [{ address: '127.0.0.1', family: 4 }]);
// 127.0.0.1 stands for a public address where `allowed` checks.
const allowed = (address: string) => address !== '127.0.0.1' && isPrivateAddress(address);
const deliver = (id: string, host: string, fetch: typeof globalThis.fetch) =>
  deliverWebhook(
    {
      format: 'tailgate.webhook.v1',
      id,
      url: `http://${host}:${port}/hook`,
      body: JSON.stringify({ type: 'session.idle', timestamp: '2026-01-01T00:00:00Z', data: {} }),
      created_at: '2026-01-01T00:00:00Z',
      attempts: 0,
      next_attempt_at: '2026-01-01T00:00:00Z',
    },
    // WEBHOOK_ALLOW_PRIVATE only lets the http URL past the URL check: the fetch is the checked one.
    { secret: secret!, allowPrivate: true, now: new Date(), fetch },
  );
console.log(
  JSON.stringify({
    refused: await deliver('msg_refused', 'hook.example', webhookFetch({ resolve })),
    system: await deliver('msg_system', 'localhost', webhookFetch()),
    allowed: await deliver('msg_allowed', 'hook.example', webhookFetch({ resolve, refused: allowed })),
  }),
);

import type { LookupFunction } from 'node:net';
import process from 'node:process';
import { webhookFetch } from '../../functions/webhook-fetch.ts';

/**
 * A checked delivery (functions/webhook-fetch.ts) over https in a Deno process
 * (test/runtimes/deno-webhook-fetch.test.ts): `deno-webhook-tls.ts <port>`, a receiver on
 * 127.0.0.1:<port> whose certificate, for `hook.test`, test/support/tls/ca.pem signs. Prints
 * the answer's status, or the failure's message.
 */
const [port] = process.argv.slice(2);
const resolve: LookupFunction = (_hostname, _options, callback) =>
  callback(null, [{ address: '127.0.0.1', family: 4 }]);
// 127.0.0.1 stands for the receiver's public address.
const send = webhookFetch({ resolve, refused: () => false });
const answer = await send(`https://hook.test:${port}/hook`, { method: 'POST', body: '{}' }).then(
  (response) => response.status,
  (error: unknown) => (error instanceof Error ? error.message : String(error)),
);
console.log(JSON.stringify(answer));

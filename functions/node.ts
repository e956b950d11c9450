import { serve } from '@hono/node-server';
import { parseServiceConfig } from '../lib/config.ts';
import { createApp } from './app.ts';
import { s3StoreFromConfig } from './s3-store-from-env.ts';
import { bpeTokenEncoders } from './token-encoders.ts';

/**
 * Node entry: `node --experimental-strip-types functions/node.ts` or `tsx functions/node.ts`.
 * Storage is S3 (S3_ENDPOINT, S3_BUCKET, ...), settings come from process.env, PORT picks
 * the port (default 8787).
 */
// Settings are read per request; a bad one is also refused at startup, before any traffic.
try {
  parseServiceConfig(process.env);
} catch (error) {
  console.error(`tailgate: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
const storeFor = s3StoreFromConfig();
const app = createApp({ store: (_environment, config) => storeFor(config), tokenEncoders: bpeTokenEncoders });

const port = Number(process.env.PORT ?? 8787);
const hostname = process.env.HOST ?? '127.0.0.1';
const server = serve({ fetch: app.fetch, port, hostname }, (info) => {
  console.log(`tailgate listening on http://${info.address}:${info.port}`);
});

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => server.close(() => process.exit(0)));
}

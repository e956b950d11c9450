import { parseServiceConfig } from '../lib/config.ts';
import { createApp } from './app.ts';
import { s3StoreFromConfig } from './s3-store-from-env.ts';
import { bpeTokenEncoders } from './token-encoders.ts';

/**
 * Deno entry, for `deno serve`: `npx deno serve --allow-net --allow-env --allow-read
 * functions/deno.ts`. Storage is S3 (S3_ENDPOINT, S3_BUCKET, ...), settings come from
 * Deno.env (hono's env(c) reads it per request).
 */
declare const Deno: { env: { toObject(): Record<string, string> }; exit(code: number): never };

// Settings are read per request; a bad one is also refused at startup, before any traffic.
try {
  parseServiceConfig(Deno.env.toObject());
} catch (error) {
  console.error(`tailgate: ${error instanceof Error ? error.message : String(error)}`);
  Deno.exit(1);
}
const storeFor = s3StoreFromConfig();
const app = createApp({ store: (_environment, config) => storeFor(config), tokenEncoders: bpeTokenEncoders });

export default { fetch: app.fetch };

import { createApp } from './app.ts';
import { s3StoreFromConfig } from './s3-store-from-env.ts';
import { bpeTokenEncoders } from './token-encoders.ts';

/**
 * Deno entry, for `deno serve`: `npx deno serve --allow-net --allow-env --allow-read
 * functions/deno.ts`. Storage is S3 (S3_ENDPOINT, S3_BUCKET, ...), settings come from
 * Deno.env (hono's env(c) reads it per request).
 */
const storeFor = s3StoreFromConfig();
const app = createApp({ store: (_environment, config) => storeFor(config), tokenEncoders: bpeTokenEncoders });

export default { fetch: app.fetch };

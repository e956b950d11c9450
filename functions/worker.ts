import { r2StoreFor } from '../lib/store/r2.ts';
import { createApp } from './app.ts';
import { reportSweep, sweepExpiredSessions } from './retention.ts';

/** The Workers bindings: the R2 bucket, an optional Workers AI binding, and string vars. */
export interface Env {
  BUCKET: R2Bucket;
  AI?: unknown;
  [name: string]: unknown;
}

const app = createApp({
  store: (environment) => r2StoreFor((environment as unknown as Env).BUCKET),
});

export default {
  fetch: (request, environment, context) => app.fetch(request, environment, context),
  // The Cron Trigger of wrangler.toml: the retention sweep (functions/retention.ts).
  scheduled: async (_controller, environment) =>
    reportSweep(sweepExpiredSessions(() => r2StoreFor(environment.BUCKET), environment)),
} satisfies ExportedHandler<Env>;

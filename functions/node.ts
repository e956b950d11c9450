import { parseServiceConfig } from '../lib/config.ts';
import { createApp, createOutsideServices, type AppOptions } from './app.ts';
import { Metrics } from './metrics.ts';
import {
  checkDataDir,
  describeStore,
  docsScript,
  inspectorScript,
  localServerOptions,
  markRunning,
  serveLocal,
  storeFromConfig,
  trackAfterResponse,
} from './local-server.ts';
import { scheduleQueueSweep, sweepQueuedSessions } from './queue-sweep.ts';
import { scheduleRetention, sweepExpiredSessions } from './retention.ts';
import { startupBanner } from './startup-banner.ts';
import { drainWebhooks, scheduleWebhooks } from './webhooks.ts';
import { webhookFetch } from './webhook-fetch.ts';
import { bpeTokenEncoders } from './token-encoders.ts';

/**
 * Node entry: `npm run start:node` (functions/node.ts --allow-anonymous on the Node pinned in
 * devDependencies), or `node functions/node.ts` on Node >= 22.18. Options: `--port`, `--host`
 * (else PORT, HOST; default 8787 on 127.0.0.1), `--allow-anonymous`. Storage is S3 when
 * S3_ENDPOINT or S3_BUCKET is set, otherwise files under DATA_DIR (default .tailgate/data);
 * settings come from process.env.
 */
const storeFor = storeFromConfig();
let options: ReturnType<typeof localServerOptions>;
try {
  options = localServerOptions(process.argv.slice(2), process.env);
  if (options.allowAnonymous) process.env.ALLOW_ANONYMOUS ??= 'true';
  // Settings are read per request; a bad one is also refused at startup, before any traffic
  // (the store's too: S3_ENDPOINT without S3_BUCKET, a DATA_DIR the file store cannot work in).
  const config = parseServiceConfig(process.env);
  await checkDataDir(config, storeFor(config));
} catch (error) {
  console.error(`tailgate: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
const appOptions: AppOptions = {
  webhookStored: () => webhooks.wake(),
  afterResponse: trackAfterResponse,
  store: (_environment, config) => storeFor(config),
  tokenEncoders: bpeTokenEncoders,
  docsScript,
  inspectorScript,
  // GET /metrics (functions/metrics.ts): counted by this process.
  metrics: new Metrics(),
};
// Webhook events (functions/webhooks.ts): the outbox is drained now, when an event is stored,
// and when a retry falls due, with the services a request would have (a pickup after a close).
const outside = createOutsideServices(appOptions);
// Without WEBHOOK_ALLOW_PRIVATE, a host name resolving to a private address is refused as it is
// connected to (functions/webhook-fetch.ts).
const checkedFetch = webhookFetch();
const webhooks = scheduleWebhooks(() => drainWebhooks(outside(process.env, trackAfterResponse), checkedFetch));
const app = createApp(appOptions);
// The queues no closer took up (functions/queue-sweep.ts): every minute, with those services too.
scheduleQueueSweep(() => sweepQueuedSessions(() => outside(process.env, trackAfterResponse)), options.queueSweepMs);

// The retention sweep (functions/retention.ts): SESSION_TTL_DAYS and each session's expires_after_days.
scheduleRetention(() => sweepExpiredSessions(storeFor, process.env));

serveLocal(app.fetch, options, (url) => {
  const config = parseServiceConfig(process.env);
  console.log(startupBanner(`Node ${process.version}`, url, config, describeStore(config)));
  markRunning(`Node server on ${url}`);
});

import { parseServiceConfig } from '../lib/config.ts';
import { DEFAULTS } from '../lib/defaults.ts';
import { r2StoreFor } from '../lib/store/r2.ts';
import { MAX_TURN_DELIVERIES, retryDelaySeconds, type BackgroundTurn } from '../lib/turn/index.ts';
import { webhookEntrySchema, type WebhookEntry } from '../lib/webhooks/events.ts';
import { z } from 'zod';
import { createApp, createOutsideServices, createTurnRunner, type AppOptions } from './app.ts';
import { sweepQueuedSessions } from './queue-sweep.ts';
import { reportSweep, sweepExpiredSessions } from './retention.ts';
import { deliverQueued, drainWebhooks } from './webhooks.ts';
import { loggable } from '../lib/loggable.ts';
import { retryDelaySeconds as webhookDelaySeconds } from '../lib/webhooks/deliver.ts';

/**
 * The Workers bindings: the R2 bucket, the queues of background turns and of webhook events
 * (wrangler.toml), an optional Workers AI binding, and string vars.
 */
export interface Env {
  BUCKET: R2Bucket;
  TURNS?: Queue<BackgroundTurn>;
  WEBHOOKS?: Queue<WebhookEntry>;
  AI?: unknown;
  [name: string]: unknown;
}

const options: AppOptions = {
  store: (environment) => r2StoreFor((environment as unknown as Env).BUCKET),
  // A deployment without a token is told of `wrangler secret put`, not of --allow-anonymous.
  tokenSetting: 'workers',
  // Background turns go to the queue, whose consumer below runs them: a consumer has minutes
  // of wall time where waitUntil has about 30 s. Without the binding (a deploy that left it
  // out) the isolate runs them, each logged as an error naming it. A message names the request
  // that sent it, for its turn's log line.
  queueTurn: (environment, requestId) => {
    const queue = (environment as unknown as Env).TURNS;
    if (!queue) return undefined;
    return async (run) => void (await queue.send(requestId === null ? run : { ...run, request_id: requestId }));
  },
  inProcessTurn: (run) =>
    console.error(
      `tailgate: background turn ${run.turn} of session ${run.session_id} runs in this isolate: no queue is ` +
        'bound as TURNS (wrangler.toml [[queues.producers]]), so it has the about 30 s waitUntil gives after ' +
        "the response, not a queue consumer's minutes",
    ),
  // Webhook events go to their queue, durably once `send` resolved; without the binding, to
  // the bucket's outbox, which the Cron Trigger drains.
  queueWebhook: (environment) => {
    const queue = (environment as unknown as Env).WEBHOOKS;
    return queue ? async (entry) => void (await queue.send(entry)) : undefined;
  },
};
const app = createApp(options);
/**
 * A background turn's message, as lib/turn/background.ts claims it and `queueTurn` above sends
 * it (with its request's id; a message from older code, or one sent outside a request, has none;
 * a queued input's turn also names the request that queued it, `enqueued_by`, if its entry does).
 */
const backgroundTurnSchema: z.ZodType<BackgroundTurn> = z.object({
  session_id: z.string(),
  turn: z.number().int().positive(),
  writer: z.string(),
  request_id: z.string().optional(),
  enqueued_by: z.string().optional(),
});
const runTurn = createTurnRunner(options);
const outsideServices = createOutsideServices(options);

/**
 * The settings whose default differs on Workers, where the deployment leaves them unset or
 * empty: an isolate has 128 MB in all, so it keeps fewer parsed records than a Node or Deno
 * process (docs/CONFIGURATION.md).
 */
const WORKER_DEFAULTS: Record<string, string> = { RECORD_CACHE_BYTES: String(DEFAULTS.workerRecordCacheBytes) };
function withDefaults(environment: Env): Env {
  const unset = Object.entries(WORKER_DEFAULTS).filter(([name]) => (environment[name] ?? '') === '');
  return unset.length === 0 ? environment : { ...environment, ...Object.fromEntries(unset) };
}

/** wrangler.toml's Cron Trigger, and the minute of the hour its run sweeps retention too. */
const EVERY_MINUTE = '* * * * *';
const RETENTION_MINUTE = 17;

/**
 * A background turn's message left for another delivery: retried after `delaySeconds`, or, at
 * its last delivery (wrangler.toml's max_retries, MAX_TURN_DELIVERIES), given up and logged.
 * The turn, if still open, stays so until its lease runs out: the session is marked for the
 * sweep of queues first (lib/session/log/queue-markers.ts), whose first run after that closes
 * it (failed, `lease_expired`) with no client touching the session. A mark that fails (storage
 * still down) leaves it to the next reader or writer of the session, told so in the line.
 */
async function retryTurn(message: Message, run: BackgroundTurn, delaySeconds: number, environment: Env) {
  if (message.attempts < MAX_TURN_DELIVERIES) {
    message.retry({ delaySeconds });
    return;
  }
  const which = `background turn ${run.turn} of session ${run.session_id}`;
  const givenUp = `tailgate: ${which} given up after ${message.attempts} deliveries`;
  try {
    await outsideServices(environment, () => undefined).sessions.markForSweep(run.session_id);
    console.error(`${givenUp}: the sweep of queues closes it as failed (lease_expired) once its lease runs out`);
  } catch (error) {
    console.error(
      `${givenUp}: it closes as failed (lease_expired) once its lease ran out and a reader or the next writer ` +
        'comes, as marking its session for the sweep of queues failed',
      loggable(error),
    );
  }
  message.ack();
}

/** The deployment's TURN_LEASE_MS, or the default when its settings do not parse. */
function turnLeaseMs(environment: Env): number {
  try {
    return parseServiceConfig(environment).turnLeaseMs;
  } catch {
    return DEFAULTS.turnLeaseMs;
  }
}

export default {
  fetch: (request, environment, context) => app.fetch(request, withDefaults(environment), context),
  // The Cron Trigger of wrangler.toml, every minute: the webhook outbox (the turns' intents, and
  // the events of a deployment without the WEBHOOKS queue), then the queues no closer took up
  // (functions/queue-sweep.ts); once an hour (RETENTION_MINUTE, or a run by any other schedule,
  // such as wrangler dev's /cdn-cgi/local/scheduled) the retention sweep (functions/retention.ts)
  // first. A pickup, after a turn the drainer closed or the sweep's, runs its turn on the TURNS
  // queue, else in the isolate.
  scheduled: async (controller, bindings, context) => {
    const environment = withDefaults(bindings);
    // Each part needs the settings and the bucket: a setting that does not parse, or no bucket
    // bound as BUCKET, is one line a run, not a failure each.
    try {
      parseServiceConfig(environment);
      r2StoreFor(environment.BUCKET);
    } catch (error) {
      console.error(`tailgate: the Cron Trigger's run skipped: ${error instanceof Error ? error.message : error}`);
      return;
    }
    if (controller.cron !== EVERY_MINUTE || new Date(controller.scheduledTime).getUTCMinutes() === RETENTION_MINUTE)
      await reportSweep(sweepExpiredSessions(() => r2StoreFor(environment.BUCKET), environment));
    const background = (task: Promise<unknown>) => context.waitUntil(task);
    const services = () => outsideServices(environment, background);
    await Promise.resolve()
      .then(() => drainWebhooks(services()))
      .catch((error: unknown) => console.error('tailgate: webhook delivery failed', loggable(error)));
    await sweepQueuedSessions(services);
  },
  // A webhook event (its delivery, retried by the queue with backoff), or a background turn (a
  // turn left open by a storage failure is delivered again, after a delay growing with its
  // deliveries: lib/turn/background-runner.ts). A message whose handling threw is retried so too,
  // by the deployment's TURN_LEASE_MS (the default's when its settings do not parse).
  queue: async (batch, bindings, context) => {
    const environment = withDefaults(bindings);
    await Promise.all(
      batch.messages.map(async (message) => {
        const event = webhookEntrySchema.safeParse(message.body);
        const run = backgroundTurnSchema.safeParse(message.body);
        try {
          if (event.success)
            return await deliverQueued(message, event.data, environment, r2StoreFor(environment.BUCKET));
          if (!run.success) {
            // Nothing this worker sent: no delivery of it will go better.
            console.error(
              `tailgate: queue message ${message.id} is neither a webhook event nor a background turn; dropped`,
            );
            return message.ack();
          }
          const background = (task: Promise<unknown>) => context.waitUntil(task);
          const outcome = await runTurn(run.data, environment, background, message.attempts);
          if (outcome === 'done') message.ack();
          else await retryTurn(message, run.data, outcome.retryAfterSeconds, environment);
        } catch (error) {
          console.error(`tailgate: queue message ${message.id} failed`, loggable(error));
          const { attempts } = message;
          if (event.success || !run.success) message.retry({ delaySeconds: webhookDelaySeconds(attempts) });
          else await retryTurn(message, run.data, retryDelaySeconds(attempts, turnLeaseMs(environment)), environment);
        }
      }),
    );
  },
} satisfies ExportedHandler<Env, BackgroundTurn | WebhookEntry>;

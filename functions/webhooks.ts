import { parseServiceConfig } from '../lib/config.ts';
import type { ObjectStore } from '../lib/store/object-store.ts';
import { deliverWebhook, failedAttemptLine, retryDelaySeconds } from '../lib/webhooks/deliver.ts';
import type { WebhookEntry } from '../lib/webhooks/events.ts';
import { outboxPrefix } from '../lib/webhooks/intent.ts';
import { drainOutbox } from '../lib/webhooks/outbox.ts';
import { pickUpAfterLeaseClose } from '../lib/turn/index.ts';
import { loggable } from '../lib/loggable.ts';
import { sessionLogFor, closesByOthers, type AppServices } from './services.ts';

/**
 * Webhook delivery with a deployment's settings (lib/webhooks/): on Node and Deno a loop that
 * drains the store's outbox on start, when an entry is stored, and when the next retry falls
 * due; on Workers the Queues consumer of `tailgate-webhooks` (functions/worker.ts), which
 * retries with the same backoff, and the Cron Trigger, which drains the bucket's outbox: the
 * turns' intents, and the events a worker without the queue binding wrote.
 */

/** The loop looks at the outbox at least this often (entries stored by another process). */
const POLL_MS = 30_000;

/**
 * One drain of the outbox of `services`' store, with their settings; its deliveries go through
 * `checkedFetch` when given and WEBHOOK_ALLOW_PRIVATE is unset (Node and Deno:
 * functions/webhook-fetch.ts), else through the runtime's fetch. A turn whose intent it closes
 * (its lease ran out) is followed by a pickup of the inputs queued behind it, run with `services`
 * (lib/turn/busy.ts, pickUpAfterLeaseClose), and stopped at once when it runs among
 * `services.running` (lib/turn/running.ts).
 */
export async function drainWebhooks(services: AppServices, checkedFetch?: typeof fetch): Promise<number | null> {
  const { config, store, clock } = services;
  if (!config.webhooks) return null;
  return drainOutbox({
    store,
    keyPrefix: config.keyPrefix,
    // Without `onClosed`: the drainer delivers the event of a turn it closes itself. A turn it
    // closes that this process runs stops at once; one no process runs, it logs.
    sessions: sessionLogFor(store, config, {
      clock,
      onLeaseClosed: pickUpAfterLeaseClose(() => services),
      ...closesByOthers(services.running, services.observeTurn),
    }),
    secret: config.webhooks.secret,
    allowPrivate: config.webhooks.allowPrivate,
    ...(checkedFetch && !config.webhooks.allowPrivate ? { fetch: checkedFetch } : {}),
    clock,
    log: (message, details) => services.log(message, details ?? ''),
  });
}

/**
 * Node and Deno: drains at once, then again when the next entry falls due (at most POLL_MS
 * later) or `wake` is called (an entry was just stored). One drain runs at a time.
 */
export function scheduleWebhooks(drain: () => Promise<number | null>): { wake: () => void; stop: () => void } {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let running = false;
  let again = false;
  let stopped = false;
  const run = async () => {
    clearTimeout(timer);
    if (running) {
      again = true;
      return;
    }
    running = true;
    let wait: number | null = null;
    try {
      wait = await drain();
    } catch (error) {
      console.error('tailgate: webhook delivery failed', loggable(error));
    }
    running = false;
    if (stopped) return;
    if (again) {
      again = false;
      return void run();
    }
    timer = setTimeout(run, Math.max(10, Math.min(wait ?? POLL_MS, POLL_MS)));
    // The loop never keeps the process alive on its own.
    (timer as { unref?: () => void }).unref?.();
  };
  void run();
  return {
    wake: () => void run(),
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}

/** What a Queues message asks of its consumer. */
export interface QueuedMessage {
  readonly attempts: number;
  ack(): void;
  retry(options?: { delaySeconds?: number }): void;
}

/**
 * Workers: delivers one queued event; a failure is retried by the queue after the backoff, and
 * the first attempt's failure and the last's are logged (the queue's dead letter queue keeps
 * the message).
 */
export async function deliverQueued(
  message: QueuedMessage,
  entry: WebhookEntry,
  env: Record<string, unknown>,
  store?: ObjectStore,
) {
  const config = parseServiceConfig(env);
  if (!config.webhooks) {
    console.error(`tailgate webhooks: ${entry.id} dropped: WEBHOOK_SECRET is unset`);
    return message.ack();
  }
  const { secret, allowPrivate } = config.webhooks;
  const failure = await deliverWebhook(entry, { secret, allowPrivate, now: new Date() });
  if (failure === null) {
    // The turn's intent in the bucket's outbox (lib/webhooks/intent.ts) is delivered with it;
    // left there (a failed delete), the Cron Trigger delivers the event once more.
    await store?.delete(`${outboxPrefix(config.keyPrefix)}${entry.id}`).catch(() => undefined);
    return message.ack();
  }
  const line = failedAttemptLine(entry, message.attempts, failure);
  if (line !== null) console.error(line);
  message.retry({ delaySeconds: retryDelaySeconds(message.attempts) });
}

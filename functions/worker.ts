import { r2StoreFor } from '../lib/store/r2.ts';
import type { BackgroundTurn } from '../lib/turn.ts';
import { createApp, createTurnRunner, type AppOptions } from './app.ts';
import { reportSweep, sweepExpiredSessions } from './retention.ts';

/**
 * The Workers bindings: the R2 bucket, the queue of background turns (wrangler.toml), an
 * optional Workers AI binding, and string vars.
 */
export interface Env {
  BUCKET: R2Bucket;
  TURNS?: Queue<BackgroundTurn>;
  AI?: unknown;
  [name: string]: unknown;
}

const options: AppOptions = {
  store: (environment) => r2StoreFor((environment as unknown as Env).BUCKET),
  // Background turns go to the queue, whose consumer below runs them: a consumer has minutes
  // of wall time where waitUntil has about 30 s. Without the binding the isolate runs them.
  queueTurn: (environment) => {
    const queue = (environment as unknown as Env).TURNS;
    return queue ? async (run) => void (await queue.send(run)) : undefined;
  },
};
const app = createApp(options);
const runTurn = createTurnRunner(options);

export default {
  fetch: (request, environment, context) => app.fetch(request, environment, context),
  // The Cron Trigger of wrangler.toml: the retention sweep (functions/retention.ts).
  scheduled: async (_controller, environment) =>
    reportSweep(sweepExpiredSessions(() => r2StoreFor(environment.BUCKET), environment)),
  // Each message is one background turn; a turn left open by a storage failure is delivered again.
  queue: async (batch, environment, context) => {
    await Promise.all(
      batch.messages.map(async (message) => {
        const outcome = await runTurn(message.body, environment, (task) => context.waitUntil(task));
        if (outcome === 'retry') message.retry();
        else message.ack();
      }),
    );
  },
} satisfies ExportedHandler<Env, BackgroundTurn>;

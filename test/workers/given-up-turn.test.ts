import {
  createExecutionContext,
  createMessageBatch,
  createScheduledController,
  getQueueResult,
  waitOnExecutionContext,
} from 'cloudflare:test';
import { expect, it } from 'vitest';
import worker from '../../functions/worker.ts';
import type { OpenTurn } from '../../lib/session/log/types.ts';
import { R2Store } from '../../lib/store/r2.ts';
import { MAX_TURN_DELIVERIES, type BackgroundTurn } from '../../lib/turn/index.ts';
import type { WebhookEntry } from '../../lib/webhooks/events.ts';
import { SessionLog } from '../support/session-log.ts';
import { bindings, consoleErrors } from './worker-harness.ts';

// A background turn whose queue message was given up at its last delivery (its runner met a
// storage failure each time), with no client coming back: the Cron Trigger's sweep of queues
// leaves it while its lease runs, and the first run after the lease ran out closes it (failed,
// `lease_expired`), its webhook event sent, as any close of a lapsed lease sends it.

const errors = consoleErrors();
const HOUR = 3_600_000;

/** The R2 bucket with every call on the session objects under `keyPrefix` failing: the runner's reads and writes. */
function sessionsDown(keyPrefix: string): R2Bucket {
  const down = (key: unknown) =>
    [key].flat().some((one) => typeof one === 'string' && one.startsWith(`${keyPrefix}sessions/`));
  return new Proxy(bindings.BUCKET, {
    get: (target, name) => {
      const value = Reflect.get(target, name);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const key = name === 'list' ? (args[0] as { prefix?: string } | undefined)?.prefix : args[0];
        if (down(key)) return Promise.reject(new Error('R2 is unavailable'));
        return Reflect.apply(value, target, args);
      };
    },
  });
}

/** Runs the Cron Trigger with `vars` over the bindings, to its end (waitUntil too). */
async function cronRun(vars: Record<string, unknown>): Promise<void> {
  const context = createExecutionContext();
  const controller = createScheduledController({ cron: '* * * * *', scheduledTime: Date.UTC(2026, 0, 1, 12, 5) });
  await worker.scheduled(controller, { ...bindings, ...vars } as never, context);
  await waitOnExecutionContext(context);
}

it('closes a background turn given up at its last delivery at the first sweep after its lease ran out', async () => {
  const keyPrefix = `${crypto.randomUUID()}/`;
  const store = new R2Store(bindings.BUCKET);
  // Claimed an hour ago; its runner's last renewal, just now, holds its lease for an hour more.
  const claimer = new SessionLog(store, { keyPrefix, clock: () => new Date(Date.now() - HOUR) });
  await claimer.create({ id: 's', model: 'echo' });
  const claimed = await claimer.beginTurn('s', { input: [{ type: 'message', role: 'user', content: 'hi' }] });
  if (claimed.kind !== 'claimed') throw new Error('turn 1 was not claimed');
  const turn: OpenTurn = claimed.turn;
  await new SessionLog(store, { keyPrefix, leaseMs: HOUR }).renewLease(turn);

  // Its last delivery: the runner's every storage call fails, and the message is given up.
  const run: BackgroundTurn = { session_id: 's', turn: 1, writer: turn.writer };
  const batch = createMessageBatch<BackgroundTurn>('tailgate-turns', [
    { id: 'm', timestamp: new Date(), attempts: MAX_TURN_DELIVERIES, body: run },
  ]);
  const consumer = createExecutionContext();
  const consumed = { ...bindings, KEY_PREFIX: keyPrefix, BUCKET: sessionsDown(keyPrefix) };
  await worker.queue(batch as never, consumed as never, consumer);
  await waitOnExecutionContext(consumer);
  expect((await getQueueResult(batch, consumer)).explicitAcks).toEqual(['m']);
  expect(errors).toContainEqual(expect.stringContaining('background turn 1 of session s given up after'));

  // No client touches the session: only the Cron Trigger runs, with webhooks to the WEBHOOKS queue.
  const sent: WebhookEntry[] = [];
  const webhooks = { send: async (entry: WebhookEntry) => void sent.push(entry) };
  const vars = { KEY_PREFIX: keyPrefix, WEBHOOKS: webhooks, TURNS: undefined, WEBHOOK_URL: 'https://hooks.test/in' };
  const log = new SessionLog(store, { keyPrefix });
  const markers = async () => (await bindings.BUCKET.list({ prefix: `${keyPrefix}queues/` })).objects.map((o) => o.key);

  // Its lease runs: the sweep leaves the turn open and the session marked.
  await cronRun(vars);
  expect(await log.getTurn('s', 1)).toMatchObject({ status: 'in_progress' });
  expect(await markers()).toEqual([`${keyPrefix}queues/s`]);
  expect(sent).toEqual([]);

  // An hour passes: to the sweep's clock, as if that last renewal had been written an hour earlier.
  await new SessionLog(store, { keyPrefix, clock: () => new Date(Date.now() - HOUR) }).renewLease(turn);
  await cronRun(vars);
  expect(await log.getTurn('s', 1)).toMatchObject({ status: 'failed', error: { code: 'lease_expired' } });
  expect(await markers()).toEqual([]);
  const events = sent.map((entry) => JSON.parse(entry.body));
  expect(events).toContainEqual(
    expect.objectContaining({
      type: 'turn.failed',
      data: expect.objectContaining({
        session_id: 's',
        turn: 1,
        error: expect.objectContaining({ code: 'lease_expired' }),
      }),
    }),
  );
});

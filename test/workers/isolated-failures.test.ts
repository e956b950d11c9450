import {
  createExecutionContext,
  createMessageBatch,
  createScheduledController,
  env,
  getQueueResult,
  waitOnExecutionContext,
} from 'cloudflare:test';
import { describe, expect, inject, it } from 'vitest';
import worker from '../../functions/worker.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { R2Store } from '../../lib/store/r2.ts';
import type { WebhookEntry } from '../../lib/webhooks/events.ts';
import { SessionLog } from '../support/session-log.ts';

// The Worker's queue consumer and Cron Trigger each handle many messages, entries or sessions
// in one run: one that fails is settled or logged on its own, and the rest are handled.

const DAY = 86_400_000;
const bindings = env as unknown as Record<string, unknown> & { BUCKET: R2Bucket };
const receiverUrl = inject('webhookReceiverUrl');

describe('one failure in a run of the queue consumer or the Cron Trigger', () => {
  it('a malformed queue message is settled on its own; the rest of its batch is handled', async () => {
    const at = new Date();
    const batch = createMessageBatch<unknown>('tailgate-turns', [
      // A well-formed turn of a session that does not exist: done, acked.
      { id: 'good', timestamp: at, attempts: 1, body: { session_id: 'review-missing', turn: 1, writer: 'w' } },
      { id: 'null-body', timestamp: at, attempts: 1, body: null },
      { id: 'text-body', timestamp: at, attempts: 1, body: 'hello' },
      {
        id: 'event-without-body',
        timestamp: at,
        attempts: 1,
        body: { format: 'tailgate.webhook.v1', id: 'msg_x', url: 'https://example.com/h' },
      },
    ]);
    const ctx = createExecutionContext();
    const error = console.error;
    console.error = () => undefined;
    try {
      await expect(worker.queue(batch as never, bindings as never, ctx)).resolves.toBeUndefined();
    } finally {
      console.error = error;
    }
    const result = await getQueueResult(batch, ctx);
    expect(result.explicitAcks.sort()).toEqual(['event-without-body', 'good', 'null-body', 'text-body']);
  });

  it("the Cron Trigger's outbox drain delivers the due events past an intent it cannot resolve", async () => {
    const keyPrefix = `${crypto.randomUUID()}/`;
    const store = new R2Store(bindings.BUCKET);
    const log = new SessionLog(store, { keyPrefix });
    await log.create({ id: 'broken' });
    const scope = await log.scope('broken');
    // The session's config no longer parses: resolving its turns' intents throws.
    await store.put(sessionConfigKey(keyPrefix, 'broken'), 'not json', { contentType: 'application/json' });
    const past = new Date(Date.now() - 60_000).toISOString();
    const put = (entry: WebhookEntry) =>
      store.put(`${keyPrefix}webhooks/outbox/${entry.id}`, JSON.stringify(entry), { contentType: 'application/json' });
    // The intents of the broken session's turns 1..4 (listed first), then an event that is due.
    for (let turn = 1; turn <= 4; turn++)
      await put({
        format: 'tailgate.webhook.v1',
        id: `msg_0000${turn}`,
        url: receiverUrl,
        body: '',
        created_at: past,
        attempts: 0,
        next_attempt_at: past,
        intent: { session_id: 'broken', generation: scope.generation, turn },
      });
    const id = `msg_zz${crypto.randomUUID().replaceAll('-', '')}`;
    await put({
      format: 'tailgate.webhook.v1',
      id,
      url: receiverUrl,
      body: JSON.stringify({ type: 'session.idle', timestamp: past, data: {} }),
      created_at: past,
      attempts: 0,
      next_attempt_at: past,
    });
    const logged = await cronRun(keyPrefix);
    const deliveries = (await (await fetch(receiverUrl)).json()) as { id: string }[];
    expect(
      deliveries.map((delivery) => delivery.id),
      logged.join('\n'),
    ).toContain(id);
    expect(await store.get(`${keyPrefix}webhooks/outbox/${id}`)).toBeNull();
  });

  it('a session whose sweep fails does not keep the Cron Trigger from deleting the other expired ones', async () => {
    const keyPrefix = `${crypto.randomUUID()}/`;
    const store = new R2Store(bindings.BUCKET);
    const fourDaysAgo = new Date(Date.now() - 4 * DAY);
    const threeDaysAgo = new Date(Date.now() - 3 * DAY);
    await new SessionLog(store, { keyPrefix, clock: () => fourDaysAgo }).create({ id: 'older', expires_after_days: 1 });
    await new SessionLog(store, { keyPrefix, clock: () => threeDaysAgo }).create({
      id: 'broken',
      expires_after_days: 1,
    });
    // The newer session's config no longer parses (the index lists it first: newest created first).
    await store.put(sessionConfigKey(keyPrefix, 'broken'), 'not json', { contentType: 'application/json' });
    const logged = await cronRun(keyPrefix);
    const log = new SessionLog(store, { keyPrefix });
    await expect(log.get('older'), logged.join('\n')).rejects.toMatchObject({ code: 'not_found' });
  });
});

/** Runs the Cron Trigger under `keyPrefix` to its end (its waitUntil work too): what it logged. */
async function cronRun(keyPrefix: string): Promise<string[]> {
  const error = console.error;
  const logged: string[] = [];
  console.error = (...args: unknown[]) => void logged.push(args.map(String).join(' '));
  try {
    const context = createExecutionContext();
    await worker.scheduled(
      createScheduledController({ cron: '17 * * * *' }),
      { ...bindings, KEY_PREFIX: keyPrefix } as never,
      context,
    );
    await waitOnExecutionContext(context);
  } finally {
    console.error = error;
  }
  return logged;
}

import { expect, inject, it } from 'vitest';
import { defineWebhooksSuite } from '../http/webhooks-suite.ts';
import type { Delivery } from '../support/webhook-receiver.ts';
import { bindings, workerHarness } from './worker-harness.ts';

// Webhooks inside workerd: a turn's event goes to the WEBHOOKS queue of wrangler.toml, whose
// consumer (this worker's queue handler) posts it to the loopback receiver of
// test/support/workers-global-setup.ts; vitest.config.ts binds its WEBHOOK_SECRET.
const receiverUrl = inject('webhookReceiverUrl');
const harness = workerHarness();

defineWebhooksSuite('workerd (Queues)', harness, receiverUrl, async () => {
  const response = await fetch(receiverUrl);
  return (await response.json()) as Delivery[];
});

it('binds the queue of webhook events from wrangler.toml', () => {
  expect(typeof (bindings.WEBHOOKS as Queue | undefined)?.send).toBe('function');
});

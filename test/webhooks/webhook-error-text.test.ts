import { afterAll, beforeAll, expect, it } from 'vitest';
import { createServices, sessionLogFor } from '../../functions/services.ts';
import { parseServiceConfig } from '../../lib/config.ts';
import { echoModel } from '../../lib/models/echo.ts';
import { ModelError } from '../../lib/models/errors.ts';
import type { Model } from '../../lib/models/model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { runTurn } from '../../lib/turn/index.ts';
import { drainOutbox, outboxSink } from '../../lib/webhooks/outbox.ts';
import { startWebhookReceiver, WEBHOOK_SECRET, type WebhookReceiver } from '../support/webhook-receiver.ts';

// A webhook goes to an outside URL: a failed turn's event carries what a client may see of the
// error (lib/error-codes.ts clientError), as the API's error JSON does, never a provider's own text.

let receiver: WebhookReceiver;
beforeAll(async () => {
  receiver = await startWebhookReceiver();
});
afterAll(() => receiver.close());

// What lib/models/sdk-model.ts (toModelFailure) throws when a provider refuses the call.
const PROVIDER_TEXT = 'Incorrect API key provided: sk-proj-****abcd';
const failing: Model = {
  ...echoModel,
  generate: () =>
    Promise.reject(
      new ModelError(`model openai:gpt-4.1 failed: ${PROVIDER_TEXT}`, { model: 'openai:gpt-4.1', status: 401 }),
    ),
};

it("a turn.failed event carries what a client may see of a model error, not the provider's text", async () => {
  const store = new MemoryStore();
  const config = parseServiceConfig({ WEBHOOK_URL: receiver.url, WEBHOOK_SECRET, WEBHOOK_ALLOW_PRIVATE: 'true' });
  const tasks: Promise<unknown>[] = [];
  const services = createServices({
    store,
    config,
    env: {},
    model: () => failing,
    background: (task) => void tasks.push(task.catch(() => undefined)),
    log: () => {},
    info: () => {},
    webhookSink: outboxSink(store, ''),
  });
  await services.sessions.create({ id: 'leak' });
  await expect(runTurn(services, 'leak', { input: 'hi' })).rejects.toMatchObject({ code: 'model_error' });
  while (tasks.length > 0) await Promise.all(tasks.splice(0));
  await drainOutbox({
    store,
    keyPrefix: '',
    sessions: sessionLogFor(store, config),
    secret: WEBHOOK_SECRET,
    allowPrivate: true,
    clock: () => new Date(),
    log: () => {},
  });
  const failed = [...receiver.delivered().values()].find((delivery) => delivery.event?.type === 'turn.failed');
  expect(failed?.event?.data.error).toEqual({ code: 'model_error', message: 'the model call failed' });
  expect(JSON.stringify([...receiver.delivered().values()])).not.toContain(PROVIDER_TEXT);
});

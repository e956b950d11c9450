import { afterAll } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { sessionLogFor } from '../../functions/services.ts';
import { scheduleWebhooks } from '../../functions/webhooks.ts';
import { parseServiceConfig } from '../../lib/config.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { drainOutbox } from '../../lib/webhooks/outbox.ts';
import { startWebhookReceiver, WEBHOOK_SECRET, type WebhookReceiver } from '../support/webhook-receiver.ts';
import { SIGNING_KEY, TOKEN, type HttpHarness } from './http-suite.ts';
import { defineWebhooksSuite } from './webhooks-suite.ts';

// The app on Node with the store's outbox and the delivery loop of the Node and Deno entries.
const receiver: WebhookReceiver = await startWebhookReceiver();
const store = new MemoryStore();
const loop = scheduleWebhooks(() =>
  drainOutbox({
    store,
    keyPrefix: '',
    sessions: sessionLogFor(store, parseServiceConfig({})),
    secret: WEBHOOK_SECRET,
    allowPrivate: true,
    clock: () => new Date(),
    log: () => {},
  }),
);
const app = createApp({ store: () => store, readEnvironment: (c) => c.env ?? {}, webhookStored: loop.wake });
const environment = {
  API_TOKEN: TOKEN,
  TOKEN_SIGNING_KEY: SIGNING_KEY,
  DEFAULT_MODEL: 'echo',
  WEBHOOK_SECRET,
  WEBHOOK_ALLOW_PRIVATE: 'true',
};
const harness: HttpHarness = {
  fetch: async (path, init) => app.request(path, init, environment),
  fetchWithEnv: async (overrides, path, init) => {
    const env: Record<string, string | undefined> = { ...environment, ...overrides };
    for (const [name, value] of Object.entries(env)) if (value === undefined) delete env[name];
    return app.request(path, init, env);
  },
  store,
  keyPrefix: '',
  logged: [],
};

afterAll(async () => {
  loop.stop();
  await receiver.close();
});

defineWebhooksSuite('Node', harness, receiver.url, async () => receiver.deliveries);

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { appHarness } from '../support/app-harness.ts';
import { FaultyStore, type StoreCall } from '../support/faulty-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { startWebhookReceiver, WEBHOOK_SECRET } from '../support/webhook-receiver.ts';
import { createClient, SIGNING_KEY, TOKEN } from './http-suite.ts';

// A turn whose own completion landed while no webhook intent of it could be stored, and whose
// event then failed too, is answered the event's storage error (lib/session/log/owner-closed.ts,
// ClosedByItsCompletionError), yet it is closed: the session's totals count its usage, and so
// does the spend of the token that ran it (it charged nothing). On the memory and file stores.

let receiver: Awaited<ReturnType<typeof startWebhookReceiver>>;
beforeAll(async () => {
  receiver = await startWebhookReceiver();
});
afterAll(() => receiver.close());

const stores = await memoryAndFileStores('closed-by-completion-charge');
const outboxPut = ({ operation, key }: StoreCall) => operation === 'put' && key.includes('webhooks/outbox/');

function world(inner: ObjectStore) {
  const store = new FaultyStore(inner);
  const tasks: Promise<unknown>[] = [];
  const environment = {
    API_TOKEN: TOKEN,
    TOKEN_SIGNING_KEY: SIGNING_KEY,
    DEFAULT_MODEL: 'echo',
    WEBHOOK_SECRET,
    WEBHOOK_URL: receiver.url,
    WEBHOOK_ALLOW_PRIVATE: 'true',
  };
  const api = createClient(appHarness(store, environment, { afterResponse: (task) => void tasks.push(task) }));
  const drain = async () => {
    while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
  };
  return { store, api, drain };
}

describe.each(stores)('a turn closed by its completion whose webhook event failed: %s', (_, storeOf) => {
  it("charges its token what the session's totals counted", async () => {
    const { store, api, drain } = world(storeOf());
    const minted = await api.post('/v1/tokens', {
      scopes: ['session:turn', 'session:read'],
      budget: { max_total_tokens: 1_000_000 },
    });
    expect(minted.status, JSON.stringify(minted.body)).toBe(201);
    const auth = { authorization: `Bearer ${minted.body.token as string}` };
    const id = await api.session();
    store.failWhen(outboxPut);
    const answered = await api.post(`/v1/sessions/${id}/turns`, { input: 'hello' }, auth);
    expect(answered.status, JSON.stringify(answered.body)).toBe(503);
    store.heal();
    await drain();
    const session = (await api.get(`/v1/sessions/${id}`)).body;
    expect(session.usage.turns).toBe(1);
    expect(session.usage.total_tokens).toBeGreaterThan(0);
    const spent = (await api.get('/v1/tokens/current', auth)).body.usage;
    expect(spent).toMatchObject({
      turns: 1,
      input_tokens: session.usage.input_tokens,
      output_tokens: session.usage.output_tokens,
    });
  });
});

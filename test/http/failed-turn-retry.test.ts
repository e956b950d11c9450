import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, freshId, TOKEN } from './http-suite.ts';

// Taking a failed turn again (docs/DEPLOY.md, "Retries, crashes and stuck turns"): a provider
// that fails each session's first call, then answers. The failed turn's input stays in the
// history, so the model must get the user's message once, not once per attempt.
let provider: FakeProvider;
let api: ReturnType<typeof createClient>;
const failedOnce = new Set<string>();

beforeAll(async () => {
  provider = await startFakeProvider((request) => {
    const text = JSON.stringify(request.body);
    const marker = /attempt-[a-z0-9-]+/.exec(text)?.[0] ?? '';
    if (!failedOnce.has(marker)) {
      failedOnce.add(marker);
      return { status: 500, json: { error: { message: 'upstream exploded', type: 'server_error' } } };
    }
    return { json: JSON.parse(fixture('openai-chat-text.json')) };
  });
  const environment = { API_TOKEN: TOKEN, OPENAI_COMPATIBLE_BASE_URL: provider.baseURL, MODEL_MAX_RETRIES: '0' };
  api = createClient(appHarness(new MemoryStore(), environment));
});

afterAll(async () => {
  await provider?.close();
});

/** How many times the last call to the provider carried `text` as a user message. */
function userMessagesOfLastCall(text: string): number {
  const messages: { role: string; content: unknown }[] = provider.requests.at(-1)!.body.messages;
  return messages.filter((message) => message.role === 'user' && JSON.stringify(message.content).includes(text)).length;
}

/** A session whose first turn failed (502): its input stays, marked failed. */
async function failedFirstTurn(): Promise<{ id: string; text: string }> {
  const text = freshId('attempt');
  const id = await api.session({ model: 'openai-compatible:fake' });
  const failed = await api.post(`/v1/sessions/${id}/turns`, { input: text }, { 'idempotency-key': freshId('k') });
  expect(failed.status).toBe(502);
  expect((await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('failed');
  return { id, text };
}

describe('taking a failed turn again', () => {
  it('the same input under a new key reaches the model twice: the failed turn kept it', async () => {
    const { id, text } = await failedFirstTurn();
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: text }, { 'idempotency-key': freshId('k') });
    expect(again.status).toBe(200);
    expect(userMessagesOfLastCall(text)).toBe(2);
  });

  it('a delete of the failed newest turn, then the input under a new key: the model gets it once', async () => {
    const { id, text } = await failedFirstTurn();
    const deleted = await api.delete(`/v1/sessions/${id}/turns/1`);
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(200);
    const again = await api.post(`/v1/sessions/${id}/turns`, { input: text }, { 'idempotency-key': freshId('k') });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body.turn).toBe(1);
    expect(userMessagesOfLastCall(text)).toBe(1);
    const items = (await api.get(`/v1/sessions/${id}/items`)).body.items;
    expect(items.filter((item: any) => item.role === 'user').map((item: any) => item.content)).toEqual([text]);
  });

  it('without a delete, a next turn that does not repeat the input: the model gets the message once', async () => {
    const { id, text } = await failedFirstTurn();
    const next = await api.post(`/v1/sessions/${id}/turns`, { input: 'Please answer my last message.' });
    expect(next.status, JSON.stringify(next.body)).toBe(200);
    expect(userMessagesOfLastCall(text)).toBe(1);
    expect(userMessagesOfLastCall('Please answer my last message.')).toBe(1);
  });
});

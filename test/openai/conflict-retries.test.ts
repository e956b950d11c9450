import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SIGNING_KEY } from '../http/http-suite.ts';
import { startFakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { clientInProcess, TOKEN } from './server.ts';

// The official client retries a 409 (twice by default) unless the answer says
// `x-should-retry: false`. A conflict that a retry cannot clear says it, so the client throws at
// once instead of sending the same refused request again.
const store = new MemoryStore();
const environment = { API_TOKEN: TOKEN, TOKEN_SIGNING_KEY: SIGNING_KEY, ALLOW_ANONYMOUS: 'false' };
const app = createApp({ store: () => store, readEnvironment: () => environment, log: () => {} });
const requests: string[] = [];
// The client's defaults: maxRetries 2.
const client = new OpenAI({
  apiKey: TOKEN,
  baseURL: 'http://tailgate.test/v1',
  fetch: async (url: string | URL | Request, init?: RequestInit) => {
    requests.push(`${init?.method ?? 'GET'} ${new URL(String(url)).pathname}`);
    return app.request(String(url), init);
  },
});

async function refusal(work: () => Promise<unknown>): Promise<{ error: unknown; sent: string[] }> {
  requests.length = 0;
  const error = await work().then(
    () => 'succeeded',
    (caught: unknown) => caught,
  );
  return { error, sent: [...requests] };
}

describe('a conflict no retry clears is not retried by the official client', () => {
  it('delete_refused: deleting a response another came after', async () => {
    const first = await client.responses.create({ model: 'echo', input: 'first' });
    await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'second' });
    const { error, sent } = await refusal(() => client.responses.delete(first.id));
    expect(error).toBeInstanceOf(OpenAI.ConflictError);
    expect(error).toMatchObject({ code: 'delete_refused' });
    expect((error as InstanceType<typeof OpenAI.ConflictError>).headers.get('x-should-retry')).toBe('false');
    expect(sent).toEqual([`DELETE /v1/responses/${first.id}`]);
  });

  it('conversation_branching_unsupported: compacting at a response another came after', async () => {
    const first = await client.responses.create({ model: 'echo', input: 'first' });
    await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'second' });
    const { error, sent } = await refusal(() =>
      client.responses.compact({ model: 'echo', previous_response_id: first.id }),
    );
    expect(error).toMatchObject({ status: 409, code: 'conversation_branching_unsupported' });
    expect((error as InstanceType<typeof OpenAI.ConflictError>).headers.get('x-should-retry')).toBe('false');
    expect(sent).toEqual(['POST /v1/responses/compact']);
  });
});

describe('a delete refused only because its turn is running stays retryable', () => {
  it('says no x-should-retry, facade and native alike, and details.running', async () => {
    let reached!: () => void;
    const called = new Promise<void>((resolve) => {
      reached = resolve;
    });
    const provider = await startFakeProvider(() => {
      reached();
      return { hang: true };
    });
    const heldStore = new MemoryStore();
    const held = createApp({
      store: () => heldStore,
      readEnvironment: () => ({
        ...environment,
        OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
        MODEL_ALIASES: 'held=openai-compatible:fake',
        MODEL_MAX_RETRIES: '0',
        MODEL_TIMEOUT_MS: '600000',
      }),
      log: () => {},
    });
    const heldClient = clientInProcess(held, TOKEN);
    try {
      const running = await heldClient.responses.create({ model: 'held', input: 'hang on', background: true });
      await called;
      const call = (method: string, path: string) =>
        held.request(`http://tailgate.test/v1${path}`, { method, headers: { authorization: `Bearer ${TOKEN}` } });
      const facade = await call('DELETE', `/responses/${running.id}`);
      expect(facade.status).toBe(409);
      expect(facade.headers.get('x-should-retry')).toBeNull();
      expect(await facade.json()).toMatchObject({ error: { code: 'delete_refused', details: { running: true } } });
      const native = await call('DELETE', `/sessions/${running.conversation!.id}/turns/1`);
      expect(native.status).toBe(409);
      expect(native.headers.get('x-should-retry')).toBeNull();
      expect(await native.json()).toMatchObject({ error: { code: 'delete_refused', details: { running: true } } });
      await heldClient.responses.cancel(running.id);
    } finally {
      await provider.close();
    }
  });
});

describe('a missing setting is not retried by the official client', () => {
  it('not_configured: a model whose provider has no key, facade and native alike', async () => {
    // The client retries a 503 twice unless told not to; the setting stays missing until the operator sets it.
    const { error, sent } = await refusal(() => client.responses.create({ model: 'openai:gpt-4.1-mini', input: 'hi' }));
    expect(error).toBeInstanceOf(OpenAI.InternalServerError);
    expect(error).toMatchObject({ status: 503, code: 'not_configured' });
    expect((error as InstanceType<typeof OpenAI.InternalServerError>).headers.get('x-should-retry')).toBe('false');
    expect(sent).toEqual(['POST /v1/responses']);
    await app.request('http://tailgate.test/v1/sessions', {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'unconfigured-model' }),
    });
    const native = await app.request('http://tailgate.test/v1/sessions/unconfigured-model/turns', {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'hi', model: 'openai:gpt-4.1-mini' }),
    });
    expect(native.status).toBe(503);
    expect(native.headers.get('x-should-retry')).toBe('false');
  });
});

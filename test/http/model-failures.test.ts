import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { decodeUtf8 } from '../../lib/store/object-store.ts';
import { createClient, freshId, parseSse, TOKEN, type HttpHarness } from './http-suite.ts';

// Model failures through the real app: a fake OpenAI-compatible provider on loopback that
// fails (500) or never answers, so the turn must end 502/504 with its input kept.
let mode: 'fail' | 'hang' | 'echo-key' = 'fail';
let calls = 0;
let server: Server;
let baseUrl = '';
const hanging = new Set<import('node:http').ServerResponse>();

beforeAll(async () => {
  server = createServer((request, response) => {
    calls += 1;
    request.resume();
    if (mode === 'hang') {
      hanging.add(response);
      return;
    }
    response.writeHead(mode === 'echo-key' ? 401 : 500, { 'content-type': 'application/json' });
    // A proxy that quotes the key it was sent, as some OpenAI-compatible servers do.
    const message = mode === 'echo-key' ? `bad key: ${request.headers.authorization}` : 'upstream exploded';
    response.end(JSON.stringify({ error: { message, type: 'server_error' } }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});

afterAll(async () => {
  for (const response of hanging) response.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const store = new MemoryStore();
const logged: string[] = [];
// What each log line carried (the error), for the provider's text that only the log gets.
const loggedDetails: unknown[] = [];
const app = createApp({
  store: () => store,
  readEnvironment: (c) => c.env ?? {},
  log: (message, details) => {
    logged.push(message);
    loggedDetails.push(details);
  },
});
const GENERIC = {
  code: 'model_error',
  message: 'the model call failed',
  details: { model: 'openai-compatible:fake', status: 500 },
};

/** Whether the log got the provider's text (and nothing stored or answered did). */
function providerTextLogged(): boolean {
  return loggedDetails.some((details) => details instanceof Error && details.message.includes('upstream exploded'));
}
// A short deadline only for the provider that never answers: one that fails answers at once,
// but on a loaded machine "at once" may take longer than 300 ms, which would time it out.
const PROVIDER_KEY = 'sk-provider-key-that-only-the-operator-knows';
const environment = () => ({
  API_TOKEN: TOKEN,
  OPENAI_COMPATIBLE_API_KEY: PROVIDER_KEY,
  OPENAI_COMPATIBLE_BASE_URL: baseUrl,
  MODEL_MAX_RETRIES: '0',
  ...(mode === 'hang' ? { MODEL_TIMEOUT_MS: '300' } : {}),
});
const harness: HttpHarness = {
  fetch: async (path, init) => app.request(path, init, environment()),
  fetchWithEnv: async (overrides, path, init) => app.request(path, init, { ...environment(), ...overrides }),
  store,
  keyPrefix: '',
  logged,
};
const api = createClient(harness);

async function doneRecords(sessionId: string): Promise<any[]> {
  const listed = await store.list(`sessions/${sessionId}/turn/`);
  const done = listed.objects.filter((object) => object.key.endsWith('.done'));
  return Promise.all(done.map(async (object) => JSON.parse(decodeUtf8((await store.get(object.key))!.body))));
}

describe('model failures', () => {
  it('a failing provider gives 502 model_error; the input stays stored and the turn is closed as failed', async () => {
    mode = 'fail';
    const id = await api.session({ model: 'openai-compatible:fake' });
    const before = calls;
    const key = { 'idempotency-key': freshId('fail') };
    const response = await api.post(`/v1/sessions/${id}/turns`, { input: 'will fail' }, key);
    expect(response.status).toBe(502);
    expect(response.body.error).toEqual({
      code: 'model_error',
      message: 'the model call failed',
      details: { model: 'openai-compatible:fake', status: 500 },
    });
    expect(calls).toBe(before + 1);
    const items = await api.get(`/v1/sessions/${id}/items`);
    expect(items.body.items.map((item: any) => item.content)).toEqual(['will fail']);
    const [done] = await doneRecords(id);
    // The provider's text (it may carry account details) goes to the log only: the completion and
    // the receipt a session:read token reads store the error as the client was answered it.
    expect(done).toMatchObject({ status: 'failed', error: GENERIC });
    expect(JSON.stringify(done)).not.toContain('upstream exploded');
    const receipt = await api.get(`/v1/sessions/${id}/turns/1`);
    expect(receipt.body.error).toEqual(GENERIC);
    expect(JSON.stringify((await api.get(`/v1/sessions/${id}/turns`)).body)).not.toContain('upstream exploded');
    expect(providerTextLogged()).toBe(true);

    // The replay of the same key answers the stored error, without calling the provider.
    const replayed = await api.post(`/v1/sessions/${id}/turns`, { input: 'will fail' }, key);
    expect(replayed.status).toBe(502);
    expect(replayed.body).toEqual(response.body);
    expect(calls).toBe(before + 1);

    // The turn is closed: the next one (with the echo model) is not 409.
    const next = await api.post(`/v1/sessions/${id}/turns`, { input: 'retry', model: 'echo' });
    expect(next.status).toBe(200);
    expect(next.body.turn).toBe(2);
    expect(next.body.output[0].seq).toBe(3);
  });

  it("a provider's error text that quotes its key is logged with the key replaced, streamed or not", async () => {
    mode = 'echo-key';
    loggedDetails.length = 0;
    const id = await api.session({ model: 'openai-compatible:fake' });
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'key' })).status).toBe(502);
    const streamed = await api.post(`/v1/sessions/${id}/turns`, { input: 'key', stream: true });
    expect(parseSse(streamed.body).map((event) => event.event)).toEqual(['turn.started', 'error']);
    const messages = loggedDetails.filter((details) => details instanceof Error).map((error) => error.message);
    expect(messages).toEqual([
      'model openai-compatible:fake failed: bad key: Bearer [redacted]',
      'model openai-compatible:fake failed: bad key: Bearer [redacted]',
    ]);
    // An Error's own fields are not enumerable: its message, stack and cause are looked at one by one.
    const logged = loggedDetails.map((details) =>
      details instanceof Error ? [details.message, details.stack, String(details.cause)] : details,
    );
    expect(JSON.stringify(logged)).not.toContain(PROVIDER_KEY);
  });

  it('a session whose model needs a key the deployment lacks gives 503 not_configured and stores nothing', async () => {
    const id = await api.session();
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first' })).status).toBe(200);
    const before = await store.list(`sessions/${id}/`);
    // The deployment changed: the session's model is now one whose provider has no key here.
    const config = `sessions/${id}/session.json`;
    const stored = JSON.parse(decodeUtf8((await store.get(config))!.body));
    await store.put(config, JSON.stringify({ ...stored, model: 'anthropic:claude-sonnet-4-5' }));
    const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'second' });
    expect(refused.status).toBe(503);
    expect(refused.body.error).toMatchObject({ code: 'not_configured', details: { setting: 'ANTHROPIC_API_KEY' } });
    // Its message starts with the field it names, as the model's other refusals' do.
    expect(refused.body.error.details.field).toBe('model');
    expect(refused.body.error.message).toMatch(/^model: /);
    const after = await store.list(`sessions/${id}/`);
    expect(after.objects.map((object) => object.key).filter((key) => !key.endsWith('session.json'))).toEqual(
      before.objects.map((object) => object.key).filter((key) => !key.endsWith('session.json')),
    );
    expect((await api.get(`/v1/sessions/${id}`)).body.counts.turns).toBe(1);
  });

  it('a provider that does not answer in time gives 504 model_timeout', async () => {
    mode = 'hang';
    const id = await api.session({ model: 'openai-compatible:fake' });
    const response = await api.post(`/v1/sessions/${id}/turns`, { input: 'too slow' });
    expect(response.status).toBe(504);
    expect(response.body.error.code).toBe('model_timeout');
    expect((await api.get(`/v1/sessions/${id}`)).body.counts).toMatchObject({ items: 1, turns: 1 });
  });

  it('a streaming turn whose model fails ends with an error event after turn.started', async () => {
    mode = 'fail';
    const id = await api.session({ model: 'openai-compatible:fake' });
    const response = await api.post(`/v1/sessions/${id}/turns`, { input: 'stream fail', stream: true });
    expect(response.status).toBe(200);
    const events = parseSse(response.body);
    expect(events.map((event) => event.event)).toEqual(['turn.started', 'error']);
    expect(events[1]!.data.error).toMatchObject({ code: 'model_error', message: 'the model call failed' });
    expect(JSON.stringify(events[1]!.data)).not.toContain('upstream exploded');
    const [done] = await doneRecords(id);
    expect(done.status).toBe('failed');
    expect(done.error).toEqual(GENERIC);
    // The journal stores the event as it was sent: its replay holds no provider text either.
    const replayed = await api.get(`/v1/sessions/${id}/turns/1/events`);
    expect(replayed.status).toBe(200);
    expect(JSON.stringify(replayed.body)).toContain('the model call failed');
    expect(JSON.stringify(replayed.body)).not.toContain('upstream exploded');
    const stored = await store.list(`sessions/${id}/`);
    for (const object of stored.objects)
      expect(decodeUtf8((await store.get(object.key))!.body)).not.toContain('upstream exploded');
  });

  it('a background turn whose model fails stores the generic error; the provider text is logged', async () => {
    mode = 'fail';
    loggedDetails.length = 0;
    const id = await api.session({ model: 'openai-compatible:fake' });
    const accepted = await api.post(`/v1/sessions/${id}/turns`, { input: 'background fail', background: true });
    expect(accepted.status).toBe(202);
    const events = await api.get(`/v1/sessions/${id}/turns/1/events`);
    expect(parseSse(events.body).at(-1)).toMatchObject({ event: 'error', data: { error: GENERIC } });
    const receipt = await api.get(`/v1/sessions/${id}/turns/1`);
    expect(receipt.body).toMatchObject({ status: 'failed', error: GENERIC });
    const stored = await store.list(`sessions/${id}/`);
    for (const object of stored.objects)
      expect(decodeUtf8((await store.get(object.key))!.body)).not.toContain('upstream exploded');
    // The failure's log message names the request that started the turn (its x-request-id).
    expect(accepted.headers.get('x-request-id')).toMatch(/^req_[0-9a-f]{24}$/);
    expect(logged).toContain(
      `tailgate: background turn 1 of session ${id} failed (${accepted.headers.get('x-request-id')})`,
    );
    expect(providerTextLogged()).toBe(true);
  });
});

describe('receipts', () => {
  it('each turn stores a compact receipt of what the model saw', async () => {
    const id = await api.session({
      strategies: ['shorten_tools_epoch', 'inbox'],
      strategy_config: {
        epoch_tool_call_threshold: 2,
        epoch_full_tool_calls: 1,
        epoch_compacted_tool_calls: 1,
        epoch_size: 1,
      },
    });
    const items: unknown[] = [{ type: 'message', role: 'user', content: 'start' }];
    for (let index = 1; index <= 5; index++) {
      items.push({ type: 'function_call', call_id: `c${index}`, name: 'read', arguments: `{"n":${index}}` });
      items.push({ type: 'function_call_output', call_id: `c${index}`, output: `result ${index} `.repeat(100) });
    }
    await api.post(`/v1/sessions/${id}/items`, { items });
    await api.post(`/v1/sessions/${id}/inbox`, { name: 'n.md', content: 'note' });
    const turn = await api.post(`/v1/sessions/${id}/turns`, { input: 'summarize', model: 'echo' });
    expect(turn.status).toBe(200);
    const context = turn.body.context;
    expect(context.tool_calls_total).toBe(5);
    expect(context.kept_full + context.compacted + context.dropped).toBe(5);
    expect(context.compacted + context.dropped).toBeGreaterThan(0);
    const [done] = await doneRecords(id);
    expect(done.status).toBe('completed');
    expect(done.receipt).toMatchObject({
      model: 'echo',
      strategies: ['shorten_tools_epoch', 'inbox'],
      notices: [expect.objectContaining({ name: 'n.md', stored_as: 'n.md' })],
    });
    expect(typeof done.receipt.whole).toBe('string');
    expect(done.receipt.whole).toMatch(/^[\d,-]*$/);
    expect(done.receipt.compacted.length + done.receipt.dropped.length).toBeGreaterThan(0);
    expect(done.response).toEqual(turn.body);
  });
});

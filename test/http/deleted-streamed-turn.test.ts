import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { appHarness } from '../support/app-harness.ts';
import { sseReader } from '../support/sse-reader.ts';
import { createClient, parseSse, TOKEN, type HttpHarness } from './http-suite.ts';

// A streamed turn whose session is deleted while the model answers (slowly, event by event):
// the turn's end is refused (the session is gone), said once in the log, without a stack, and
// nothing of its journal is written into the swept session.
let provider: FakeProvider;
let harness: HttpHarness;
const logs: { message: string; details: unknown }[] = [];
// The work the app leaves after its responses (a streamed turn's last journal batch).
const tasks: Promise<unknown>[] = [];
const drain = async () => {
  while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
};

beforeAll(async () => {
  provider = await startFakeProvider(() => ({ sse: fixture('openai-chat-text.sse'), gapMs: 250 }));
  const environment = {
    API_TOKEN: TOKEN,
    OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
    MODEL_MAX_RETRIES: '0',
    TURN_LEASE_MS: '3000',
  };
  harness = appHarness(new MemoryStore(), environment, {
    log: (message, details) => logs.push({ message, details }),
    info: (message) => logs.push({ message, details: 'info' }),
    afterResponse: (task) => void tasks.push(task),
  });
});

afterAll(async () => {
  await provider?.close();
});

describe('a streamed turn whose session is deleted', () => {
  it('ends with one routine log line and journals nothing into the swept session', async () => {
    const api = createClient(harness);
    const id = await api.session({ model: 'openai-compatible:fake' });
    const response = await harness.fetch(`/v1/sessions/${id}/turns`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'answer slowly', stream: true }),
    });
    expect(response.status).toBe(200);
    const reader = sseReader(response);
    await reader.until('event: output_text.delta');
    expect((await api.delete(`/v1/sessions/${id}`)).status).toBe(204);
    const text = await reader.rest();
    expect(parseSse(text).at(-1)).toMatchObject({ event: 'error', data: { error: { code: 'not_found' } } });
    // The journal's last batch is written after the response.
    await drain();
    expect(logs.map((log) => log.message)).toEqual([
      `tailgate: a streamed turn of session ${id} stopped: the session was deleted`,
    ]);
    expect(logs[0]!.details).toBe('info');
    const left = await harness.store.list(`sessions/${id}/`);
    expect(left.objects.filter((object) => object.key.includes('/events/'))).toEqual([]);
  });

  it("ends its events reader's stream with not_found, as the turn's own stream ends", async () => {
    const api = createClient(harness);
    const id = await api.session({ model: 'openai-compatible:fake' });
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const response = await harness.fetch(`/v1/sessions/${id}/turns`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ input: 'answer slowly', stream: true }),
    });
    const own = sseReader(response);
    await own.until('event: output_text.delta');
    const events = await harness.fetch(`/v1/sessions/${id}/turns/1/events`, { headers });
    expect(events.status).toBe(200);
    const reader = sseReader(events);
    await reader.until('event: turn.started');
    const logged = logs.length;
    expect((await api.delete(`/v1/sessions/${id}`)).status).toBe(204);
    const text = await reader.rest();
    const last = parseSse(text).at(-1);
    expect(last).toMatchObject({ event: 'error', data: { error: { code: 'not_found' } } });
    // No id: it is no event of the turn's journal.
    expect(text.trimEnd().split('\n\n').at(-1)).not.toMatch(/^id:/m);
    await own.rest();
    // A client's answer, not the server's failure: nothing logged of the reader.
    expect(logs.slice(logged).filter((log) => !log.message.includes('stopped: the session was deleted'))).toEqual([]);
  });
});

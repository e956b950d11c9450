import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, parseSse, TOKEN } from './http-suite.ts';

// The Idempotency-Key of the OpenAI-compatible routes (docs/API.md, "Headers"): one key stores
// at most one input, a retry gets the first answer, and the key with another body is a 422.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };
const api = createClient(appHarness(new MemoryStore(), environment));

describe('Idempotency-Key on POST /v1/conversations', () => {
  it('answers 422 idempotency_key_reused when the key is sent again with a different body', async () => {
    const key = { 'idempotency-key': 'conversation-reused-1' };
    const first = await api.post('/v1/conversations', { metadata: { owner: 'alice' } }, key);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const again = await api.post('/v1/conversations', { metadata: { owner: 'alice' } }, key);
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body.id).toBe(first.body.id);
    const second = await api.post('/v1/conversations', { metadata: { owner: 'bob' } }, key);
    expect(second.status, JSON.stringify(second.body)).toBe(422);
    expect(second.body).toMatchObject({ error: { code: 'idempotency_key_reused' } });
    expect((await api.get(`/v1/conversations/${first.body.id}`)).body.metadata).toEqual({ owner: 'alice' });
  });

  it('stores the items once when retries of one create run concurrently', async () => {
    const key = { 'idempotency-key': 'conversation-race-1' };
    const body = { items: [{ type: 'message', role: 'user', content: 'once' }] };
    const results = await Promise.all([1, 2, 3].map(() => api.post('/v1/conversations', body, key)));
    for (const result of results) expect(result.status, JSON.stringify(result.body)).toBe(200);
    expect(new Set(results.map((result) => result.body.id)).size).toBe(1);
    const session = await api.get(`/v1/sessions/${results[0]!.body.id}`);
    expect(session.body.counts.items).toBe(1);
    const listed = await api.get(`/v1/conversations/${results[0]!.body.id}/items`);
    expect(listed.body.data.map((item: { content: { text: string }[] }) => item.content[0]!.text)).toEqual(['once']);
  });
});

describe('Idempotency-Key on POST /v1/responses', () => {
  it('answers a keyed retry with the first response, its created_at and completed_at included', async () => {
    let now = Date.parse('2026-03-01T12:00:00.000Z');
    const clocked = createClient(appHarness(new MemoryStore(), environment, { clock: () => new Date(now) }));
    const key = { 'idempotency-key': 'response-replay-1' };
    const body = { model: 'echo', input: 'hello' };
    const first = await clocked.post('/v1/responses', body, key);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body).toMatchObject({ created_at: now / 1000, completed_at: now / 1000 });
    now += 90_000;
    const again = await clocked.post('/v1/responses', body, key);
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(again.body).toEqual(first.body);
    expect((await clocked.get(`/v1/responses/${first.body.id}`)).body).toEqual(first.body);
    const streamed = await clocked.post('/v1/responses', { ...body, stream: true }, key);
    expect(streamed.status).toBe(200);
    const events = parseSse(streamed.body);
    expect(events.find((event) => event.event === 'response.created')?.data.response).toMatchObject({
      id: first.body.id,
      created_at: first.body.created_at,
    });
    expect(events.find((event) => event.event === 'response.completed')?.data.response).toEqual(first.body);
  });
});

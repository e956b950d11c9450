import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, parseSse, TOKEN } from './http-suite.ts';

// The OpenAI-compatible routes take their times from the app's clock (AppOptions.clock), as the
// session log does: a fixed clock gives every object of theirs that time.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };
const NOW = Date.parse('2026-03-01T12:00:00.000Z');
const SECONDS = NOW / 1000;

function clocked() {
  const store = new MemoryStore();
  return { store, api: createClient(appHarness(store, environment, { clock: () => new Date(NOW) })) };
}

/** The JSON chunks of a chat completion's stream (the `[DONE]` line left out). */
function chunks(text: string): { created: number }[] {
  return text
    .split('\n')
    .filter((line) => line.startsWith('data: {'))
    .map((line) => JSON.parse(line.slice(6)));
}

describe("the OpenAI facade's times come from the app's clock", () => {
  it('in a stateless response (store: false), answered and streamed', async () => {
    const { api } = clocked();
    const body = { model: 'echo', input: 'hello', store: false };
    const answered = await api.post('/v1/responses', body);
    expect(answered.status, JSON.stringify(answered.body)).toBe(200);
    expect(answered.body).toMatchObject({ created_at: SECONDS, completed_at: SECONDS });
    const streamed = await api.post('/v1/responses', { ...body, stream: true });
    const events = parseSse(streamed.body);
    expect(events.find((event) => event.event === 'response.created')?.data.response.created_at).toBe(SECONDS);
    expect(events.at(-1)?.event).toBe('response.completed');
    expect(events.at(-1)?.data.response).toMatchObject({ created_at: SECONDS, completed_at: SECONDS });
  });

  it('in a chat completion, answered and streamed', async () => {
    const { api } = clocked();
    const body = { model: 'echo', messages: [{ role: 'user', content: 'hello' }] };
    const answered = await api.post('/v1/chat/completions', body);
    expect(answered.status, JSON.stringify(answered.body)).toBe(200);
    expect(answered.body.created).toBe(SECONDS);
    const streamed = await api.post('/v1/chat/completions', { ...body, stream: true });
    const created = chunks(streamed.body).map((chunk) => chunk.created);
    expect(created.length).toBeGreaterThan(0);
    expect(new Set(created)).toEqual(new Set([SECONDS]));
  });

  it('in a compact response, of an input and of a stored conversation', async () => {
    const { api } = clocked();
    const inline = await api.post('/v1/responses/compact', { model: 'echo', input: 'a long story to summarize' });
    expect(inline.status, JSON.stringify(inline.body)).toBe(200);
    expect(inline.body.created_at).toBe(SECONDS);
    const stored = await api.post('/v1/responses', { model: 'echo', input: 'hello' });
    const compacted = await api.post('/v1/responses/compact', { model: 'echo', previous_response_id: stored.body.id });
    expect(compacted.status, JSON.stringify(compacted.body)).toBe(200);
    expect(compacted.body.created_at).toBe(SECONDS);
  });

  it('in a stored response rebuilt from its items (its kept object gone)', async () => {
    const { store, api } = clocked();
    const stored = await api.post('/v1/responses', { model: 'echo', input: 'hello' });
    expect(stored.status, JSON.stringify(stored.body)).toBe(200);
    const listed = await store.list(`sessions/${stored.body.conversation.id}/`, { limit: 1000 });
    const kept = listed.objects.filter((object) => object.key.includes('/openai/'));
    expect(kept).toHaveLength(1);
    await store.delete(kept[0]!.key);
    const rebuilt = await api.get(`/v1/responses/${stored.body.id}`);
    expect(rebuilt.status, JSON.stringify(rebuilt.body)).toBe(200);
    expect(rebuilt.body).toMatchObject({ status: 'completed', created_at: SECONDS, completed_at: SECONDS });
  });
});

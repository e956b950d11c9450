import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, parseSse, TOKEN } from './http-suite.ts';

// A model's output item is held to MAX_ITEM_BYTES as an append's and an import's are: the echo
// model's answer ("echo: " and the input, from the assistant) is 11 bytes longer than the item
// it echoes, so an input within the limit brings an answer over it.
const MAX_ITEM_BYTES = 1000;
const environment = {
  API_TOKEN: TOKEN,
  ALLOW_ANONYMOUS: 'false',
  DEFAULT_MODEL: 'echo',
  MAX_ITEM_BYTES: String(MAX_ITEM_BYTES),
};
const api = createClient(appHarness(new MemoryStore(), environment));
/** The longest user message within MAX_ITEM_BYTES. */
const input = 'x'.repeat(MAX_ITEM_BYTES - JSON.stringify({ type: 'message', role: 'user', content: '' }).length);
const refused = {
  code: 'payload_too_large',
  message: `the model's output item 0 is ${MAX_ITEM_BYTES + 11} bytes; one item may hold at most ${MAX_ITEM_BYTES}`,
  details: { index: 0, size: MAX_ITEM_BYTES + 11, limit: MAX_ITEM_BYTES, source: 'output' },
};

describe('a model output item over MAX_ITEM_BYTES', () => {
  it('fails the turn 413 payload_too_large, streamed or not; only its input is stored, which imports', async () => {
    const id = await api.session();
    const answered = await api.post(`/v1/sessions/${id}/turns`, { input });
    expect(answered.status, JSON.stringify(answered.body)).toBe(413);
    expect(answered.body).toEqual({ error: refused });
    const streamed = await api.post(`/v1/sessions/${id}/turns`, { input }, { accept: 'text/event-stream' });
    const events = parseSse(streamed.body as string);
    expect(events.at(-1)).toMatchObject({ event: 'error', data: { error: refused } });
    const items = await api.get(`/v1/sessions/${id}/items`);
    expect(items.body.items.map((item: { role: string; seq: number }) => [item.seq, item.role])).toEqual([
      [2, 'user'],
      [1, 'user'],
    ]);
    const turns = await api.get(`/v1/sessions/${id}/turns`);
    expect(turns.body.turns.map((turn: { status: string }) => turn.status)).toEqual(['failed', 'failed']);
    // What is stored is exported and imported whole.
    const exported = await api.get(`/v1/sessions/${id}/export`);
    expect(exported.status).toBe(200);
    const elsewhere = createClient(appHarness(new MemoryStore(), environment));
    const imported = await elsewhere.post('/v1/sessions/import', exported.body, {
      'content-type': 'application/x-ndjson',
    });
    expect(imported.status, JSON.stringify(imported.body)).toBe(201);
    // An answer within the limit is stored.
    const small = await api.post(`/v1/sessions/${id}/turns`, { input: 'hi' });
    expect(small.body.output).toEqual([{ type: 'message', role: 'assistant', content: 'echo: hi', seq: 4 }]);
  });
});

describe('the model call of a turn whose output item is over MAX_ITEM_BYTES', () => {
  it("is charged to the session's totals (as no turn), streamed or not, so its budget holds", async () => {
    const id = await api.session({ budget: { max_total_tokens: 600 } });
    const answered = await api.post(`/v1/sessions/${id}/turns`, { input });
    expect(answered.status, JSON.stringify(answered.body)).toBe(413);
    const once = (await api.get(`/v1/sessions/${id}`)).body.usage;
    expect(once).toMatchObject({ turns: 0 });
    expect(once.input_tokens).toBeGreaterThan(0);
    expect(once.output_tokens).toBeGreaterThan(0);
    const streamed = await api.post(`/v1/sessions/${id}/turns`, { input }, { accept: 'text/event-stream' });
    expect(parseSse(streamed.body as string).at(-1)).toMatchObject({ event: 'error', data: { error: refused } });
    const twice = (await api.get(`/v1/sessions/${id}`)).body.usage;
    // Its prompt holds the first input too.
    expect(twice).toMatchObject({ turns: 0, output_tokens: 2 * once.output_tokens });
    expect(twice.input_tokens).toBeGreaterThan(2 * once.input_tokens);
    // The budget is spent: the next turn is refused before its model call.
    const refusedTurn = await api.post(`/v1/sessions/${id}/turns`, { input: 'hi' });
    expect(refusedTurn.status, JSON.stringify(refusedTurn.body)).toBe(402);
  });
});

describe('an input item over MAX_ITEM_BYTES', () => {
  const big = 'y'.repeat(MAX_ITEM_BYTES + 1);
  const size = JSON.stringify({ type: 'message', role: 'user', content: big }).length;
  const limit = `one item may hold at most ${MAX_ITEM_BYTES}`;

  it("is a 413 naming the item by its place in the request's field, natively", async () => {
    const id = await api.session();
    const input = [
      { type: 'message', role: 'user', content: 'hi' },
      { type: 'message', role: 'user', content: big },
    ];
    const turn = await api.post(`/v1/sessions/${id}/turns`, { input });
    expect(turn.status, JSON.stringify(turn.body)).toBe(413);
    expect(turn.body.error).toEqual({
      code: 'payload_too_large',
      message: `input[1]: the item is ${size} bytes; ${limit}`,
      details: { field: 'input.1', index: 1, size, limit: MAX_ITEM_BYTES },
    });
    const append = await api.post(`/v1/sessions/${id}/items`, { items: input });
    expect(append.status, JSON.stringify(append.body)).toBe(413);
    expect(append.body.error).toMatchObject({
      message: `items[1]: the item is ${size} bytes; ${limit}`,
      details: { field: 'items.1', index: 1 },
    });
  });

  it('names its place in the request on the OpenAI-compatible routes, a system message before it', async () => {
    const input = [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'hi' },
      { role: 'user', content: big },
    ];
    const response = await api.post('/v1/responses', { model: 'echo', input });
    expect(response.status, JSON.stringify(response.body)).toBe(413);
    expect(response.body.error).toMatchObject({
      message: `input[2]: the item is ${size} bytes; ${limit}`,
      param: 'input[2]',
      code: 'payload_too_large',
    });
    const chat = await api.post('/v1/chat/completions', { model: 'echo', messages: input });
    expect(chat.status, JSON.stringify(chat.body)).toBe(413);
    expect(chat.body.error).toMatchObject({ param: 'messages[2]' });
    const conversation = await api.post('/v1/conversations', { items: input });
    expect(conversation.status, JSON.stringify(conversation.body)).toBe(413);
    expect(conversation.body.error).toMatchObject({ param: 'items[2]' });
  });
});

import { describe, expect, it } from 'vitest';
import { fakeProviderForFile, fixture } from '../support/fake-providers/fake-provider-server.ts';
import { spendWorld as world } from './spend-world.ts';

// A provider's usage is stored in the turn's completion (the session's totals), in the turn's
// receipt and in its token's spend, whose readers take whole, non-negative token counts. An
// OpenAI-compatible backend may report another number (a fraction, a negative count): what it
// reported is stored as the count those readers take, and the session stays readable.

const fake = fakeProviderForFile();

/** A session whose first turn the fake provider answered (`fake.next`), its background work done. */
async function firstTurn() {
  const { api, auth, drain } = await world(fake.provider.baseURL, { MODEL_MAX_RETRIES: '0' });
  const id = await api.session();
  const turn = await api.post(`/v1/sessions/${id}/turns`, { input: 'Hello there' }, auth);
  expect(turn.status, JSON.stringify(turn.body)).toBe(200);
  await drain();
  return { api, auth, drain, id };
}

/** The recorded Chat Completions answer with its usage's token counts replaced. */
function answerWithUsage(prompt: number, completion: number, cached = 0) {
  const answer = JSON.parse(fixture('openai-chat-text.json'));
  answer.usage = {
    ...answer.usage,
    prompt_tokens: prompt,
    completion_tokens: completion,
    prompt_tokens_details: { cached_tokens: cached, audio_tokens: 0 },
  };
  return { json: answer };
}

describe("a provider's usage that is no whole, non-negative count", () => {
  it.each([
    ['fractional', 19.5, 10.25, { input_tokens: 20, output_tokens: 10 }],
    ['negative', -3, -1, { input_tokens: 0, output_tokens: 0 }],
  ])('%s: the turn is stored with counts its readers take', async (_name, prompt, completion, counted) => {
    fake.next = answerWithUsage(prompt, completion);
    const { api, auth, drain, id } = await firstTurn();
    const session = await api.get(`/v1/sessions/${id}`);
    expect(session.status, JSON.stringify(session.body)).toBe(200);
    expect(session.body.usage).toMatchObject({ turns: 1, ...counted });
    const turns = await api.get(`/v1/sessions/${id}/turns`);
    expect(turns.status, JSON.stringify(turns.body)).toBe(200);
    expect(turns.body.turns[0].usage).toMatchObject(counted);
    // A second turn reads the completion the first stored.
    const next = await api.post(`/v1/sessions/${id}/turns`, { input: 'Again' }, auth);
    expect(next.status, JSON.stringify(next.body)).toBe(200);
    await drain();
    const spent = await api.get('/v1/tokens/current', auth);
    expect(spent.body.usage).toMatchObject({ turns: 2 });
  });
});

describe('cached input tokens reported above the input tokens', () => {
  it('count as the input tokens: the share stays at most 1, and the export imports', async () => {
    fake.next = answerWithUsage(5, 3, 12);
    const { api, auth, drain, id } = await firstTurn();
    const session = await api.get(`/v1/sessions/${id}`);
    expect(session.body.usage).toMatchObject({ input_tokens: 5, cached_input_tokens: 5, cache_read_share: 1 });
    const imported = await api.importCopy(id);
    expect(imported.status, JSON.stringify(imported.body)).toBe(201);
    expect(imported.body.usage).toMatchObject({ input_tokens: 5, cached_input_tokens: 5 });
  });
});

import { afterEach, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { approximateTokenCounter } from '../../lib/tokens/token-counter.ts';
import { appHarness } from '../support/app-harness.ts';
import { failingEcho } from '../support/failing-echo.ts';
import { heldOptions } from '../support/slow-echo.ts';
import { createClient, SIGNING_KEY, TOKEN } from './http-suite.ts';

// A turn whose own model call failed after the provider worked on it (it timed out, or its
// stream broke off after output) is billed by the provider all the same: its input, and the
// output generated until then. The failed turn charges it (lib/turn/close-turn.ts), estimated
// as a stopped turn's is (the prompt's tokens as counted, the output streamed), to its token and
// its session, and its receipt says `usage_estimated`. A provider that refused the call outright
// (an error status, nothing streamed) bills nothing: nothing is charged.

/** The echo model, but `times out` times out and `breaks` fails (test/support/failing-echo.ts). */
const { model: failing, summaries } = failingEcho();

const environment = { API_TOKEN: TOKEN, TOKEN_SIGNING_KEY: SIGNING_KEY, DEFAULT_MODEL: 'echo' };

function world() {
  const { options, drain } = heldOptions(failing);
  const harness = appHarness(new MemoryStore(), environment, options);
  const api = createClient(harness);
  const mint = async (budget: Record<string, number>) => {
    const minted = await api.post('/v1/tokens', { scopes: ['session:turn', 'session:read'], budget });
    expect(minted.status, JSON.stringify(minted.body)).toBe(201);
    return { authorization: `Bearer ${minted.body.token as string}` };
  };
  const spent = async (auth: Record<string, string>) => (await api.get('/v1/tokens/current', auth)).body.usage;
  const streamed = async (id: string, auth: Record<string, string>, input: string) => {
    const response = await harness.fetch(`/v1/sessions/${id}/turns`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ input, stream: true }),
    });
    return response.text();
  };
  return { api, drain, mint, spent, streamed };
}

/** The prompt of a turn whose input is `text`: the message and its fixed overhead, no tools. */
const promptTokens = (text: string) => approximateTokenCounter.count(text) + 4;

describe('a turn whose own model call failed charges what its provider bills', () => {
  it('timed out: its prompt counts in the token spend, the session totals and its receipt, estimated', async () => {
    const { api, drain, mint, spent } = world();
    const auth = await mint({ max_total_tokens: 1_000_000 });
    const id = await api.session();
    const failed = await api.post(`/v1/sessions/${id}/turns`, { input: 'it times out' }, auth);
    expect(failed.status, JSON.stringify(failed.body)).toBe(504);
    await drain();
    const expected = { turns: 0, input_tokens: promptTokens('it times out'), output_tokens: 0 };
    expect(await spent(auth)).toMatchObject(expected);
    const usage = (await api.get(`/v1/sessions/${id}`)).body.usage;
    expect(usage).toMatchObject({ input_tokens: expected.input_tokens, output_tokens: 0 });
    const [receipt] = (await api.get(`/v1/sessions/${id}/turns`)).body.turns;
    expect(receipt).toMatchObject({
      status: 'failed',
      usage: { input_tokens: expected.input_tokens, output_tokens: 0 },
      usage_estimated: true,
    });
  });

  it("streamed, broken off after output: its prompt and what it streamed count in the token's budget", async () => {
    const { api, drain, mint, spent, streamed } = world();
    const limit = promptTokens('it breaks') + approximateTokenCounter.count('partial ');
    const auth = await mint({ max_total_tokens: limit });
    const id = await api.session();
    expect(await streamed(id, auth, 'it breaks')).toContain('event: error');
    await drain();
    expect(await spent(auth)).toMatchObject({ turns: 0, total_tokens: limit });
    // The budget is spent: the next turn is refused.
    const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'go on' }, auth);
    expect(refused.status, JSON.stringify(refused.body)).toBe(402);
  });

  it('refused by its provider before any output (an error status): nothing is charged', async () => {
    const { api, drain, mint, spent } = world();
    const auth = await mint({ max_total_tokens: 1_000_000 });
    const id = await api.session();
    const failed = await api.post(`/v1/sessions/${id}/turns`, { input: 'it breaks' }, auth);
    expect(failed.status, JSON.stringify(failed.body)).toBe(502);
    await drain();
    expect(await spent(auth)).toMatchObject({ turns: 0, total_tokens: 0 });
    const [receipt] = (await api.get(`/v1/sessions/${id}/turns`)).body.turns;
    expect(receipt).toMatchObject({ status: 'failed', usage: null });
    expect(receipt.usage_estimated).toBeUndefined();
  });
});

// The same for a call that stores nothing (`store: false`): its token is charged the estimate.
describe('a stateless call that timed out charges its estimate to the token', () => {
  it('store: false, as no turn', async () => {
    const { api, drain, mint, spent } = world();
    const auth = await mint({ max_total_tokens: 1_000_000 });
    const failed = await api.post('/v1/responses', { model: 'echo', input: 'it times out', store: false }, auth);
    expect(failed.status, JSON.stringify(failed.body)).toBe(504);
    await drain();
    const usage = await spent(auth);
    expect(usage).toMatchObject({ turns: 0, output_tokens: 0 });
    expect(usage.input_tokens).toBeGreaterThan(0);
  });
});

// A compaction's summary call that timed out was worked on and billed all the same: its prompt's
// tokens, estimated (not streamed: no output), are charged as its usage would have been.
describe('a compaction whose summary call timed out charges its estimate', () => {
  afterEach(() => {
    summaries.timeOut = false;
  });

  it("of a session: to the session's totals and the token, as no turn", async () => {
    const { api, drain, mint, spent } = world();
    const auth = await mint({ max_total_tokens: 1_000_000 });
    const id = await api.session();
    for (const input of ['one', 'two'])
      expect((await api.post(`/v1/sessions/${id}/turns`, { input }, auth)).status).toBe(200);
    await drain();
    const before = (await api.get(`/v1/sessions/${id}`)).body.usage;
    const spentBefore = await spent(auth);
    summaries.timeOut = true;
    const refused = await api.post(`/v1/sessions/${id}/compact`, { keep_tokens: 0 }, auth);
    expect(refused.status, JSON.stringify(refused.body)).toBe(504);
    await drain();
    const after = (await api.get(`/v1/sessions/${id}`)).body.usage;
    expect(after).toMatchObject({ turns: before.turns, output_tokens: before.output_tokens });
    expect(after.input_tokens).toBeGreaterThan(before.input_tokens);
    const spentAfter = await spent(auth);
    expect(spentAfter).toMatchObject({ turns: spentBefore.turns, output_tokens: spentBefore.output_tokens });
    expect(spentAfter.input_tokens - spentBefore.input_tokens).toBe(after.input_tokens - before.input_tokens);
  });

  it('of inline input (POST /v1/responses/compact): to the token', async () => {
    const { api, drain, mint, spent } = world();
    const auth = await mint({ max_total_tokens: 1_000_000 });
    summaries.timeOut = true;
    const refused = await api.post(
      '/v1/responses/compact',
      { model: 'echo', input: 'a long story to summarize' },
      auth,
    );
    expect(refused.status, JSON.stringify(refused.body)).toBe(504);
    await drain();
    const usage = await spent(auth);
    expect(usage).toMatchObject({ turns: 0, output_tokens: 0 });
    expect(usage.input_tokens).toBeGreaterThan(0);
  });
});

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FileStore } from '../../lib/store/file.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { spendKey } from '../../lib/ledger/token-spend.ts';
import { decodeUtf8 } from '../../lib/store/object-store.ts';
import { fixture } from '../support/fake-providers/fake-provider-server.ts';
import { createClient, SIGNING_KEY, TOKEN } from './http-suite.ts';
import { defineTokenBudgetSuite } from './token-budget-suite.ts';

// Token budgets through the app on the memory store and the file store; R2 runs the same suite
// inside workerd (test/workers/http-tokens.test.ts).
const directory = await mkdtemp(join(tmpdir(), 'tailgate-token-budget-'));
afterAll(async () => {
  await rm(directory, { recursive: true, force: true, maxRetries: 5 });
});

const environment = {
  API_TOKEN: TOKEN,
  TOKEN_SIGNING_KEY: SIGNING_KEY,
  ALLOW_ANONYMOUS: 'false',
  DEFAULT_MODEL: 'echo',
};

defineTokenBudgetSuite('memory', appHarness(new MemoryStore(), environment));
defineTokenBudgetSuite('file store', appHarness(new FileStore(directory), environment));

describe('a budgeted token and stateless runs at once (docs/SECURITY.md, "Token budgets")', () => {
  // The provider holds every model call until all RUNS are waiting: each run read the spend
  // before any was charged, as concurrent stateless runs may.
  const RUNS = 8;
  const waiting: (() => void)[] = [];
  const provider = async () => {
    await new Promise<void>((resolve) => {
      waiting.push(resolve);
      if (waiting.length === RUNS) for (const release of waiting.splice(0)) release();
    });
    return new Response(fixture('openai-chat-text.json'), { headers: { 'content-type': 'application/json' } });
  };
  const harness = appHarness(
    new MemoryStore(),
    { ...environment, OPENAI_API_KEY: 'test-key', MODEL_MAX_RETRIES: '0' },
    { modelEnvironment: { fetch: provider as typeof fetch } },
  );
  const api = createClient(harness);

  it('each passes the check: a caller running k at once may take max_turns - 1 + k; each is charged', async () => {
    const minted = await api.post('/v1/tokens', { scopes: ['session:turn'], budget: { max_turns: 1 } });
    const token = minted.body.token as string;
    const bearer = { authorization: `Bearer ${token}` };
    const model = 'openai:gpt-4.1-mini';
    const chat = () => api.post('/v1/chat/completions', { model, messages: [{ role: 'user', content: 'hi' }] }, bearer);
    const response = () => api.post('/v1/responses', { model, input: 'hi', store: false }, bearer);
    const answers = await Promise.all(Array.from({ length: RUNS }, (_, n) => (n % 2 ? chat() : response())));
    expect(answers.map((answer) => answer.status)).toEqual(Array(RUNS).fill(200));
    // Every run is charged, exactly, before its answer; the token's next run is refused.
    const claims = JSON.parse(atob(token.split('.')[1]!.replaceAll('-', '+').replaceAll('_', '/')));
    const key = spendKey(harness.keyPrefix, { id: claims.jti, expires: claims.exp });
    const spent = async () => {
      const stored = await harness.store.get(key);
      return stored ? JSON.parse(decodeUtf8(stored.body)).ledger.turns : 0;
    };
    expect(await spent()).toBe(RUNS);
    const refused = await chat();
    expect(refused.status).toBe(402);
    expect(refused.body.error).toMatchObject({ code: 'budget_exhausted', details: { budget: 'token', spent: RUNS } });
  });
});

describe('a token whose budget caps its cost and a model without a price', () => {
  const provider = async () =>
    new Response(fixture('openai-chat-text.json'), { headers: { 'content-type': 'application/json' } });
  const harness = appHarness(
    new MemoryStore(),
    { ...environment, OPENAI_API_KEY: 'test-key', MODEL_MAX_RETRIES: '0' },
    { modelEnvironment: { fetch: provider as typeof fetch } },
  );
  const api = createClient(harness);
  // No price in lib/ledger/prices.ts nor MODEL_PRICES: its cost is unknown (null).
  const unpriced = 'openai:gpt-unpriced';

  it('is refused (400 naming model, nothing stored): max_cost_usd could not count what it costs', async () => {
    const minted = await api.post('/v1/tokens', { scopes: ['session:turn'], budget: { max_cost_usd: 0.01 } });
    const bearer = { authorization: `Bearer ${minted.body.token}` };
    const id = await api.session();
    const runs = {
      turn: () => api.post(`/v1/sessions/${id}/turns`, { input: 'hi', model: unpriced }, bearer),
      background: () =>
        api.post(`/v1/sessions/${id}/turns`, { input: 'hi', model: unpriced, background: true }, bearer),
      response: () => api.post('/v1/responses', { model: unpriced, input: 'hi', store: false }, bearer),
      chat: () =>
        api.post('/v1/chat/completions', { model: unpriced, messages: [{ role: 'user', content: 'hi' }] }, bearer),
      compaction: () => api.post('/v1/responses/compact', { model: unpriced, input: 'a story to summarize' }, bearer),
    };
    for (const [name, run] of Object.entries(runs)) {
      const refused = await run();
      expect(refused.status, `${name}: ${JSON.stringify(refused.body)}`).toBe(400);
      expect(JSON.stringify(refused.body.error), name).toMatch(/has no price/);
    }
    expect((await api.get(`/v1/sessions/${id}`)).body.counts.turns).toBe(0);
    // A priced model runs.
    const priced = await api.post(`/v1/sessions/${id}/turns`, { input: 'hi', model: 'openai:gpt-4.1-mini' }, bearer);
    expect(priced.status, JSON.stringify(priced.body)).toBe(200);
  });

  it("is refused the session's own model without a price, and still previews the session's prompt", async () => {
    const minted = await api.post('/v1/tokens', {
      scopes: ['session:turn', 'session:read'],
      budget: { max_cost_usd: 0.01 },
    });
    const bearer = { authorization: `Bearer ${minted.body.token}` };
    const id = await api.session({ model: unpriced });
    for (const background of [false, true]) {
      const refused = await api.post(`/v1/sessions/${id}/turns`, { input: 'hi', background }, bearer);
      expect(refused.status).toBe(400);
      expect(refused.body.error.details).toEqual({ field: 'model', model: unpriced });
    }
    expect((await api.get(`/v1/sessions/${id}`)).body.counts.turns).toBe(0);
    // The preview calls no model: what a turn would be sent is there to read.
    const preview = await api.get(`/v1/sessions/${id}/prompt`, bearer);
    expect(preview.status, JSON.stringify(preview.body)).toBe(200);
  });

  it("counts a response's input tokens of that model: a count calls no model", async () => {
    const minted = await api.post('/v1/tokens', { scopes: ['session:turn'], budget: { max_cost_usd: 0.01 } });
    const bearer = { authorization: `Bearer ${minted.body.token}` };
    const id = await api.session({ model: unpriced });
    for (const body of [{ input: 'hi' }, { input: 'hi', conversation: id }]) {
      const counted = await api.post('/v1/responses/input_tokens', { model: unpriced, ...body }, bearer);
      expect(counted.status, JSON.stringify(counted.body)).toBe(200);
      expect(counted.body.input_tokens).toBeGreaterThan(0);
    }
  });

  it('runs for a token whose budget sets no max_cost_usd, and for a token without a budget', async () => {
    const id = await api.session();
    for (const budget of [{ max_turns: 5 }, undefined]) {
      const minted = await api.post('/v1/tokens', { scopes: ['session:turn'], ...(budget ? { budget } : {}) });
      const bearer = { authorization: `Bearer ${minted.body.token}` };
      const turn = await api.post(`/v1/sessions/${id}/turns`, { input: 'hi', model: unpriced }, bearer);
      expect(turn.status, JSON.stringify(turn.body)).toBe(200);
    }
  });
});

describe('a token whose budget caps its cost and a SUMMARY_MODEL without a price', () => {
  const unpriced = 'openai:gpt-unpriced';
  const api = createClient(
    appHarness(new MemoryStore(), { ...environment, OPENAI_API_KEY: 'test-key', SUMMARY_MODEL: unpriced }),
  );

  it('is refused the turns that may compact at their claim (400 naming SUMMARY_MODEL), nothing stored', async () => {
    const minted = await api.post('/v1/tokens', { scopes: ['session:turn'], budget: { max_cost_usd: 1 } });
    const bearer = { authorization: `Bearer ${minted.body.token}` };
    // Turns of 600 characters compact by the third in a window of 1000 tokens.
    const id = await api.session({ model: 'echo', strategies: ['compact'], strategy_config: { context_limit: 1000 } });
    for (let turn = 1; turn <= 4; turn++) {
      const body = { input: `turn ${turn} ${'w'.repeat(600)}`, background: turn % 2 === 0 };
      const refused = await api.post(`/v1/sessions/${id}/turns`, body, bearer);
      expect(refused.status, JSON.stringify(refused.body)).toBe(400);
      expect(refused.body.error).toMatchObject({
        code: 'invalid_request',
        details: { field: 'model', model: unpriced, setting: 'SUMMARY_MODEL' },
      });
      expect(refused.body.error.message).toMatch(/SUMMARY_MODEL/);
    }
    expect((await api.get(`/v1/sessions/${id}`)).body.counts).toMatchObject({ items: 0, turns: 0 });
    // A manual compaction that names no model calls SUMMARY_MODEL: refused so too.
    const compaction = await api.post(`/v1/sessions/${id}/compact`, {}, bearer);
    expect(compaction.status).toBe(400);
    expect(compaction.body.error.details).toEqual({ field: 'model', model: unpriced, setting: 'SUMMARY_MODEL' });
    // A session whose turns do not compact runs them.
    const plain = await api.session({ model: 'echo' });
    expect((await api.post(`/v1/sessions/${plain}/turns`, { input: 'hi' }, bearer)).status).toBe(200);
  });
});

describe("a token whose budget caps its cost and another's queued turn", () => {
  it("runs the queued turn its request picks up, charged to no token, whatever the model's price", async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let calls = 0;
    // The budgeted token's turn waits for the gate while another's input is queued behind it.
    const provider = async (_url: unknown, init?: RequestInit) => {
      calls++;
      const body = String(init?.body);
      if (body.includes('"model":"gpt-4.1-mini"')) await gate;
      if (body.includes('"stream":true'))
        return new Response(fixture('openai-chat-text.sse'), { headers: { 'content-type': 'text/event-stream' } });
      return new Response(fixture('openai-chat-text.json'), { headers: { 'content-type': 'application/json' } });
    };
    const tasks: Promise<unknown>[] = [];
    const store = new MemoryStore();
    const api = createClient(
      appHarness(
        store,
        { ...environment, OPENAI_API_KEY: 'test-key', MODEL_MAX_RETRIES: '0' },
        {
          modelEnvironment: { fetch: provider as unknown as typeof fetch },
          afterResponse: (task) => void tasks.push(task),
        },
      ),
    );
    const minted = await api.post('/v1/tokens', { scopes: ['session:turn'], budget: { max_cost_usd: 1 } });
    const bearer = { authorization: `Bearer ${minted.body.token}` };
    const id = await api.session({ model: 'openai:gpt-4.1-mini', on_busy: 'enqueue' });
    const running = api.post(`/v1/sessions/${id}/turns`, { input: 'first' }, bearer);
    while (calls === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const before = tasks.length;
    const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'queued', model: 'openai:gpt-unpriced' });
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    // Its own request's pick-up, left running after the 202 (the work that request left, as the
    // running turn's request, waiting for the model, leaves none meanwhile), finds the session busy
    // and leaves the input queued: the budgeted token's request is the one that picks it up.
    const pickUps = tasks.slice(before);
    expect(pickUps.length).toBeGreaterThan(0);
    await Promise.all(pickUps);
    const stored = (await store.list('')).objects.map((object) => object.key);
    expect(stored.filter((key) => key.includes('/queue/'))).toHaveLength(1);
    expect(calls).toBe(1);
    open();
    expect((await running).status).toBe(200);
    while (tasks.length > 0) await Promise.all(tasks.splice(0));
    const turn = await api.get(`/v1/sessions/${id}/turns/2`);
    expect(turn.body.error ?? null, JSON.stringify(turn.body.error)).toBeNull();
    expect(turn.body).toMatchObject({ status: 'completed', model: 'openai:gpt-unpriced' });
  });
});

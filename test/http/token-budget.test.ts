import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { FileStore } from '../../lib/store/file.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { spendKey } from '../../lib/ledger/token-spend.ts';
import { decodeUtf8 } from '../../lib/store/object-store.ts';
import { fixture } from '../support/fake-providers/fake-provider-server.ts';
import { createClient, SIGNING_KEY, TOKEN } from './http-suite.ts';
import { defineTokenBudgetSuite } from './token-budget-suite.ts';

// Token budgets through the app on the memory store and the file store; R2 runs the same suite
// inside workerd (test/workers/http.test.ts).
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
    // Every run is charged, exactly; once the charges landed, the token's next run is refused.
    const claims = JSON.parse(atob(token.split('.')[1]!.replaceAll('-', '+').replaceAll('_', '/')));
    const key = spendKey(harness.keyPrefix, { id: claims.jti, expires: claims.exp });
    const spent = async () => {
      const stored = await harness.store.get(key);
      return stored ? JSON.parse(decodeUtf8(stored.body)).ledger.turns : 0;
    };
    await vi.waitFor(async () => expect(await spent()).toBe(RUNS), { timeout: 10_000 });
    const refused = await chat();
    expect(refused.status).toBe(402);
    expect(refused.body.error).toMatchObject({ code: 'budget_exhausted', details: { budget: 'token', spent: RUNS } });
  });
});

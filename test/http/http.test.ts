import { expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { defineHttpSuite, missingTokenMessage, SIGNING_KEY, TOKEN, type HttpHarness } from './http-suite.ts';
import { defineTokenSuite } from './tokens-suite.ts';
import { defineTransferSuite } from './transfer-suite.ts';
import { defineImagesSuite } from './images-suite.ts';
import { defineForkSuite } from './fork-suite.ts';
import { defineResponseDeleteSuite } from './response-delete-suite.ts';
import { defineReceiptSuite } from './receipts-suite.ts';
import { defineBodyBudgetSuite } from './body-budget-suite.ts';
import { defineBackgroundSuite } from './background-suite.ts';
import { defineEventsSuite } from './events-suite.ts';
import { defineQueueForksSuite } from './queue-forks-suite.ts';

// The whole HTTP contract in Node, through `app.request` with an in-memory store. The same
// suites run inside workerd against the real worker and local R2 (test/workers/http*.test.ts).
const store = new MemoryStore();
const baseEnvironment: Record<string, string | undefined> = {
  API_TOKEN: TOKEN,
  TOKEN_SIGNING_KEY: SIGNING_KEY,
  ALLOW_ANONYMOUS: 'false',
  DEFAULT_MODEL: 'echo',
};
const logged: string[] = [];
const app = createApp({
  store: () => store,
  readEnvironment: (c) => c.env ?? {},
  log: (message) => logged.push(message),
});

function merged(overrides: Record<string, string | undefined>): Record<string, string> {
  const environment: Record<string, string> = {};
  for (const [name, value] of Object.entries({ ...baseEnvironment, ...overrides }))
    if (value !== undefined) environment[name] = value;
  return environment;
}

const harness: HttpHarness = {
  fetch: async (path, init) => app.request(path, init, merged({})),
  fetchWithEnv: async (overrides, path, init) => app.request(path, init, merged(overrides)),
  store,
  keyPrefix: '',
  logged,
};

// Nothing listens on the discard port: the model cannot be reached at all.
defineHttpSuite('node (memory store)', harness, 'http://127.0.0.1:9/v1');
defineTokenSuite('node (memory store)', harness);
defineReceiptSuite('node (memory store)', harness);
defineBodyBudgetSuite('node (memory store)', harness);
defineTransferSuite('node (memory store)', harness);
defineImagesSuite('node (memory store)', harness);
defineForkSuite('node (memory store)', harness);
defineResponseDeleteSuite('node (memory store)', harness);
defineBackgroundSuite('node (memory store)', harness);
defineEventsSuite('node (memory store)', harness);
defineQueueForksSuite('node (memory store)', harness);
it('tells a Node or Deno server without a token to set it in the environment or pass --allow-anonymous', async () => {
  const message = await missingTokenMessage(harness);
  expect(message).toContain('--allow-anonymous');
  expect(message).not.toContain('wrangler');
});

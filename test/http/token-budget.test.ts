import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { FileStore } from '../../lib/store/file.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { SIGNING_KEY, TOKEN } from './http-suite.ts';
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

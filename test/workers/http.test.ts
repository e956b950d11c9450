import { expect, inject, it } from 'vitest';
import { defineHttpSuite, missingTokenMessage } from '../http/http-suite.ts';
import { bindings, workerHarness } from './worker-harness.ts';
import { defineTransferSuite } from '../http/transfer-suite.ts';
import { defineReceiptSuite } from '../http/receipts-suite.ts';
import { defineBodyBudgetSuite } from '../http/body-budget-suite.ts';

// The whole HTTP contract inside workerd (test/workers/worker-harness.ts), in three files that
// vitest runs side by side: this one, test/workers/http-tokens.test.ts (tokens and limits) and
// test/workers/http-turns.test.ts (forks, deletes, background turns, events).
const harness = workerHarness();

// A loopback provider answering 500 (test/support/workers-global-setup.ts).
defineHttpSuite('workerd (R2)', harness, inject('failingModelBaseUrl'));
defineReceiptSuite('workerd (R2)', harness);
defineBodyBudgetSuite('workerd (R2)', harness);
defineTransferSuite('workerd (R2)', harness);
it('tells a Worker without a token to set it with wrangler secret put, not with a Node flag', async () => {
  const message = await missingTokenMessage(harness);
  expect(message).toContain('npx wrangler secret put API_TOKEN');
  expect(message).not.toContain('--allow-anonymous');
});
it('binds the queue of background turns from wrangler.toml', () => {
  expect(typeof (bindings.TURNS as Queue | undefined)?.send).toBe('function');
});

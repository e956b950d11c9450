import { expect, inject, it } from 'vitest';
import { defineHttpSuite, missingTokenMessage } from '../http/http-suite.ts';
import { bindings, workerHarness } from './worker-harness.ts';
import { defineTokenSuite } from '../http/tokens-suite.ts';
import { defineKeyLimitsSuite } from '../http/key-limits-suite.ts';
import { defineTransferSuite } from '../http/transfer-suite.ts';
import { defineImagesSuite } from '../http/images-suite.ts';
import { defineForkSuite } from '../http/fork-suite.ts';
import { defineResponseDeleteSuite } from '../http/response-delete-suite.ts';
import { defineReceiptSuite } from '../http/receipts-suite.ts';
import { defineBodyBudgetSuite } from '../http/body-budget-suite.ts';
import { defineBackgroundSuite } from '../http/background-suite.ts';
import { defineEventsSuite } from '../http/events-suite.ts';
import { defineQueueForksSuite } from '../http/queue-forks-suite.ts';
import { defineFacadeBackgroundSuite } from '../http/facade-background-suite.ts';
import { defineRateLimitSuite } from '../http/rate-limit-suite.ts';
import { defineTokenBudgetSuite } from '../http/token-budget-suite.ts';

// The whole HTTP contract inside workerd (test/workers/worker-harness.ts).
const harness = workerHarness();

// A loopback provider answering 500 (test/support/workers-global-setup.ts).
defineHttpSuite('workerd (R2)', harness, inject('failingModelBaseUrl'));
defineTokenSuite('workerd (R2)', harness);
defineTokenBudgetSuite('workerd (R2)', harness);
defineKeyLimitsSuite('workerd (R2)', harness);
defineReceiptSuite('workerd (R2)', harness);
defineBodyBudgetSuite('workerd (R2)', harness);
defineTransferSuite('workerd (R2)', harness);
defineImagesSuite('workerd (R2)', harness);
defineForkSuite('workerd (R2)', harness);
defineResponseDeleteSuite('workerd (R2)', harness);
// Background turns go through the queue in wrangler.toml to this worker's queue handler.
defineBackgroundSuite('workerd (R2)', harness);
defineEventsSuite('workerd (R2)', harness);
defineQueueForksSuite('workerd (R2)', harness);
defineFacadeBackgroundSuite('workerd (R2)', harness);
// The platform's Rate Limiting binding (three a minute, vitest.config.ts) as each limit in turn.
defineRateLimitSuite(
  'workerd (Rate Limiting binding)',
  harness,
  {
    session: { TURN_LIMIT_PER_SESSION: bindings.TEST_TURN_LIMIT },
    token: { TURN_LIMIT_PER_TOKEN: bindings.TEST_TURN_LIMIT },
  },
  'clock-aligned',
);
it('tells a Worker without a token to set it with wrangler secret put, not with a Node flag', async () => {
  const message = await missingTokenMessage(harness);
  expect(message).toContain('npx wrangler secret put API_TOKEN');
  expect(message).not.toContain('--allow-anonymous');
});
it('binds the queue of background turns from wrangler.toml', () => {
  expect(typeof (bindings.TURNS as Queue | undefined)?.send).toBe('function');
});

import { createExecutionContext, env, SELF } from 'cloudflare:test';
import { expect, inject, it } from 'vitest';
import worker from '../../functions/worker.ts';
import { R2Store } from '../../lib/store/r2.ts';
import { defineHttpSuite, type HttpHarness } from '../http/http-suite.ts';
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
import { defineRateLimitSuite } from '../http/rate-limit-suite.ts';

// The whole HTTP contract inside workerd: requests go through the real worker (SELF) with
// the local R2 bucket from wrangler.toml; vitest.config.ts passes API_TOKEN=test-token and a
// TOKEN_SIGNING_KEY.
const bindings = env as unknown as Record<string, unknown> & { BUCKET: R2Bucket };
const origin = 'https://tailgate.test';

const logged: string[] = [];
const harness: HttpHarness = {
  fetch: (path, init) => SELF.fetch(`${origin}${path}`, init),
  fetchWithEnv: async (overrides, path, init) => {
    const environment: Record<string, unknown> = { ...bindings };
    for (const [name, value] of Object.entries(overrides)) {
      if (value === undefined) delete environment[name];
      else environment[name] = value;
    }
    // The worker logs server-side failures with console.error: collect them for the tests that
    // expect one, instead of printing them.
    const error = console.error;
    console.error = (message?: unknown) => logged.push(String(message));
    try {
      return await worker.fetch(
        new Request(`${origin}${path}`, init) as never,
        environment as never,
        createExecutionContext(),
      );
    } finally {
      console.error = error;
    }
  },
  store: new R2Store(bindings.BUCKET),
  keyPrefix: typeof bindings.KEY_PREFIX === 'string' ? bindings.KEY_PREFIX : '',
  logged,
};

// A loopback provider answering 500 (test/support/workers-global-setup.ts).
defineHttpSuite('workerd (R2)', harness, inject('failingModelBaseUrl'));
defineTokenSuite('workerd (R2)', harness);
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
// The platform's Rate Limiting binding (three a minute, vitest.config.ts) as each limit in turn.
defineRateLimitSuite('workerd (Rate Limiting binding)', harness, {
  session: { TURN_LIMIT_PER_SESSION: bindings.TEST_TURN_LIMIT },
  token: { TURN_LIMIT_PER_TOKEN: bindings.TEST_TURN_LIMIT },
});
it('binds the queue of background turns from wrangler.toml', () => {
  expect(typeof (bindings.TURNS as Queue | undefined)?.send).toBe('function');
});

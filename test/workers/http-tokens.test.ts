import { bindings, workerHarness } from './worker-harness.ts';
import { defineTokenSuite } from '../http/tokens-suite.ts';
import { defineKeyLimitsSuite } from '../http/key-limits-suite.ts';
import { defineRateLimitSuite } from '../http/rate-limit-suite.ts';
import { defineTokenBudgetSuite } from '../http/token-budget-suite.ts';

// The HTTP contract's tokens and limits inside workerd (the rest: test/workers/http.test.ts).
const harness = workerHarness();

defineTokenSuite('workerd (R2)', harness);
defineTokenBudgetSuite('workerd (R2)', harness);
defineKeyLimitsSuite('workerd (R2)', harness);
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

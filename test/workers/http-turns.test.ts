import { workerHarness } from './worker-harness.ts';
import { defineImagesSuite } from '../http/images-suite.ts';
import { defineForkSuite } from '../http/fork-suite.ts';
import { defineResponseDeleteSuite } from '../http/response-delete-suite.ts';
import { defineBackgroundSuite } from '../http/background-suite.ts';
import { defineEventsSuite } from '../http/events-suite.ts';
import { defineQueueForksSuite } from '../http/queue-forks-suite.ts';
import { defineFacadeBackgroundSuite } from '../http/facade-background-suite.ts';

// The HTTP contract's images, forks, deletes, background turns and events inside workerd
// (the rest: test/workers/http.test.ts).
const harness = workerHarness();

defineImagesSuite('workerd (R2)', harness);
defineForkSuite('workerd (R2)', harness);
defineResponseDeleteSuite('workerd (R2)', harness);
// Background turns go through the queue in wrangler.toml to this worker's queue handler.
defineBackgroundSuite('workerd (R2)', harness);
defineEventsSuite('workerd (R2)', harness);
defineQueueForksSuite('workerd (R2)', harness);
defineFacadeBackgroundSuite('workerd (R2)', harness);

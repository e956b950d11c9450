import { afterAll, expect } from 'vitest';
import { heldBodyBytes } from '../../functions/body-budget.ts';

/**
 * A file ends with no request body held by the app (functions/body-budget.ts): the files of a
 * worker share their modules (`isolate: false`), so a request a file left unanswered would go on
 * counting in the body budget of the files after it. Registered after each file's own hooks
 * (setupFiles come first), so it runs once they closed what they opened.
 */
afterAll(() => {
  expect(heldBodyBytes(), 'bytes of request bodies the file left held').toBe(0);
});

import { expect, it } from 'vitest';
import { shutdownNotice, trackAfterResponse } from '../../functions/local-server.ts';

// functions/local-server.ts: a first SIGTERM says what the server waits for, the work requests
// left running (how many: a background turn, a charge, a pickup are not told apart, so no kind
// is named that may not be running) as well as its open connections.
it('names the open connections and the work requests left running that a stopping server waits for', async () => {
  expect(shutdownNotice('SIGTERM', 30_000, 2)).toBe(
    'tailgate: SIGTERM: no new requests; waiting up to 30 s for 2 open connection(s) to finish ' +
      '(SIGTERM again stops at once)',
  );
  let finish: () => void = () => undefined;
  trackAfterResponse(new Promise<void>((resolve) => (finish = resolve)));
  expect(shutdownNotice('SIGTERM', 30_000, 0)).toBe(
    'tailgate: SIGTERM: no new requests; waiting up to 30 s for 1 background task(s) to finish ' +
      '(SIGTERM again stops at once)',
  );
  expect(shutdownNotice('SIGINT', 30_000, 1)).toContain('for 1 open connection(s) and 1 background task(s)');
  finish();
  await new Promise((resolve) => setTimeout(resolve, 0));
  expect(shutdownNotice('SIGTERM', 30_000, 0)).toBe(
    'tailgate: SIGTERM: no new requests; nothing left running, stopping',
  );
});

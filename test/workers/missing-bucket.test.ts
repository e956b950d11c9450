import { createExecutionContext, createScheduledController, waitOnExecutionContext } from 'cloudflare:test';
import { expect, it, vi } from 'vitest';
import worker from '../../functions/worker.ts';
import { TOKEN } from '../http/http-suite.ts';
import { bindings, workerHarness } from './worker-harness.ts';

// A Worker deployed without its R2 binding (BUCKET, wrangler.toml's [[r2_buckets]]) has no store:
// every request, GET /healthz among them, is the 503 not_configured that names the binding.
const harness = workerHarness();

it('answers 503 not_configured naming BUCKET, on /healthz and on the API, without the R2 binding', async () => {
  for (const path of ['/healthz', '/v1/sessions']) {
    const headers = { authorization: `Bearer ${TOKEN}` };
    const response = await harness.fetchWithEnv({ BUCKET: undefined }, path, { headers });
    expect(response.status, path).toBe(503);
    const body = (await response.json()) as { error: { code: string; message: string; details?: unknown } };
    expect(body.error, path).toMatchObject({ code: 'not_configured', details: { variable: 'BUCKET' } });
    expect(body.error.message, path).toContain('BUCKET');
  }
});

// Its Cron Trigger runs nothing either, and says so once a run, naming the binding, as a run of a
// deployment whose settings do not parse does (test/workers/retention.test.ts).
it.each(['* * * * *', '17 * * * *'])(
  'the Cron Trigger (%s) without the R2 binding logs one line naming BUCKET and runs nothing',
  async (cron) => {
    const error = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    let logged: unknown[][];
    try {
      const context = createExecutionContext();
      await worker.scheduled(createScheduledController({ cron }), { ...bindings, BUCKET: undefined } as never, context);
      await waitOnExecutionContext(context);
    } finally {
      logged = [...error.mock.calls];
      error.mockRestore();
    }
    expect(logged).toEqual([
      [expect.stringMatching(/^tailgate: the Cron Trigger's run skipped: no R2 bucket is bound as BUCKET/)],
    ]);
  },
);

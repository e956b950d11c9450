import { expect, it } from 'vitest';
import { TOKEN } from '../http/http-suite.ts';
import { workerHarness } from './worker-harness.ts';

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

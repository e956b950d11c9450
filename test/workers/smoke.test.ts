import { SELF, env } from 'cloudflare:test';
import { expect, it } from 'vitest';

it('serves healthz from workerd and has a local R2 bucket', async () => {
  const response = await SELF.fetch('https://tailgate.test/healthz');
  expect(response.status).toBe(200);
  expect(await response.json()).toEqual({ ok: true });
  await (env as { BUCKET: R2Bucket }).BUCKET.put('k', 'v');
  expect(await (await (env as { BUCKET: R2Bucket }).BUCKET.get('k'))!.text()).toBe('v');
});

import { createExecutionContext, env, waitOnExecutionContext } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import worker from '../../functions/worker.ts';
import { DEFAULTS } from '../../lib/defaults.ts';
import { recordCacheOf } from '../../lib/session/log/record-cache.ts';
import { r2StoreFor } from '../../lib/store/r2.ts';

const bindings = env as unknown as Record<string, unknown> & { BUCKET: R2Bucket };

/** Creates a session and appends to it through the worker, with a bucket binding (a store, caches) of its own. */
async function appendThroughWorker(settings: Record<string, string>): Promise<R2Bucket> {
  const bucket = new Proxy(bindings.BUCKET, {
    get: (target, property) => {
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const environment = { ...bindings, BUCKET: bucket, KEY_PREFIX: `record-cache/${crypto.randomUUID()}/`, ...settings };
  for (const [path, body] of [
    ['/v1/sessions', { id: 's' }],
    ['/v1/sessions/s/items', { items: [{ type: 'message', role: 'user', content: 'hi' }] }],
  ] as const) {
    const context = createExecutionContext();
    const response = await worker.fetch(
      new Request(`https://tailgate.test${path}`, {
        method: 'POST',
        headers: { authorization: 'Bearer test-token', 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }) as never,
      environment as never,
      context,
    );
    await waitOnExecutionContext(context);
    expect(response.status).toBeLessThan(300);
  }
  return bucket;
}

describe('the record cache in a Worker', () => {
  it('keeps 4 MiB of records per bucket unless RECORD_CACHE_BYTES says otherwise', async () => {
    expect(DEFAULTS.workerRecordCacheBytes).toBe(4 * 1024 * 1024);
    for (const [settings, budget] of [
      [{}, DEFAULTS.workerRecordCacheBytes],
      [{ RECORD_CACHE_BYTES: '' }, DEFAULTS.workerRecordCacheBytes],
      [{ RECORD_CACHE_BYTES: '1048576' }, 1024 * 1024],
    ] as const) {
      const bucket = await appendThroughWorker(settings);
      // The cache the worker filled is the one of that budget (another budget would be a new, empty one).
      expect(recordCacheOf(r2StoreFor(bucket), budget)!.bytes).toBeGreaterThan(0);
    }
  });
});

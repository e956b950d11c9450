import { createExecutionContext, env, waitOnExecutionContext } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import worker from '../../functions/worker.ts';
import { R2Store } from '../../lib/store/r2.ts';
import { PROBE_PREFIX, requireConditionalWrites } from '../../lib/store/write-probe.ts';

const bindings = env as unknown as Record<string, unknown> & { BUCKET: R2Bucket };

describe('the write probe on R2', () => {
  it('passes the R2 binding and deletes its scratch key', async () => {
    const prefix = `write-probe/${crypto.randomUUID()}/`;
    const store = new R2Store(bindings.BUCKET);
    await expect(requireConditionalWrites(store, { keyPrefix: prefix })).resolves.toBeUndefined();
    expect((await store.list(prefix)).objects).toEqual([]);
  });

  it('runs once per bucket binding in the isolate: the worker keeps one store per binding', async () => {
    const puts: string[] = [];
    const bucket = new Proxy(bindings.BUCKET, {
      get(target, property) {
        const value = Reflect.get(target, property, target) as unknown;
        if (typeof value !== 'function') return value;
        if (property !== 'put') return value.bind(target);
        return (key: string, ...rest: unknown[]) => {
          puts.push(key);
          return (value as (...args: unknown[]) => unknown).call(target, key, ...rest);
        };
      },
    });
    const environment = { ...bindings, BUCKET: bucket, KEY_PREFIX: `write-probe/${crypto.randomUUID()}/` };
    for (let index = 0; index < 5; index++) {
      const context = createExecutionContext();
      const response = await worker.fetch(
        new Request('https://tailgate.test/v1/sessions', {
          method: 'POST',
          headers: { authorization: 'Bearer test-token', 'content-type': 'application/json' },
          body: JSON.stringify({ id: `w${index}` }),
        }) as never,
        environment as never,
        context,
      );
      await waitOnExecutionContext(context);
      expect(response.status).toBe(201);
    }
    expect(puts.filter((key) => key.includes(PROBE_PREFIX))).toHaveLength(3);
    expect(puts.filter((key) => key.includes('/sessions/'))).toHaveLength(5);
  });
});

import { describe, expect, inject, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { CountingStore } from '../support/counting-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { PROBE_PREFIX } from '../../lib/store/write-probe.ts';
import { createTestS3Store } from '../support/s3-store.ts';

const TOKEN = 'probe-token';

/**
 * The app on one store, with requests carrying the token and KEY_PREFIX `prefix`; the work it
 * leaves after its responses goes into `tasks` when given.
 */
function appOn(store: ObjectStore, prefix = '', tasks?: Promise<unknown>[]) {
  const app = createApp({
    store: () => store,
    readEnvironment: (c) => c.env ?? {},
    log: () => {},
    ...(tasks && { afterResponse: (task: Promise<unknown>) => void tasks.push(task) }),
  });
  const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', KEY_PREFIX: prefix };
  return async (method: string, path: string, body?: unknown) => {
    const response = await app.request(
      path,
      {
        method,
        headers: {
          authorization: `Bearer ${TOKEN}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      },
      environment,
    );
    const text = await response.text();
    return { status: response.status, body: text.startsWith('{') ? JSON.parse(text) : text };
  };
}

describe('the app refuses a store without conditional writes', () => {
  it(
    'answers 503 storage_unsupported on plain fauxqs for every session route, stores nothing, and stays ' + 'healthy',
    async () => {
      const prefix = `probe-http/${crypto.randomUUID()}/`;
      const store = createTestS3Store(inject('fauxqsEndpoint'), inject('s3Bucket'));
      const call = appOn(store, prefix);
      const expected = {
        code: 'storage_unsupported',
        message: expect.stringContaining(
          'the store ignores If-None-Match: a create-only put overwrote an existing object',
        ),
        details: { missing: ['If-None-Match', 'If-Match'] },
      };
      for (const [method, path, body] of [
        ['POST', '/v1/sessions', { id: 'lost' }],
        ['GET', '/v1/sessions/lost'],
        ['POST', '/v1/sessions/lost/turns', { input: 'hello' }],
        ['GET', '/v1/sessions/lost/inbox'],
      ] as const) {
        const response = await call(method, path, body);
        expect(response.status, `${method} ${path}`).toBe(503);
        expect(response.body.error).toEqual(expected);
        expect(response.body.error.message).toMatch(
          /tailgate needs conditional writes \(R2, AWS S3, MinIO, Ceph RGW\)$/,
        );
      }
      expect((await store.list(prefix)).objects).toEqual([]);
      expect(await call('GET', '/healthz')).toEqual({ status: 200, body: { ok: true } });
      expect((await call('GET', '/openapi.json')).status).toBe(200);
    },
  );

  it('serves S3 behind the conditional gateway', async () => {
    const call = appOn(
      createTestS3Store(inject('s3Endpoint'), inject('s3Bucket')),
      `probe-http/${crypto.randomUUID()}/`,
    );
    expect((await call('POST', '/v1/sessions', { id: 'kept' })).status).toBe(201);
    expect((await call('POST', '/v1/sessions/kept/turns', { input: 'hello' })).body.output[0].content).toBe(
      'echo: hello',
    );
  });
});

describe('the probe in the request path', () => {
  it('runs once for many concurrent first requests, and no request after it touches a probe key', async () => {
    const counting = new CountingStore(new MemoryStore());
    const keys: string[] = [];
    const store = new FaultyStore(counting).failWhen(({ key }) => {
      keys.push(key);
      return false;
    });
    const tasks: Promise<unknown>[] = [];
    const call = appOn(store, 'dep/', tasks);
    const created = await Promise.all(
      Array.from({ length: 20 }, (_, index) => call('POST', '/v1/sessions', { id: `s${index}` })),
    );
    expect(created.map((response) => response.status)).toEqual(Array(20).fill(201));
    const probeKeys = keys.filter((key) => key.startsWith(`dep/${PROBE_PREFIX}`));
    expect(probeKeys).toHaveLength(4);
    expect(new Set(probeKeys).size).toBe(1);
    expect(keys.filter((key) => key.startsWith('dep/sessions/'))).toHaveLength(20);

    // After the first request, a turn costs what the pipeline costs (8 at most, tested in
    // test/turn/turn.test.ts): no probe, and no other extra operation from the hook. The work
    // each request leaves after its response has ended before the next turn is counted.
    const drain = async () => {
      while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
    };
    keys.length = 0;
    await drain();
    for (let turn = 0; turn < 3; turn++) {
      counting.reset();
      const response = await call('POST', '/v1/sessions/s0/turns', { input: `turn ${turn}` });
      expect(response.status).toBe(200);
      expect(counting.operations).toBeLessThanOrEqual(8);
      await drain();
    }
    expect(keys.filter((key) => key.includes(PROBE_PREFIX))).toEqual([]);
  });

  it(
    'answers 503 storage_error when the probe fails on the network, and probes again on the next ' + 'request',
    async () => {
      const memory = new MemoryStore();
      const store = new FaultyStore(memory).failWhen(
        ({ operation, key }) => operation === 'put' && key.includes(PROBE_PREFIX),
        { times: 1 },
      );
      const call = appOn(store);
      const failed = await call('POST', '/v1/sessions', { id: 'retry' });
      expect(failed.status).toBe(503);
      expect(failed.body.error.code).toBe('storage_error');
      expect((await memory.list('')).objects).toEqual([]);
      expect((await call('POST', '/v1/sessions', { id: 'retry' })).status).toBe(201);
      expect(store.injected).toBe(1);
    },
  );
});

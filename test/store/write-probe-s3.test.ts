import { describe, expect, inject, it } from 'vitest';
import { StorageUnsupportedError } from '../../lib/errors.ts';
import { requireConditionalWrites } from '../../lib/store/write-probe.ts';
import { createTestS3Store } from '../support/s3-store.ts';

// The write probe against S3 wire-protocol servers: fauxqs behind the conditional gateway
// of the global setup, and fauxqs alone (which ignores both preconditions).
const fresh = () => `write-probe/${crypto.randomUUID()}/`;

describe('requireConditionalWrites on S3', () => {
  it('passes S3 behind the conditional gateway and leaves nothing under the prefix', async () => {
    const prefix = fresh();
    const store = createTestS3Store(inject('s3Endpoint'), inject('s3Bucket'));
    await expect(requireConditionalWrites(store, { keyPrefix: prefix })).resolves.toBeUndefined();
    expect((await store.list(prefix)).objects).toEqual([]);
  });

  it('refuses plain fauxqs, naming both preconditions it ignores, and cleans up', async () => {
    const prefix = fresh();
    const store = createTestS3Store(inject('fauxqsEndpoint'), inject('s3Bucket'));
    const refused = await requireConditionalWrites(store, { keyPrefix: prefix }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(StorageUnsupportedError);
    expect(refused).toMatchObject({
      code: 'storage_unsupported',
      missing: ['If-None-Match', 'If-Match'],
      details: { missing: ['If-None-Match', 'If-Match'] },
    });
    expect((refused as Error).message).toBe(
      'the store ignores If-None-Match: a create-only put overwrote an existing object; ' +
        'the store ignores If-Match: a put with a wrong ETag overwrote the object; ' +
        'tailgate needs conditional writes (R2, AWS S3, MinIO, Ceph RGW)',
    );
    expect((await store.list(prefix)).objects).toEqual([]);
  });
});

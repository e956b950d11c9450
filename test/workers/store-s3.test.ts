import { expect, it } from 'vitest';
import { S3Store, createS3Store } from '../../lib/store/s3.ts';

// The S3 adapter must load and run inside workerd (no node: imports), e.g. against R2's
// S3 endpoint. The conformance suite for it runs in the node project against fauxqs.
it('builds in workerd with checksums only when required', async () => {
  const store = createS3Store({
    bucket: 'tailgate',
    endpoint: 'http://127.0.0.1:9',
    credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
  });
  expect(store).toBeInstanceOf(S3Store);
  expect(await store.client.config.requestChecksumCalculation()).toBe('WHEN_REQUIRED');
  expect(await store.client.config.responseChecksumValidation()).toBe('WHEN_REQUIRED');
});

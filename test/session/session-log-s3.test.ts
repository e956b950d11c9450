import { afterAll, beforeAll, inject } from 'vitest';
import { createTestS3Store, startConditionalGateway, type ConditionalGateway } from '../support/s3-store.ts';
import { defineSessionLogConcurrency } from './session-log-concurrency.ts';

// fauxqs through the loopback gateway that enforces S3's conditional-write semantics
// (see test/support/s3-store.ts).
let gateway: ConditionalGateway;
beforeAll(async () => {
  gateway = await startConditionalGateway(inject('s3Endpoint'));
});
afterAll(async () => {
  await gateway.close();
});

defineSessionLogConcurrency('s3 on fauxqs', () => createTestS3Store(gateway.endpoint, inject('s3Bucket')));

import { inject } from 'vitest';
import { createTestS3Store } from '../support/s3-store.ts';
import { conditionalGatewayForFile } from '../support/s3-gateway-hooks.ts';
import { defineSessionLogConcurrency } from './session-log-concurrency.ts';

// fauxqs through the loopback gateway that enforces S3's conditional-write semantics
// (see test/support/s3-store.ts).
const gateway = conditionalGatewayForFile();

defineSessionLogConcurrency('s3 on fauxqs', () => createTestS3Store(gateway().endpoint, inject('s3Bucket')));

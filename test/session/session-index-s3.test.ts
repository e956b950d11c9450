import { inject } from 'vitest';
import { createTestS3Store } from '../support/s3-store.ts';
import { defineSessionIndexSuite } from './session-index-suite.ts';

// The suite on S3 (fauxqs behind the conditional-write gateway the global setup starts;
// test/support/s3-store.ts). Each test writes under a key prefix of its own.
defineSessionIndexSuite('s3 on fauxqs', () => createTestS3Store(inject('s3Endpoint'), inject('s3Bucket')));

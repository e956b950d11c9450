import { inject } from 'vitest';
import { createTestS3Store } from '../support/s3-store.ts';
import { defineRecordCacheSuite } from './record-cache-suite.ts';

// The suite on S3 (fauxqs behind the conditional-write gateway the global setup starts;
// test/support/s3-store.ts), whose etag is the quoted MD5 of the body, from a put's ETag header
// and a listing's <ETag> alike. Each test writes under a key prefix of its own.
defineRecordCacheSuite('s3 on fauxqs', () => createTestS3Store(inject('s3Endpoint'), inject('s3Bucket')));

import { env } from 'cloudflare:test';
import { R2Store } from '../../lib/store/r2.ts';
import { defineRecordCacheSuite } from '../session/record-cache-suite.ts';

const bucket = (env as { BUCKET: R2Bucket }).BUCKET;

// The suite on an R2 binding, whose etag is the body's MD5 (unquoted), from a put's R2Object and
// a listing's alike. The local bucket is shared by the file's tests: each writes under a key
// prefix of its own.
defineRecordCacheSuite('r2 binding', () => new R2Store(bucket));

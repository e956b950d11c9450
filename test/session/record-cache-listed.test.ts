import { MemoryStore } from '../../lib/store/memory.ts';
import { defineRecordCacheSuite } from './record-cache-suite.ts';

// The suite on the memory store, whose etag is its body's SHA-256; record-cache-file.test.ts
// runs it on the file store, whose etag is new at every put.
defineRecordCacheSuite('memory', () => new MemoryStore());

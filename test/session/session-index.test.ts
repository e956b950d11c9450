import { MemoryStore } from '../../lib/store/memory.ts';
import { defineSessionIndexSuite } from './session-index-suite.ts';

// The suite on memory; session-index-s3.test.ts runs it on S3.
defineSessionIndexSuite('memory', () => new MemoryStore());

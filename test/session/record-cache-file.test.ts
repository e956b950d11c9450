import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { FileStore } from '../../lib/store/file.ts';
import { defineRecordCacheSuite } from './record-cache-suite.ts';

// The suite on the file store, whose etag is new at every put (a rewrite of the same bytes too):
// record-cache-listed.test.ts runs it on memory.
const directory = mkdtempSync(join(tmpdir(), 'tailgate-record-cache-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));
defineRecordCacheSuite('file', () => new FileStore(mkdtempSync(join(directory, 'store-'))));

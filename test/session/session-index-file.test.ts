import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { FileStore } from '../../lib/store/file.ts';
import { defineSessionIndexRaces } from './session-index-races.ts';
import { defineSessionIndexSuite } from './session-index-suite.ts';

// The suite on the file store, whose create-only put takes no key lock and whose put over an
// entry there already does (lib/store/file.ts): session-index.test.ts runs it on memory.
const directory = mkdtempSync(join(tmpdir(), 'tailgate-session-index-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));
defineSessionIndexSuite('file', () => new FileStore(directory));
defineSessionIndexRaces('file', () => new FileStore(directory), 40);

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, inject } from 'vitest';
import { FileStore } from '../../lib/store/file.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { createTestS3Store, startConditionalGateway } from '../support/s3-store.ts';
import { appHarness } from '../support/app-harness.ts';
import { TOKEN, type HttpHarness } from './http-suite.ts';
import { defineKeyLimitsSuite } from './key-limits-suite.ts';

// The key-limit suite through the app on the memory store, the file store and S3 (fauxqs behind
// the conditional gateway); R2 runs it inside workerd (test/workers/http-tokens.test.ts).
const directory = await mkdtemp(join(tmpdir(), 'tailgate-key-limits-'));
const gateway = await startConditionalGateway(inject('s3Endpoint'));
afterAll(async () => {
  await gateway.close();
  await rm(directory, { recursive: true, force: true });
});

function harness(store: ObjectStore): HttpHarness {
  return appHarness(store, { API_TOKEN: TOKEN, ALLOW_ANONYMOUS: 'false', DEFAULT_MODEL: 'echo' });
}

defineKeyLimitsSuite('memory', harness(new MemoryStore()));
defineKeyLimitsSuite('file store', harness(new FileStore(directory)));
defineKeyLimitsSuite('s3 (fauxqs)', harness(createTestS3Store(gateway.endpoint, inject('s3Bucket'))));

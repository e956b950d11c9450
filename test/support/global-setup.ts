import { execFileSync } from 'node:child_process';
import { startFauxqs } from 'fauxqs';
import type { TestProject } from 'vitest/node';
import { startConditionalGateway } from './s3-store.ts';

export const S3_BUCKET = 'tailgate-test';

/**
 * Starts a real S3 wire-protocol server (fauxqs) on loopback for the whole run, behind the
 * conditional-write gateway of ./s3-store.ts (fauxqs ignores If-None-Match / If-Match on
 * PutObject and lists in locale order; the gateway gives S3's semantics for both).
 * `s3Endpoint` is the gateway, shared by every test worker so its per-key locks are global;
 * `fauxqsEndpoint` is fauxqs itself, for tests that need the raw server.
 */
export default async function setup(project: TestProject) {
  // The inspector's bundle and the docs script in .assets/, fresh (Node, Deno and `npm start` serve them).
  execFileSync(process.execPath, ['scripts/assets.mjs'], { stdio: 'inherit' });
  const server = await startFauxqs({ port: 0, logger: false, host: '127.0.0.1' } as Parameters<typeof startFauxqs>[0]);
  server.createBucket(S3_BUCKET);
  const gateway = await startConditionalGateway(server.address, { keyIndex: true });
  project.provide('s3Endpoint', gateway.endpoint);
  project.provide('fauxqsEndpoint', server.address);
  project.provide('s3Bucket', S3_BUCKET);
  return async () => {
    await gateway.close();
    await server.stop();
  };
}

declare module 'vitest' {
  export interface ProvidedContext {
    s3Endpoint: string;
    fauxqsEndpoint: string;
    s3Bucket: string;
  }
}

import { startFauxqs } from 'fauxqs';
import type { TestProject } from 'vitest/node';

export const S3_BUCKET = 'tailgate-test';

/** Starts a real S3 wire-protocol server (fauxqs) on loopback for the whole run. */
export default async function setup(project: TestProject) {
  const server = await startFauxqs({ port: 0, logger: false, host: '127.0.0.1' } as Parameters<typeof startFauxqs>[0]);
  server.createBucket(S3_BUCKET);
  project.provide('s3Endpoint', server.address);
  project.provide('s3Bucket', S3_BUCKET);
  return async () => {
    await server.stop();
  };
}

declare module 'vitest' {
  export interface ProvidedContext {
    s3Endpoint: string;
    s3Bucket: string;
  }
}

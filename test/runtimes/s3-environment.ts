import { inject } from 'vitest';
import { S3Store } from '../../lib/store/s3.ts';

export const TOKEN = 'runtime-token';

/**
 * Env for a Deno or Node server process: S3 on the fauxqs server the global setup started,
 * through its conditional-write gateway (fauxqs alone ignores If-None-Match and If-Match,
 * and the server refuses it), or at `endpoint`.
 */
export function serverEnvironment(
  port: number,
  keyPrefix: string,
  endpoint = inject('s3Endpoint'),
): Record<string, string> {
  return {
    PORT: String(port),
    API_TOKEN: TOKEN,
    S3_ENDPOINT: endpoint,
    S3_BUCKET: inject('s3Bucket'),
    S3_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
    KEY_PREFIX: keyPrefix,
    DEFAULT_MODEL: 'echo',
  };
}

/** Drops a notice straight into the bucket, as any S3 client could. */
export function directWriter(keyPrefix: string) {
  const store = new S3Store({
    bucket: inject('s3Bucket'),
    endpoint: inject('s3Endpoint'),
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  return async (sessionId: string, name: string, content: string) => {
    await store.put(`${keyPrefix}sessions/${sessionId}/inbox/${name}`, content);
  };
}

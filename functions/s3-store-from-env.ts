import type { ServiceConfig } from '../lib/config.ts';
import { NotConfiguredError } from '../lib/errors.ts';
import { S3Store } from '../lib/store/s3.ts';

/**
 * The S3 store of the Deno and Node entries, from S3_ENDPOINT, S3_BUCKET, S3_REGION and the
 * AWS_* keys (AWS_SESSION_TOKEN with temporary ones). One client per distinct setting, so
 * connections are reused across requests while a changed setting still takes effect.
 */
export function s3StoreFromConfig(): (config: ServiceConfig) => S3Store {
  const stores = new Map<string, S3Store>();
  return (config) => {
    const { endpoint, bucket, region, accessKeyId, secretAccessKey, sessionToken } = config.s3;
    if (bucket === undefined) throw new NotConfiguredError('S3_BUCKET is not set', { variable: 'S3_BUCKET' });
    // Without an endpoint the SDK builds AWS's from the region: `auto` (R2's, the default) names no host.
    if (endpoint === undefined && region === 'auto')
      throw new NotConfiguredError(
        "S3_REGION must name the bucket's AWS region when S3_ENDPOINT is not set (e.g. S3_REGION=us-east-1)",
        { variable: 'S3_REGION' },
      );
    const key = JSON.stringify([endpoint, bucket, region, accessKeyId, secretAccessKey, sessionToken]);
    let store = stores.get(key);
    if (!store) {
      store = new S3Store({
        bucket,
        region,
        ...(endpoint !== undefined ? { endpoint, forcePathStyle: true } : {}),
        ...(accessKeyId !== undefined && secretAccessKey !== undefined
          ? { credentials: { accessKeyId, secretAccessKey, ...(sessionToken !== undefined ? { sessionToken } : {}) } }
          : {}),
      });
      if (stores.size > 16) stores.clear();
      stores.set(key, store);
    }
    return store;
  };
}

import { type ServiceConfig, serviceEnvSchema } from '../lib/config.ts';
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
    if (bucket === undefined)
      throw new NotConfiguredError(
        `invalid setting S3_BUCKET: not set${endpoint === undefined ? '' : ', while S3_ENDPOINT is'}: ` +
          'S3 needs the name of the bucket to keep sessions in',
        { variable: 'S3_BUCKET' },
      );
    // Without an endpoint the SDK builds AWS's from the region: `auto` (R2's, the default) names no host.
    if (endpoint === undefined && region === 'auto')
      throw new NotConfiguredError(
        "invalid setting S3_REGION: must name the bucket's AWS region when S3_ENDPOINT is not set " +
          '(e.g. S3_REGION=us-east-1)',
        { variable: 'S3_REGION' },
      );
    // A bucket's own URL as the endpoint: path-style requests name the bucket twice, keys under <bucket>/.
    const url = endpoint === undefined ? undefined : new URL(endpoint);
    const segments = url?.pathname.split('/').filter((segment) => segment !== '') ?? [];
    if (url !== undefined && segments.at(-1) === bucket) {
      const without = `${url.origin}${segments
        .slice(0, -1)
        .map((segment) => `/${segment}`)
        .join('')}`;
      throw new NotConfiguredError(
        `invalid setting S3_ENDPOINT: ends in the bucket's name (${url.pathname}): ` +
          `write the endpoint without it (${without}); S3_BUCKET names the bucket. ${keptBy(bucket, config.keyPrefix)}`,
        { variable: 'S3_ENDPOINT' },
      );
    }
    // Half a key pair would send the SDK to its other sources (a profile, an instance's role).
    const set = Object.entries({ AWS_ACCESS_KEY_ID: accessKeyId, AWS_SECRET_ACCESS_KEY: secretAccessKey })
      .concat([['AWS_SESSION_TOKEN', sessionToken]])
      .filter(([, value]) => value !== undefined)
      .map(([name]) => name);
    const missing = accessKeyId === undefined ? 'AWS_ACCESS_KEY_ID' : 'AWS_SECRET_ACCESS_KEY';
    if (set.length > 0 && (accessKeyId === undefined || secretAccessKey === undefined))
      throw new NotConfiguredError(
        `invalid setting ${missing}: not set, while ${set.join(' and ')} ${set.length > 1 ? 'are' : 'is'}: ` +
          'S3 takes AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY together (and AWS_SESSION_TOKEN with them), or none',
        { variable: missing },
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

/**
 * What reads the keys an endpoint ending in `bucket` stored, under `<bucket>/<prefix>`, with the
 * endpoint written without it: that KEY_PREFIX, or, when the service refuses it (a bucket named
 * `sessions`, a prefix too long), moving the objects to the keys the KEY_PREFIX set now reads.
 */
function keptBy(bucket: string, prefix: string): string {
  const kept = `${bucket}/${prefix}`;
  const refusal = serviceEnvSchema.shape.KEY_PREFIX.safeParse(kept).error?.issues[0]?.message;
  if (refusal === undefined)
    return `What this endpoint stored is under ${kept} in the bucket: KEY_PREFIX=${kept} reads it with that endpoint`;
  return (
    `What this endpoint stored is under ${kept} in the bucket, which no KEY_PREFIX the service takes reads ` +
    `(${kept} is refused: ${refusal}): ` +
    `move each object under ${kept} to its key without the leading ${bucket}/, ` +
    `where the KEY_PREFIX set now (${prefix === '' ? 'empty' : prefix}) reads it with that endpoint`
  );
}

import { expect, it } from 'vitest';
import { s3StoreFromConfig } from '../../functions/s3-store-from-env.ts';
import { parseServiceConfig } from '../../lib/config.ts';
import { NotConfiguredError } from '../../lib/errors.ts';

// Without S3_ENDPOINT the store is AWS S3, whose endpoint names the bucket's region: the default
// `auto` (R2's) would send every request to `<bucket>.s3.auto.amazonaws.com`, a host that does not
// exist, so each request would fail as a storage error. It is refused as a setting instead.
it.each([{}, { S3_REGION: 'auto' }])('refuses AWS S3 without its region (%o), naming S3_REGION', (region) => {
  const storeFor = s3StoreFromConfig();
  const config = parseServiceConfig({ S3_BUCKET: 'tailgate', ...region });
  expect(() => storeFor(config)).toThrow(NotConfiguredError);
  expect(() => storeFor(config)).toThrow(
    /^invalid setting S3_REGION: must name the bucket's AWS region when S3_ENDPOINT is not set/,
  );
  try {
    storeFor(config);
  } catch (error) {
    expect((error as NotConfiguredError).details).toEqual({ variable: 'S3_REGION' });
  }
});

// S3_ENDPOINT without S3_BUCKET: worded as every other refused setting is, naming it first.
it('refuses S3 without S3_BUCKET, naming it as an invalid setting', () => {
  const storeFor = s3StoreFromConfig();
  const config = parseServiceConfig({ S3_ENDPOINT: 'http://127.0.0.1:9' });
  expect(() => storeFor(config)).toThrow(NotConfiguredError);
  expect(() => storeFor(config)).toThrow(/^invalid setting S3_BUCKET: not set, while S3_ENDPOINT is/);
  try {
    storeFor(config);
  } catch (error) {
    expect((error as NotConfiguredError).details).toEqual({ variable: 'S3_BUCKET' });
  }
});

it('takes AWS S3 with its region, and an S3_ENDPOINT with the default region', () => {
  const storeFor = s3StoreFromConfig();
  expect(() => storeFor(parseServiceConfig({ S3_BUCKET: 'tailgate', S3_REGION: 'eu-west-1' }))).not.toThrow();
  expect(() =>
    storeFor(parseServiceConfig({ S3_BUCKET: 'tailgate', S3_ENDPOINT: 'https://example.r2.cloudflarestorage.com' })),
  ).not.toThrow();
});

// One half of a key pair is a typo or a missing line of the environment file: the SDK would pass
// over it to its other sources (a profile, the instance's role) and each request would fail as a
// storage error, or be signed by another identity. It is refused as a setting, naming the half missing.
it.each([
  [{ AWS_ACCESS_KEY_ID: 'AKIATEST' }, 'AWS_SECRET_ACCESS_KEY'],
  [{ AWS_SECRET_ACCESS_KEY: 'secret' }, 'AWS_ACCESS_KEY_ID'],
  [{ AWS_ACCESS_KEY_ID: 'AKIATEST', AWS_SESSION_TOKEN: 'token' }, 'AWS_SECRET_ACCESS_KEY'],
  [{ AWS_SESSION_TOKEN: 'token' }, 'AWS_ACCESS_KEY_ID'],
])('refuses S3 credentials %o without %s, naming it', (credentials, missing) => {
  const storeFor = s3StoreFromConfig();
  const config = parseServiceConfig({ S3_ENDPOINT: 'http://127.0.0.1:9', S3_BUCKET: 'tailgate', ...credentials });
  expect(() => storeFor(config)).toThrow(NotConfiguredError);
  expect(() => storeFor(config)).toThrow(`invalid setting ${missing}: not set, while`);
  try {
    storeFor(config);
  } catch (error) {
    expect((error as NotConfiguredError).details).toEqual({ variable: missing });
  }
});

// A bucket's own S3 URL (`https://<account>.r2.cloudflarestorage.com/<bucket>`, as R2's dashboard
// shows it) as S3_ENDPOINT: path-style requests would name the bucket twice, and every key would
// land under `<bucket>/` inside it, where a deployment with the endpoint alone finds none of them.
it.each(['http://127.0.0.1:9/tailgate', 'https://example.r2.cloudflarestorage.com/tailgate/'])(
  'refuses S3_ENDPOINT %s, which ends in the bucket, naming S3_ENDPOINT',
  (endpoint) => {
    const storeFor = s3StoreFromConfig();
    const config = parseServiceConfig({ S3_ENDPOINT: endpoint, S3_BUCKET: 'tailgate' });
    expect(() => storeFor(config)).toThrow(NotConfiguredError);
    expect(() => storeFor(config)).toThrow(
      `invalid setting S3_ENDPOINT: ends in the bucket's name (${new URL(endpoint).pathname}): ` +
        `write the endpoint without it (${new URL(endpoint).origin}); S3_BUCKET names the bucket`,
    );
    try {
      storeFor(config);
    } catch (error) {
      expect((error as NotConfiguredError).details).toEqual({ variable: 'S3_ENDPOINT' });
    }
  },
);

it('takes an S3_ENDPOINT with a path of its own (a gateway under a prefix)', () => {
  const storeFor = s3StoreFromConfig();
  expect(() =>
    storeFor(parseServiceConfig({ S3_ENDPOINT: 'https://example.com/storage/v1/s3', S3_BUCKET: 'tailgate' })),
  ).not.toThrow();
});

// Such an endpoint worked: path-style requests went to `<endpoint>/<bucket>/<key>`, so the bucket
// holds every key it wrote under `<bucket>/` (and KEY_PREFIX after it). The refusal names the
// KEY_PREFIX that reads them with the endpoint written without the bucket's name, or the sessions
// the deployment kept would be out of its sight once its operator follows the message.
it.each(['', 'prod/'])('names the KEY_PREFIX that keeps what the endpoint stored (KEY_PREFIX %j)', (prefix) => {
  const storeFor = s3StoreFromConfig();
  const config = parseServiceConfig({
    S3_ENDPOINT: 'https://example.r2.cloudflarestorage.com/tailgate',
    S3_BUCKET: 'tailgate',
    KEY_PREFIX: prefix,
  });
  const kept = `tailgate/${prefix}`;
  expect(() => storeFor(config)).toThrow(`KEY_PREFIX=${kept} `);
  // That prefix is one the service takes.
  expect(parseServiceConfig({ S3_BUCKET: 'tailgate', S3_REGION: 'us-east-1', KEY_PREFIX: kept }).keyPrefix).toBe(kept);
});

// A bucket named `sessions` (or a KEY_PREFIX so long that `<bucket>/` makes it too long): the
// prefix that reads what the endpoint stored is one the service refuses, `sessions/` overlapping
// the sessions of a deployment without a prefix. The refusal names the move that makes those keys
// readable with the KEY_PREFIX set, and no KEY_PREFIX the service would refuse in turn.
it.each([
  ['sessions', ''],
  ['sessions', 'prod/'],
  ['tailgate', 'x/'.repeat(127)],
])('names no refused KEY_PREFIX for bucket %s and KEY_PREFIX %j, but the move that keeps it', (bucket, prefix) => {
  const storeFor = s3StoreFromConfig();
  const config = parseServiceConfig({
    S3_ENDPOINT: `https://example.r2.cloudflarestorage.com/${bucket}`,
    S3_BUCKET: bucket,
    KEY_PREFIX: prefix,
  });
  const message = (() => {
    try {
      storeFor(config);
    } catch (error) {
      return (error as NotConfiguredError).message;
    }
    return 'not refused';
  })();
  expect(message).toMatch(/^invalid setting S3_ENDPOINT: ends in the bucket's name/);
  const named = [...message.matchAll(/KEY_PREFIX=(\S*)/g)].map((match) => match[1]);
  for (const suggested of named)
    expect(() => parseServiceConfig({ KEY_PREFIX: suggested }), `${suggested} in ${message}`).not.toThrow();
  expect(message).toContain(
    `What this endpoint stored is under ${bucket}/${prefix} in the bucket, which no KEY_PREFIX the service takes reads`,
  );
  expect(message).toContain(
    `move each object under ${bucket}/${prefix} to its key without the leading ${bucket}/, ` +
      `where the KEY_PREFIX set now (${prefix === '' ? 'empty' : prefix}) reads it with that endpoint`,
  );
});

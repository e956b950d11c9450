import { expect, inject, it } from 'vitest';
import { parseServiceConfig } from '../../lib/config.ts';
import { s3StoreFromConfig } from '../../functions/s3-store-from-env.ts';
import { conditionalGatewayForFile } from '../support/s3-gateway-hooks.ts';

// Temporary AWS credentials (an assumed role, a Lambda or ECS task) are three variables: without
// the session token AWS refuses every request.
const gateway = conditionalGatewayForFile();

it('signs S3 requests with temporary credentials whole: AWS_SESSION_TOKEN goes with the key pair', async () => {
  const store = s3StoreFromConfig()(
    parseServiceConfig({
      S3_ENDPOINT: gateway().endpoint,
      S3_BUCKET: inject('s3Bucket'),
      S3_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'ASIATESTTEMPORARYKEY',
      AWS_SECRET_ACCESS_KEY: 'test-secret',
      AWS_SESSION_TOKEN: 'test-session-token',
    }),
  );
  const before = gateway().puts.length;
  await store.put(`token/${crypto.randomUUID()}`, 'x');
  const sent = gateway().puts.slice(before);
  expect(sent).toHaveLength(1);
  expect(sent[0]!['x-amz-security-token']).toBe('test-session-token');
});

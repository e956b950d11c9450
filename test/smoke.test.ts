import { expect, inject, it } from 'vitest';
import { S3Client, PutObjectCommand, GetObjectCommand } from '@aws-sdk/client-s3';

it('reaches fauxqs on loopback', async () => {
  const client = new S3Client({ endpoint: inject('s3Endpoint'), region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: 'x', secretAccessKey: 'y' } });
  await client.send(new PutObjectCommand({ Bucket: inject('s3Bucket'), Key: 'a', Body: 'hello' }));
  const got = await client.send(new GetObjectCommand({ Bucket: inject('s3Bucket'), Key: 'a', Range: 'bytes=-3' }));
  expect(await got.Body!.transformToString()).toBe('llo');
});

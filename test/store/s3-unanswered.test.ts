import { once } from 'node:events';
import { type Server, createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StorageError } from '../../lib/errors.ts';
import { S3Store } from '../../lib/store/s3.ts';

/**
 * An endpoint that takes connections and never answers (a wrong port behind a firewall that
 * accepts, a store that hung): every operation must fail as a StorageError, not wait for ever.
 */
describe('S3Store against an endpoint that never answers', () => {
  let server: Server;
  let endpoint: string;
  beforeAll(async () => {
    server = createServer((socket) => socket.on('error', () => {}));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    endpoint = `http://127.0.0.1:${address.port}`;
  });
  afterAll(async () => {
    server.close();
  });

  const store = () =>
    new S3Store({
      bucket: 'tailgate',
      endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      idleTimeoutMs: 100,
    });

  it('fails a put, naming the timeout', async () => {
    const error = await store()
      .put('probe', 'x', { onlyIfAbsent: true })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(StorageError);
    expect((error as StorageError).message).toMatch(/S3 put probe failed: .*timed out/);
  });

  it('fails a get and a list too', async () => {
    await expect(store().get('probe')).rejects.toBeInstanceOf(StorageError);
    await expect(store().list('sessions/')).rejects.toBeInstanceOf(StorageError);
  });
});

import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Inbox } from '../../lib/inbox/inbox.ts';
import { sessionConfigKey, sessionPrefix } from '../../lib/session/keys.ts';
import { CountingStore } from '../support/counting-store.ts';
import { startConditionalGateway, createTestS3Store, type ConditionalGateway } from '../support/s3-store.ts';
import { inboxSemanticsSuite } from './inbox-suite.ts';

// fauxqs ignores conditional puts; the gateway in front of it enforces them as S3 does.
let gateway: ConditionalGateway;
let client: S3Client;
beforeAll(async () => {
  gateway = await startConditionalGateway(inject('s3Endpoint'));
  client = new S3Client({
    endpoint: gateway.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
});
afterAll(async () => {
  client.destroy();
  await gateway.close();
});

/** A notice written by an outside client: a plain PutObject, no metadata. */
async function writeDirect(key: string, body: string | Uint8Array): Promise<void> {
  await client.send(new PutObjectCommand({ Bucket: inject('s3Bucket'), Key: key, Body: body }));
}

inboxSemanticsSuite('S3 (fauxqs)', () => ({
  store: createTestS3Store(gateway.endpoint, inject('s3Bucket')),
  writeDirect,
}));

describe('inbox on S3', () => {
  it('heads only the notices and records of the page it lists', async () => {
    const keyPrefix = `inbox-s3-${crypto.randomUUID()}/`;
    const store = new CountingStore(createTestS3Store(gateway.endpoint, inject('s3Bucket')));
    const inbox = new Inbox(store, { keyPrefix, sessionExists: sessionExistsIn(store, keyPrefix) });
    await store.put(sessionConfigKey(keyPrefix, 's1'), '{}');
    const prefix = sessionPrefix(keyPrefix, 's1');
    const names = Array.from({ length: 8 }, (_, index) => `n${index}`);
    await Promise.all(names.map((name) => writeDirect(`${prefix}inbox/${name}`, name)));
    await Promise.all(names.map((name) => writeDirect(`${prefix}inbox_removed/${name}`, name)));
    store.reset();
    const pending = await inbox.pendingPage('s1', { after: 'n1', limit: 3 });
    expect(pending).toMatchObject({ has_more: true, next_after: 'n4' });
    expect(pending.pending.map((notice) => notice.name)).toEqual(['n2', 'n3', 'n4']);
    // The session check, then one list and a head per notice of the page.
    expect(store.counts).toMatchObject({ list: 1, head: 4, get: 0 });
    store.reset();
    const delivered = await inbox.deliveredPage('s1', { after: 'n5', limit: 3 });
    expect(delivered).toMatchObject({ has_more: false, next_after: null });
    expect(delivered.delivered.map((record) => [record.stored_as, record.turn])).toEqual([
      ['n6', null],
      ['n7', null],
    ]);
    expect(store.counts).toMatchObject({ list: 1, head: 3, get: 0 });
  });

  it('lists and records deliveries with metadata read by head, since S3 listings carry none', async () => {
    const keyPrefix = `inbox-s3-${crypto.randomUUID()}/`;
    const store = new CountingStore(createTestS3Store(gateway.endpoint, inject('s3Bucket')));
    const clock = () => new Date('2031-02-03T04:05:06.007Z');
    const inbox = new Inbox(store, { keyPrefix, clock, sessionExists: sessionExistsIn(store, keyPrefix) });
    await store.put(sessionConfigKey(keyPrefix, 's1'), '{}');
    await inbox.post('s1', { name: 'api.md', content: 'from the API' });
    await writeDirect(`${sessionPrefix(keyPrefix, 's1')}inbox/direct.md`, 'from a client');

    expect(
      (await inbox.listPending('s1')).map((notice) => [notice.name, notice.posted_at === '2031-02-03T04:05:06.007Z']),
    ).toEqual([
      ['api.md', true],
      ['direct.md', false],
    ]);
    store.reset();
    const result = await inbox.consume('s1', { turn: 4, sessionExists: true });
    expect(result.delivered.map((notice) => notice.content)).toEqual(['from the API', 'from a client']);
    expect(store.counts).toMatchObject({ list: 1, get: 2, put: 2, delete: 2, head: 0 });

    const records = await inbox.listDelivered('s1');
    expect(records).toMatchObject([
      {
        name: 'api.md',
        stored_as: 'api.md',
        posted_at: '2031-02-03T04:05:06.007Z',
        delivered_at: '2031-02-03T04:05:06.007Z',
        turn: 4,
      },
      { name: 'direct.md', stored_as: 'direct.md', delivered_at: '2031-02-03T04:05:06.007Z', turn: 4 },
    ]);
    expect(records[1]!.posted_at).toBe(result.delivered[1]!.posted_at);
  });
});

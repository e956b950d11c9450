import { startFauxqs } from 'fauxqs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { StorageError } from '../../lib/errors.ts';
import { listAll, mapLimit } from '../../lib/store/object-store.ts';
import { type S3Store, createS3Client } from '../../lib/store/s3.ts';
import { createTestS3Store, startConditionalGateway, type ConditionalGateway } from '../support/s3-store.ts';
import { compareBytes, defineObjectStoreConformance } from './object-store-conformance.ts';

let gateway: ConditionalGateway;
beforeAll(async () => {
  gateway = await startConditionalGateway(inject('s3Endpoint'));
});
afterAll(async () => {
  await gateway.close();
});

defineObjectStoreConformance('s3 (fauxqs)', () => createTestS3Store(gateway.endpoint, inject('s3Bucket')));

/** Records the SDK command names the store sends. */
function recordCommands(store: S3Store): string[] {
  const names: string[] = [];
  store.client.middlewareStack.add(
    (next, context) => async (args) => {
      names.push(String(context.commandName));
      return next(args);
    },
    { step: 'initialize' },
  );
  return names;
}

describe('S3Store', () => {
  const fresh = () => `s3-store/${crypto.randomUUID()}/`;

  it('lists a prefix of more than 1,000 keys whole, page by page, in byte order', async () => {
    const store = createTestS3Store(gateway.endpoint, inject('s3Bucket'));
    const prefix = fresh();
    // Shaped like a session's records: a number written newest first, then suffixes.
    const keys = Array.from({ length: 1_100 }, (_, index) => {
      const number = String(1e12 - Math.floor(index / 2)).slice(1);
      return `${prefix}${number}${index % 2 ? '.done' : ''}`;
    });
    await mapLimit(keys, 32, (key) => store.put(key, 'x'));
    const listed = await listAll(store, prefix);
    expect(listed.map((info) => info.key)).toEqual(
      [...keys].sort((left, right) => Buffer.compare(Buffer.from(left), Buffer.from(right))),
    );
  });

  it('stores an object larger than fauxqs takes in one request, conditions kept, and reads it back', async () => {
    const store = createTestS3Store(gateway.endpoint, inject('s3Bucket'));
    const key = `${fresh()}large`;
    // 12 MiB of varied bytes: over fauxqs's 11 MiB body limit, so the gateway uploads it in parts.
    const body = new Uint8Array(12 * 1024 * 1024).map((_, index) => (index * 31 + (index >> 13)) & 0xff);
    const written = await store.put(key, body, { onlyIfAbsent: true, metadata: { kind: 'view' } });
    expect(written?.size).toBe(body.length);
    expect(await store.put(key, body, { onlyIfAbsent: true })).toBeNull();
    const read = await store.get(key);
    expect(read?.etag).toBe(written?.etag);
    expect(read?.metadata).toEqual({ kind: 'view' });
    expect(Buffer.compare(Buffer.from(read!.body), Buffer.from(body))).toBe(0);
    const range = await store.get(key, { range: { offset: 9 * 1024 * 1024, length: 5 } });
    expect([...range!.body]).toEqual([...body.subarray(9 * 1024 * 1024, 9 * 1024 * 1024 + 5)]);
    expect(await store.put(key, 'replaced', { ifMatch: '"not-its-etag"' })).toBeNull();
    expect(await store.put(key, 'replaced', { ifMatch: written!.etag })).not.toBeNull();
    expect(new TextDecoder().decode((await store.get(key))!.body)).toBe('replaced');
  });

  it('configures its client to compute and validate checksums only when required', async () => {
    const store = createTestS3Store(gateway.endpoint, inject('s3Bucket'));
    expect(await store.client.config.requestChecksumCalculation()).toBe('WHEN_REQUIRED');
    expect(await store.client.config.responseChecksumValidation()).toBe('WHEN_REQUIRED');
    expect(await createS3Client().config.requestChecksumCalculation()).toBe('WHEN_REQUIRED');

    const before = gateway.puts.length;
    await store.put(`${fresh()}plain`, 'no checksum please', { onlyIfAbsent: true });
    const sent = gateway.puts.slice(before);
    expect(sent).toHaveLength(1);
    const headerNames = Object.keys(sent[0]!);
    expect(
      headerNames.filter((name) => name.startsWith('x-amz-checksum') || name === 'x-amz-sdk-checksum-algorithm'),
    ).toEqual([]);
    expect(sent[0]!['content-encoding'] ?? '').not.toContain('aws-chunked');
    expect(sent[0]!['if-none-match']).toBe('*');
  });

  it('retries a create-only put answered with 409 ConditionalRequestConflict', async () => {
    const store = createTestS3Store(gateway.endpoint, inject('s3Bucket'));
    const key = `${fresh()}conflicted`;
    let conflicts = 0;
    gateway.conflict = (path) => path.endsWith(key) && ++conflicts <= 2;
    try {
      const put = await store.put(key, 'third time lucky', { onlyIfAbsent: true });
      expect(put).not.toBeNull();
      expect(conflicts).toBe(3);
      expect(new TextDecoder().decode((await store.get(key))!.body)).toBe('third time lucky');
    } finally {
      gateway.conflict = undefined;
    }
  });

  it('settles a create-only put that keeps conflicting by looking at the key', async () => {
    const store = createTestS3Store(gateway.endpoint, inject('s3Bucket'));
    const taken = `${fresh()}taken`;
    const free = `${fresh()}free`;
    await store.put(taken, 'the racing winner');
    gateway.conflict = (path) => path.endsWith(taken) || path.endsWith(free);
    try {
      // The key now exists: the racing write won, so ours lost.
      expect(await store.put(taken, 'loser', { onlyIfAbsent: true })).toBeNull();
      // The key is still absent: the conflict is not resolved, which is a storage failure.
      await expect(store.put(free, 'stuck', { onlyIfAbsent: true })).rejects.toBeInstanceOf(StorageError);
    } finally {
      gateway.conflict = undefined;
    }
    expect(new TextDecoder().decode((await store.get(taken))!.body)).toBe('the racing winner');
  });

  it('settles an If-Match put that keeps conflicting by comparing the current etag', async () => {
    const store = createTestS3Store(gateway.endpoint, inject('s3Bucket'));
    const key = `${fresh()}cas`;
    const first = await store.put(key, 'v1');
    const second = await store.put(key, 'v2');
    gateway.conflict = (path) => path.endsWith(key);
    try {
      // The etag moved on: whatever races us, our stale write has lost.
      expect(await store.put(key, 'v3', { ifMatch: first!.etag })).toBeNull();
      // The etag is still ours, so the conflict is unresolved: a storage failure, not a loss.
      await expect(store.put(key, 'v3', { ifMatch: second!.etag })).rejects.toBeInstanceOf(StorageError);
    } finally {
      gateway.conflict = undefined;
    }
    expect(new TextDecoder().decode((await store.get(key))!.body)).toBe('v2');
  });

  it('deletes in batches of at most 1000 keys', async () => {
    const store = createTestS3Store(gateway.endpoint, inject('s3Bucket'));
    const prefix = fresh();
    await store.put(`${prefix}0`, 'a');
    await store.put(`${prefix}2500`, 'b');
    const commands = recordCommands(store);
    await store.delete(Array.from({ length: 2501 }, (_, i) => `${prefix}${i}`));
    expect(commands).toEqual(['DeleteObjectsCommand', 'DeleteObjectsCommand', 'DeleteObjectsCommand']);
    expect(await store.head(`${prefix}0`)).toBeNull();
    expect(await store.head(`${prefix}2500`)).toBeNull();
  });

  it('lists without one HEAD per object and leaves list metadata empty', async () => {
    const store = createTestS3Store(gateway.endpoint, inject('s3Bucket'));
    const prefix = fresh();
    await Promise.all(['a', 'b', 'c'].map((name) => store.put(`${prefix}${name}`, name, { metadata: { name } })));
    const commands = recordCommands(store);
    const listed = await store.list(prefix);
    expect(commands).toEqual(['ListObjectsV2Command']);
    expect(listed.objects.map((object) => object.metadata)).toEqual([{}, {}, {}]);
    expect((await store.head(`${prefix}b`))!.metadata).toEqual({ name: 'b' });
  });

  it('maps backend failures to StorageError naming the key', async () => {
    const store = createTestS3Store(gateway.endpoint, `missing-bucket-${crypto.randomUUID().slice(0, 8)}`);
    await expect(store.get('some/key')).rejects.toBeInstanceOf(StorageError);
    await expect(store.put('some/key', 'x')).rejects.toThrow(/some\/key/);
    await expect(store.list('some/')).rejects.toMatchObject({ code: 'storage_error' });
  });
});

describe('the conditional gateway with its key index, the only writer of a bucket of its own', () => {
  const bucket = 'indexed';
  let fauxqs: Awaited<ReturnType<typeof startFauxqs>>;
  let indexed: ConditionalGateway;
  beforeAll(async () => {
    fauxqs = await startFauxqs({ port: 0, logger: false, host: '127.0.0.1' } as Parameters<typeof startFauxqs>[0]);
    fauxqs.createBucket(bucket);
    indexed = await startConditionalGateway(fauxqs.address, { keyIndex: true });
  });
  afterAll(async () => {
    await indexed.close();
    await fauxqs.stop();
  });
  const store = () => createTestS3Store(indexed.endpoint, bucket);
  const keysOf = (objects: { key: string }[]) => objects.map((object) => object.key);

  defineObjectStoreConformance('s3 (fauxqs, gateway key index)', store);

  it('lists right after puts and deletes, across pages, from where the last page ended', async () => {
    const prefix = `pages/${crypto.randomUUID()}/`;
    const at = (number: number) => `${prefix}${String(number).padStart(3, '0')}`;
    await mapLimit([0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110], 4, (number) => store().put(at(number), 'v'));
    const first = await store().list(prefix, { limit: 5 });
    expect(keysOf(first.objects)).toEqual([0, 10, 20, 30, 40].map(at));
    await store().delete(at(50));
    await store().delete([at(10), at(90), at(100)]);
    await store().put(at(45), 'ahead');
    await store().put(at(5), 'behind');
    const overwritten = await store().put(at(60), 'overwritten');
    const second = await store().list(prefix, { limit: 5, cursor: first.cursor! });
    expect(keysOf(second.objects)).toEqual([45, 60, 70, 80, 110].map(at));
    expect(second.objects[1]).toMatchObject({ size: 'overwritten'.length, etag: overwritten!.etag });
    expect(second.truncated).toBe(false);

    // With a delimiter: a group listed is not listed again, whatever is put in it.
    await mapLimit(['g/1', 'g/2', 'h/1', 'i'], 4, (name) => store().put(`${prefix}${name}`, 'v'));
    const groups = await store().list(prefix, { delimiter: '/', limit: 10, startAfter: at(110) });
    expect([groups.prefixes, keysOf(groups.objects)]).toEqual([[`${prefix}g/`, `${prefix}h/`], [`${prefix}i`]]);
    const page = await store().list(prefix, { delimiter: '/', limit: 1, startAfter: at(110) });
    expect(page.prefixes).toEqual([`${prefix}g/`]);
    await store().put(`${prefix}g/3`, 'v');
    await store().put(`${prefix}g0`, 'v');
    await store().delete([`${prefix}h/1`]);
    const next = await store().list(prefix, { delimiter: '/', limit: 5, cursor: page.cursor! });
    expect([next.prefixes, keysOf(next.objects)]).toEqual([[], [`${prefix}g0`, `${prefix}i`]]);
  });

  it('lists what fauxqs holds: keys, sizes, etags, an object stored in parts, a batch delete', async () => {
    const prefix = `same/${crypto.randomUUID()}/`;
    const names = [
      'b',
      'B',
      '_a',
      'a~',
      'é',
      '\u{1D11E}',
      '\u{FFFD}',
      '10',
      '9',
      ...Array.from({ length: 30 }, (_, i) => `n${i}`),
    ];
    await mapLimit(names, 8, (name) => store().put(`${prefix}${name}`, name.repeat(3)));
    // Over fauxqs's body limit: the gateway stores it in parts.
    const large = await store().put(`${prefix}large`, new Uint8Array(12 * 1024 * 1024).fill(7));
    await store().delete(names.slice(-20).map((name) => `${prefix}${name}`));
    const listed = await listAll(store(), prefix);
    const upstream = await listAll(createTestS3Store(fauxqs.address, bucket), prefix);
    expect(keysOf(listed)).toEqual(keysOf(upstream).sort(compareBytes));
    const fields = (objects: { key: string; size: number; etag: string }[]) =>
      objects.map(({ key, size, etag }) => ({ key, size, etag })).sort((a, b) => compareBytes(a.key, b.key));
    expect(fields(listed)).toEqual(fields(upstream));
    expect(listed.find((object) => object.key === `${prefix}large`)).toMatchObject({
      size: 12 * 1024 * 1024,
      etag: large!.etag,
    });
    expect(listed).toHaveLength(names.length - 20 + 1);
  });

  it('answers NoSuchBucket for a bucket that does not exist', async () => {
    const missing = createTestS3Store(indexed.endpoint, `missing-${crypto.randomUUID().slice(0, 8)}`);
    await expect(missing.list('some/')).rejects.toMatchObject({ code: 'storage_error' });
  });
});

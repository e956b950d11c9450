import { describe, expect, inject, it } from 'vitest';
import { StorageError } from '../../lib/errors.ts';
import { listAll, mapLimit } from '../../lib/store/object-store.ts';
import { type S3Store, createS3Client } from '../../lib/store/s3.ts';
import { createTestS3Store } from '../support/s3-store.ts';
import { conditionalGatewayForFile } from '../support/s3-gateway-hooks.ts';
import { defineObjectStoreConformance } from './object-store-conformance.ts';

const gateway = conditionalGatewayForFile();

defineObjectStoreConformance(
  's3 (fauxqs)',
  () => createTestS3Store(gateway().endpoint, inject('s3Bucket')),
  'of the body',
);

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

/**
 * Orders the store's requests. `hold(name, key, until)`: a send of that command (for that key, or
 * any when undefined) goes out only once `until` settles. `settled(name, count)`: settles once
 * that many sends of the command have been answered or failed. A caller's own steps after its
 * answer are promise continuations, run before any held request (sent later) can be answered.
 */
function orderCommands(store: S3Store) {
  const holds: { name: string; key: string | undefined; until: Promise<unknown> }[] = [];
  const counts = new Map<string, number>();
  const waiting: { name: string; count: number; resolve: () => void }[] = [];
  store.client.middlewareStack.add(
    (next, context) => async (args) => {
      const name = String(context.commandName);
      const { Key } = args.input as { Key?: string };
      for (const hold of holds)
        if (hold.name === name && (hold.key === undefined || hold.key === Key)) await hold.until.catch(() => {});
      try {
        return await next(args);
      } finally {
        const count = (counts.get(name) ?? 0) + 1;
        counts.set(name, count);
        for (const waiter of waiting) if (waiter.name === name && waiter.count <= count) waiter.resolve();
      }
    },
    { step: 'initialize' },
  );
  return {
    hold(name: string, key: string | undefined, until: Promise<unknown>): void {
      holds.push({ name, key, until });
    },
    settled(name: string, count: number): Promise<void> {
      if ((counts.get(name) ?? 0) >= count) return Promise.resolve();
      return new Promise((resolve) => waiting.push({ name, count, resolve }));
    },
  };
}

describe('S3Store', () => {
  const fresh = () => `s3-store/${crypto.randomUUID()}/`;

  it('lists a prefix of more than 1,000 keys whole, page by page, in byte order', async () => {
    const store = createTestS3Store(gateway().endpoint, inject('s3Bucket'));
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
    const store = createTestS3Store(gateway().endpoint, inject('s3Bucket'));
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
    const store = createTestS3Store(gateway().endpoint, inject('s3Bucket'));
    expect(await store.client.config.requestChecksumCalculation()).toBe('WHEN_REQUIRED');
    expect(await store.client.config.responseChecksumValidation()).toBe('WHEN_REQUIRED');
    expect(await createS3Client().config.requestChecksumCalculation()).toBe('WHEN_REQUIRED');

    const before = gateway().puts.length;
    await store.put(`${fresh()}plain`, 'no checksum please', { onlyIfAbsent: true });
    const sent = gateway().puts.slice(before);
    expect(sent).toHaveLength(1);
    const headerNames = Object.keys(sent[0]!);
    expect(
      headerNames.filter((name) => name.startsWith('x-amz-checksum') || name === 'x-amz-sdk-checksum-algorithm'),
    ).toEqual([]);
    expect(sent[0]!['content-encoding'] ?? '').not.toContain('aws-chunked');
    expect(sent[0]!['if-none-match']).toBe('*');
  });

  it('retries a create-only put answered with 409 ConditionalRequestConflict', async () => {
    const store = createTestS3Store(gateway().endpoint, inject('s3Bucket'));
    const key = `${fresh()}conflicted`;
    let conflicts = 0;
    gateway().conflict = (path) => path.endsWith(key) && ++conflicts <= 2;
    try {
      const put = await store.put(key, 'third time lucky', { onlyIfAbsent: true });
      expect(put).not.toBeNull();
      expect(conflicts).toBe(3);
      expect(new TextDecoder().decode((await store.get(key))!.body)).toBe('third time lucky');
    } finally {
      gateway().conflict = undefined;
    }
  });

  it('settles a create-only put that keeps conflicting by looking at the key', async () => {
    const store = createTestS3Store(gateway().endpoint, inject('s3Bucket'));
    const taken = `${fresh()}taken`;
    const free = `${fresh()}free`;
    await store.put(taken, 'the racing winner');
    gateway().conflict = (path) => path.endsWith(taken) || path.endsWith(free);
    try {
      // The key now exists: the racing write won, so ours lost.
      expect(await store.put(taken, 'loser', { onlyIfAbsent: true })).toBeNull();
      // The key is still absent: the conflict is not resolved, which is a storage failure.
      await expect(store.put(free, 'stuck', { onlyIfAbsent: true })).rejects.toBeInstanceOf(StorageError);
    } finally {
      gateway().conflict = undefined;
    }
    expect(new TextDecoder().decode((await store.get(taken))!.body)).toBe('the racing winner');
  });

  it('settles an If-Match put that keeps conflicting by comparing the current etag', async () => {
    const store = createTestS3Store(gateway().endpoint, inject('s3Bucket'));
    const key = `${fresh()}cas`;
    const first = await store.put(key, 'v1');
    const second = await store.put(key, 'v2');
    gateway().conflict = (path) => path.endsWith(key);
    try {
      // The etag moved on: whatever races us, our stale write has lost.
      expect(await store.put(key, 'v3', { ifMatch: first!.etag })).toBeNull();
      // The etag is still ours, so the conflict is unresolved: a storage failure, not a loss.
      await expect(store.put(key, 'v3', { ifMatch: second!.etag })).rejects.toBeInstanceOf(StorageError);
    } finally {
      gateway().conflict = undefined;
    }
    expect(new TextDecoder().decode((await store.get(key))!.body)).toBe('v2');
  });

  it('deletes in batches of at most 1000 keys', async () => {
    const store = createTestS3Store(gateway().endpoint, inject('s3Bucket'));
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
    const store = createTestS3Store(gateway().endpoint, inject('s3Bucket'));
    const prefix = fresh();
    await Promise.all(['a', 'b', 'c'].map((name) => store.put(`${prefix}${name}`, name, { metadata: { name } })));
    const commands = recordCommands(store);
    const listed = await store.list(prefix);
    expect(commands).toEqual(['ListObjectsV2Command']);
    expect(listed.objects.map((object) => object.metadata)).toEqual([{}, {}, {}]);
    expect((await store.head(`${prefix}b`))!.metadata).toEqual({ name: 'b' });
  });

  it('maps backend failures to StorageError naming the key', async () => {
    const store = createTestS3Store(gateway().endpoint, `missing-bucket-${crypto.randomUUID().slice(0, 8)}`);
    await expect(store.get('some/key')).rejects.toBeInstanceOf(StorageError);
    await expect(store.put('some/key', 'x')).rejects.toThrow(/some\/key/);
    await expect(store.list('some/')).rejects.toMatchObject({ code: 'storage_error' });
  });

  it("answers head in a bucket that does not exist with a StorageError, a missing key's with null", async () => {
    // A HEAD's 404 has no body (no NoSuchBucket): the store asks for the bucket after one.
    const missing = createTestS3Store(gateway().endpoint, `missing-bucket-${crypto.randomUUID().slice(0, 8)}`);
    const refused = await missing.head('some/key').catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(StorageError);
    expect(refused).toMatchObject({ code: 'storage_error', details: { operation: 'head', name: 'NoSuchBucket' } });
    expect((refused as Error).message).toMatch(/some\/key/);
    await expect(missing.get('some/key', { range: { offset: 0, length: 0 } })).rejects.toBeInstanceOf(StorageError);

    const store = createTestS3Store(gateway().endpoint, inject('s3Bucket'));
    const commands = recordCommands(store);
    expect(await store.head(`${fresh()}absent`)).toBeNull();
    expect(commands).toEqual(['HeadObjectCommand', 'HeadBucketCommand']);
    // The bucket found, the next absent key's head is one request.
    commands.length = 0;
    expect(await store.head(`${fresh()}absent`)).toBeNull();
    expect(commands).toEqual(['HeadObjectCommand']);
    const key = `${fresh()}present`;
    await store.put(key, 'here');
    commands.length = 0;
    expect((await store.head(key))?.size).toBe(4);
    expect(commands).toEqual(['HeadObjectCommand']);
  });

  it('asks HeadBucket once for concurrent HEADs of absent keys, and again after it failed', async () => {
    const heads = 6;
    const store = createTestS3Store(gateway().endpoint, inject('s3Bucket'));
    const commands = recordCommands(store);
    // The HeadBucket goes out once every HEAD has had its 404: all of them wait for its answer.
    const order = orderCommands(store);
    order.hold('HeadBucketCommand', undefined, order.settled('HeadObjectCommand', heads));
    const prefix = fresh();
    const found = await Promise.all(
      Array.from({ length: heads }, (_, index) => store.head(`${prefix}absent-${index}`)),
    );
    expect(found).toEqual(Array.from({ length: heads }, () => null));
    expect(commands.filter((name) => name === 'HeadObjectCommand')).toHaveLength(heads);
    expect(commands.filter((name) => name === 'HeadBucketCommand')).toHaveLength(1);
    // A missing bucket: the callers in flight share its answer, and the next caller asks again.
    const missing = createTestS3Store(gateway().endpoint, `missing-bucket-${crypto.randomUUID().slice(0, 8)}`);
    const asked = recordCommands(missing);
    const missingOrder = orderCommands(missing);
    missingOrder.hold('HeadBucketCommand', undefined, missingOrder.settled('HeadObjectCommand', heads));
    const refused = await Promise.all(
      Array.from({ length: heads }, (_, index) => missing.head(`some/key-${index}`).catch((error: unknown) => error)),
    );
    for (const [index, error] of refused.entries())
      expect(error).toMatchObject({
        code: 'storage_error',
        details: { key: `some/key-${index}`, name: 'NoSuchBucket' },
      });
    expect(asked.filter((name) => name === 'HeadBucketCommand')).toHaveLength(1);
    await expect(missing.head('some/key')).rejects.toMatchObject({ details: { name: 'NoSuchBucket' } });
    expect(asked.filter((name) => name === 'HeadBucketCommand')).toHaveLength(2);
  });

  it('asks HeadBucket again for a HEAD answered after a failed one, not after the bucket was found', async () => {
    const missing = createTestS3Store(gateway().endpoint, `missing-bucket-${crypto.randomUUID().slice(0, 8)}`);
    const asked = recordCommands(missing);
    const order = orderCommands(missing);
    // Two HEADs have their 404 and share a HeadBucket; the third goes out once that has failed.
    order.hold('HeadBucketCommand', undefined, order.settled('HeadObjectCommand', 2));
    order.hold('HeadObjectCommand', 'some/late', order.settled('HeadBucketCommand', 1));
    const refused = await Promise.all(
      ['some/early-0', 'some/early-1', 'some/late'].map((key) => missing.head(key).catch((error: unknown) => error)),
    );
    for (const error of refused) expect(error).toMatchObject({ details: { name: 'NoSuchBucket' } });
    expect(asked.filter((name) => name === 'HeadBucketCommand')).toHaveLength(2);

    const store = createTestS3Store(gateway().endpoint, inject('s3Bucket'));
    const commands = recordCommands(store);
    const found = orderCommands(store);
    found.hold('HeadBucketCommand', undefined, found.settled('HeadObjectCommand', 2));
    const prefix = fresh();
    found.hold('HeadObjectCommand', `${prefix}late`, found.settled('HeadBucketCommand', 1));
    const absent = await Promise.all(['early-0', 'early-1', 'late'].map((name) => store.head(`${prefix}${name}`)));
    expect(absent).toEqual([null, null, null]);
    expect(commands.filter((name) => name === 'HeadBucketCommand')).toHaveLength(1);
  });
});

import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { canonicalEtag } from '../../lib/store/etag.ts';
import type { ByteRange, ListResult, ObjectStore } from '../../lib/store/object-store.ts';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Byte order of the UTF-8 encodings, computed independently of any adapter. */
export function compareBytes(a: string, b: string): number {
  const left = encoder.encode(a);
  const right = encoder.encode(b);
  for (let i = 0; i < Math.min(left.length, right.length); i++) {
    if (left[i] !== right[i]) return left[i]! - right[i]!;
  }
  return left.length - right.length;
}

function text(bytes: Uint8Array): string {
  return decoder.decode(bytes);
}

/** Every key under `prefix`, paging with `limit`, and the pages. */
export async function listAll(
  store: ObjectStore,
  prefix: string,
  limit: number,
): Promise<{ keys: string[]; pages: ListResult[] }> {
  const pages: ListResult[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await store.list(prefix, cursor === undefined ? { limit } : { limit, cursor });
    pages.push(page);
    if (!page.truncated) break;
    expect(page.cursor).toEqual(expect.any(String));
    cursor = page.cursor;
    if (pages.length > 100) throw new Error('list did not terminate');
  }
  return { keys: pages.flatMap((page) => page.objects.map((object) => object.key)), pages };
}

/**
 * One definition of the ObjectStore contract (lib/store/object-store.ts), run against every
 * adapter. Each test writes under its own random prefix, so one bucket can be shared by
 * tests, files and runs without cleanup between them. `etags`: whether the store's etag is of
 * the body alone (S3, R2 and the memory store: a rewrite that keeps the body keeps it) or of
 * each put (the file store).
 */
export function defineObjectStoreConformance(
  name: string,
  makeStore: () => Promise<ObjectStore> | ObjectStore,
  etags: 'of the body' | 'of each put',
): void {
  describe(`ObjectStore conformance: ${name}`, () => {
    let store: ObjectStore;
    beforeAll(async () => {
      store = await makeStore();
    });
    const fresh = () => `conformance/${crypto.randomUUID()}/`;

    it('round-trips body, metadata, size, etag and upload time through put, get and head', async () => {
      const key = `${fresh()}object.json`;
      const before = Date.now();
      const put = await store.put(key, '{"hello":"wörld"}', {
        metadata: { kind: 'turn', seq: '42' },
        contentType: 'application/json',
      });
      expect(put).not.toBeNull();
      const size = encoder.encode('{"hello":"wörld"}').length;
      expect(put).toMatchObject({ key, size, metadata: { kind: 'turn', seq: '42' } });
      expect(put!.etag).toEqual(expect.any(String));
      expect(put!.etag.length).toBeGreaterThan(0);
      // Server clocks may be coarse (seconds) and a little apart from ours.
      expect(Math.abs(put!.uploaded.getTime() - before)).toBeLessThan(60_000);

      const got = await store.get(key);
      expect(got).not.toBeNull();
      expect(text(got!.body)).toBe('{"hello":"wörld"}');
      expect(got).toMatchObject({ key, size, etag: put!.etag, metadata: { kind: 'turn', seq: '42' } });
      expect(got!.uploaded).toBeInstanceOf(Date);

      const head = await store.head(key);
      expect(head).toMatchObject({ key, size, etag: put!.etag, metadata: { kind: 'turn', seq: '42' } });
      expect(head).not.toHaveProperty('body');
    });

    it('gives null for missing keys on get, ranged get and head', async () => {
      const key = `${fresh()}missing`;
      expect(await store.get(key)).toBeNull();
      expect(await store.get(key, { range: { suffix: 10 } })).toBeNull();
      expect(await store.get(key, { range: { offset: 0, length: 4 } })).toBeNull();
      expect(await store.head(key)).toBeNull();
    });

    it('overwrites on a plain put', async () => {
      const key = `${fresh()}plain`;
      const first = await store.put(key, 'first', { metadata: { version: '1' } });
      const second = await store.put(key, 'second value', { metadata: { version: '2' } });
      expect(second).not.toBeNull();
      expect(second!.etag).not.toBe(first!.etag);
      const got = await store.get(key);
      expect(text(got!.body)).toBe('second value');
      expect(got!.metadata).toEqual({ version: '2' });
      expect(got!.etag).toBe(second!.etag);
    });

    it('stores a body of parts as their bytes one after another, under the same conditions', async () => {
      const key = `${fresh()}parts`;
      const euro = encoder.encode('€');
      // Past the size a file store writes in one piece with its header.
      const long = encoder.encode('x'.repeat(70_000));
      const empty = new Uint8Array(0);
      const parts = [
        encoder.encode('{"a":"'),
        empty,
        euro.subarray(0, 1),
        euro.subarray(1),
        empty,
        long.subarray(0, 40_000),
        long.subarray(40_000),
        encoder.encode('"}'),
      ];
      const expected = `{"a":"€${'x'.repeat(70_000)}"}`;
      const size = encoder.encode(expected).length;
      const put = await store.put(key, parts, { onlyIfAbsent: true, metadata: { kind: 'parts' } });
      expect(put).toMatchObject({ key, size, metadata: { kind: 'parts' } });
      // The stored bytes are the store's own: the parts changed after the put leave them.
      long.fill(0x79);
      const got = await store.get(key);
      expect(text(got!.body)).toBe(expected);
      expect(got).toMatchObject({ key, size, etag: put!.etag });
      expect(text((await store.get(key, { range: { offset: 6, length: 3 } }))!.body)).toBe('€');
      expect(await store.put(key, [encoder.encode('other')], { onlyIfAbsent: true })).toBeNull();
      const small = [encoder.encode('sm'), empty, encoder.encode('all')];
      const replaced = await store.put(key, small, { ifMatch: put!.etag });
      expect(replaced).toMatchObject({ key, size: 5 });
      expect(await store.put(key, [encoder.encode('stale')], { ifMatch: put!.etag })).toBeNull();
      expect(text((await store.get(key))!.body)).toBe('small');
      for (const nothing of [[], [empty, empty]]) {
        const emptyKey = `${fresh()}empty`;
        expect(await store.put(emptyKey, nothing)).toMatchObject({ key: emptyKey, size: 0 });
        expect((await store.get(emptyKey))!.body.length).toBe(0);
      }
    });

    const rangeCases: Array<[string, ByteRange, string]> = [
      ['offset and length', { offset: 2, length: 3 }, '234'],
      ['offset only', { offset: 7 }, '789'],
      ['offset zero only', { offset: 0 }, '0123456789'],
      ['length past the end', { offset: 8, length: 10 }, '89'],
      ['single byte', { offset: 5, length: 1 }, '5'],
      ['suffix', { suffix: 3 }, '789'],
      ['suffix equal to the size', { suffix: 10 }, '0123456789'],
      ['suffix larger than the object', { suffix: 1000 }, '0123456789'],
      ['offset at the end', { offset: 10 }, ''],
      ['offset past the end', { offset: 25, length: 4 }, ''],
      ['zero length', { offset: 3, length: 0 }, ''],
      ['zero suffix', { suffix: 0 }, ''],
    ];
    it.each(rangeCases)('reads a range: %s', async (_label, range, expected) => {
      const key = `${fresh()}digits`;
      const put = await store.put(key, '0123456789');
      const got = await store.get(key, { range });
      expect(got).not.toBeNull();
      expect(text(got!.body)).toBe(expected);
      // `size` is the whole object's size, whatever range was read.
      expect(got!.size).toBe(10);
      expect(got!.etag).toBe(put!.etag);
    });

    it('reads any range of a binary object as the matching slice (property)', async () => {
      const key = `${fresh()}random`;
      const body = Uint8Array.from({ length: 300 }, (_, i) => (i * 131 + 7) % 256);
      await store.put(key, body);
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(
            fc.record({ offset: fc.nat(320), length: fc.option(fc.nat(320), { nil: undefined }) }),
            fc.record({ suffix: fc.nat(320) }),
          ),
          async (generated) => {
            const range: ByteRange =
              'suffix' in generated
                ? { suffix: generated.suffix }
                : generated.length === undefined
                  ? { offset: generated.offset }
                  : { offset: generated.offset, length: generated.length };
            const expected =
              'suffix' in range
                ? body.slice(Math.max(0, body.length - range.suffix))
                : body.slice(range.offset, range.length === undefined ? undefined : range.offset + range.length);
            const got = await store.get(key, { range });
            expect(got!.body).toEqual(expected);
          },
        ),
        { numRuns: 60 },
      );
    });

    it('create-only put: the second put gets null and the original stays intact', async () => {
      const key = `${fresh()}once`;
      const first = await store.put(key, 'original', { onlyIfAbsent: true, metadata: { owner: 'first' } });
      expect(first).not.toBeNull();
      const second = await store.put(key, 'intruder', { onlyIfAbsent: true, metadata: { owner: 'second' } });
      expect(second).toBeNull();
      const got = await store.get(key);
      expect(text(got!.body)).toBe('original');
      expect(got!.metadata).toEqual({ owner: 'first' });
      expect(got!.etag).toBe(first!.etag);
    });

    it('create-only put succeeds again after the key was deleted', async () => {
      const key = `${fresh()}recreate`;
      expect(await store.put(key, 'one', { onlyIfAbsent: true })).not.toBeNull();
      await store.delete(key);
      expect(await store.put(key, 'two', { onlyIfAbsent: true })).not.toBeNull();
      expect(text((await store.get(key))!.body)).toBe('two');
    });

    it('If-Match put succeeds on the current etag and fails on a stale one', async () => {
      const key = `${fresh()}cas`;
      const first = await store.put(key, 'version 1');
      const second = await store.put(key, 'version 2', { ifMatch: first!.etag, metadata: { version: '2' } });
      expect(second).not.toBeNull();
      expect(second!.etag).not.toBe(first!.etag);

      expect(await store.put(key, 'version 3', { ifMatch: first!.etag })).toBeNull();
      const got = await store.get(key);
      expect(text(got!.body)).toBe('version 2');
      expect(got!.metadata).toEqual({ version: '2' });

      // Etags from head and get are as good as the one put returned.
      const head = await store.head(key);
      const third = await store.put(key, 'version 3', { ifMatch: head!.etag });
      expect(third).not.toBeNull();
      const fourth = await store.put(key, 'version 4', { ifMatch: (await store.get(key))!.etag });
      expect(fourth).not.toBeNull();
      expect(text((await store.get(key))!.body)).toBe('version 4');
    });

    it('gives every etag in its canonical form, and takes an If-Match in any form of it', async () => {
      const prefix = fresh();
      const key = `${prefix}forms`;
      const put = await store.put(key, 'version 1');
      const listed = (await store.list(prefix)).objects[0]!;
      for (const etag of [put!.etag, (await store.get(key))!.etag, (await store.head(key))!.etag, listed.etag])
        expect([etag, canonicalEtag(etag)]).toEqual([put!.etag, put!.etag]);
      // The forms S3-compatible services write etags in: quoted, weak, hex in upper case.
      let current = put!.etag;
      for (const form of [`"${current}"`, 'weak', 'upper']) {
        const etag = form === 'weak' ? `W/"${current}"` : form === 'upper' ? current.toUpperCase() : form;
        // Of an etag that is not hex (the file store's) the case counts: a stale one is refused.
        if (form === 'upper' && canonicalEtag(etag) !== current) {
          expect(await store.put(key, 'refused', { ifMatch: etag })).toBeNull();
          continue;
        }
        const written = await store.put(key, `after ${form}`, { ifMatch: etag });
        expect(written).not.toBeNull();
        current = written!.etag;
      }
      expect(await store.put(key, 'stale', { ifMatch: `"${put!.etag}"` })).toBeNull();
    });

    it(`If-Match after a rewrite that kept the body: the etag is ${etags}`, async () => {
      const key = `${fresh()}cas-same-body`;
      const first = await store.put(key, 'same', { metadata: { turn: '8' } });
      // Another writer rewrites it, the body kept (its metadata only), after this one read it.
      const rewrite = await store.put(key, 'same', { ifMatch: first!.etag, metadata: { turn: '9' } });
      expect(rewrite).not.toBeNull();
      const late = await store.put(key, 'same', { ifMatch: first!.etag, metadata: { turn: 'returned' } });
      if (etags === 'of the body') {
        // Both rewrites land: an if-match race that keeps the body is decided by nothing.
        expect(rewrite!.etag).toBe(first!.etag);
        expect(late).not.toBeNull();
        expect((await store.head(key))!.metadata).toEqual({ turn: 'returned' });
      } else {
        expect(rewrite!.etag).not.toBe(first!.etag);
        expect(late).toBeNull();
        expect((await store.head(key))!.metadata).toEqual({ turn: '9' });
      }
    });

    it('If-Match put on a missing key gets null and creates nothing', async () => {
      const key = `${fresh()}cas-missing`;
      const elsewhere = await store.put(`${key}-other`, 'x');
      expect(await store.put(key, 'value', { ifMatch: elsewhere!.etag })).toBeNull();
      expect(await store.head(key)).toBeNull();
    });

    it('a put both create-only and If-Match writes nothing, the key missing or present', async () => {
      const key = `${fresh()}both`;
      const other = await store.put(`${key}-other`, 'x');
      expect(await store.put(key, 'value', { onlyIfAbsent: true, ifMatch: other!.etag })).toBeNull();
      expect(await store.head(key)).toBeNull();
      const present = await store.put(key, 'first');
      expect(await store.put(key, 'second', { onlyIfAbsent: true, ifMatch: present!.etag })).toBeNull();
      expect(new TextDecoder().decode((await store.get(key))!.body)).toBe('first');
    });

    it('counts exactly: 40 concurrent If-Match increments of one object, ' +
      'each retried until it lands, end at 40', async () => {
      const key = `${fresh()}counter`;
      await store.put(key, '0');
      const writers = 40;
      const landed: string[] = [];
      await Promise.all(
        Array.from({ length: writers }, async () => {
          for (;;) {
            const current = (await store.get(key))!;
            const next = String(Number(text(current.body)) + 1);
            const written = await store.put(key, next, { ifMatch: current.etag });
            if (!written) continue;
            landed.push(next);
            return;
          }
        }),
      );
      expect(text((await store.get(key))!.body)).toBe(String(writers));
      // Each landed write wrote a different value: no two writers passed one etag's check.
      expect(new Set(landed).size).toBe(writers);
      // A bound, not a measure: about 40 x 41 / 2 gets and puts in all, each a round trip through
      // the S3 gateway, took over a minute on a loaded 2-core machine.
    }, 180_000);

    it(
      'stores, lists in byte order, overwrites and deletes keys of up to 1,024 bytes with long last ' + 'segments',
      async () => {
        const base = fresh();
        const encoder = new TextEncoder();
        const upTo = (start: string, fill: string) => {
          let key = start;
          while (encoder.encode(key + fill).length <= 1024) key += fill;
          return key;
        };
        // Long segments that share their first hundreds of bytes, and differ only at the end.
        const keys = [
          upTo(`${base}N`, 'O'),
          `${upTo(`${base}N`, 'O').slice(0, -1)}P`,
          upTo(`${base}Né`, 'é'),
          upTo(`${base}n`, 'x'),
          `${base}short`,
        ];
        for (const key of keys.slice(0, 4)) expect(encoder.encode(key).length).toBeGreaterThan(1020);
        for (const key of keys) expect(await store.put(key, key, { onlyIfAbsent: true })).not.toBeNull();
        for (const key of keys) {
          expect(text((await store.get(key))!.body)).toBe(key);
          expect((await store.head(key))!.key).toBe(key);
          expect(await store.put(key, 'again', { onlyIfAbsent: true })).toBeNull();
        }
        const { keys: listed } = await listAll(store, base, 2);
        expect(listed).toEqual([...keys].sort(compareBytes));
        const etag = (await store.head(keys[1]!))!.etag;
        expect(await store.put(keys[1]!, 'changed', { ifMatch: etag })).not.toBeNull();
        expect(text((await store.get(keys[1]!))!.body)).toBe('changed');
        expect(text((await store.get(keys[0]!))!.body)).toBe(keys[0]);
        await store.delete(keys.slice(0, 2));
        expect(await store.get(keys[0]!)).toBeNull();
        expect((await listAll(store, base, 10)).keys).toEqual(keys.slice(2).sort(compareBytes));
      },
    );

    it('lists keys under the prefix in byte order with their sizes and etags', async () => {
      const base = fresh();
      const prefix = `${base}list/`;
      const names = [
        '10_x',
        '2_x',
        'a_x',
        'A',
        'B_',
        'b/c',
        'b/a/z',
        'b',
        '_',
        '~',
        'é',
        'z',
        'Z/1',
        '0',
        '\u{FB00}',
        '\u{1D11E}',
        '\u{FFFD}x',
      ];
      const etags = new Map<string, string>();
      await Promise.all(
        names.map(async (name, index) => {
          const info = await store.put(`${prefix}${name}`, 'x'.repeat(index), { metadata: { name: 'n' } });
          etags.set(`${prefix}${name}`, info!.etag);
        }),
      );
      await store.put(`${base}list-sibling`, 'outside the prefix');
      await store.put(`${base}lis`, 'outside the prefix');

      const listed = await store.list(prefix);
      expect(listed.truncated).toBe(false);
      const expected = names.map((name) => `${prefix}${name}`).sort(compareBytes);
      expect(listed.objects.map((object) => object.key)).toEqual(expected);
      for (const object of listed.objects) {
        expect(object.size).toBe(names.indexOf(object.key.slice(prefix.length)));
        expect(object.etag).toBe(etags.get(object.key));
        expect(object.uploaded).toBeInstanceOf(Date);
        // list() may leave metadata empty (S3); when present it must be the stored metadata.
        expect([{}, { name: 'n' }]).toContainEqual(object.metadata);
      }
    });

    it("a create-only put's etag is the one get and a listing report; an empty object over it, another", async () => {
      // The session log takes a record it keeps on a listing of its key, etag and size alone
      // (lib/session/log/record-cache.ts): the etag a put returns must be the one listed.
      const prefix = `${fresh()}created/`;
      const key = `${prefix}record`;
      const put = await store.put(key, [encoder.encode('{"record":'), encoder.encode('1}')], { onlyIfAbsent: true });
      expect(put).toMatchObject({ key, size: 12 });
      expect((await store.get(key))!.etag).toBe(put!.etag);
      const [listed] = (await store.list(prefix)).objects;
      expect(listed).toMatchObject({ key, size: 12, etag: put!.etag });
      const buried = await store.put(key, new Uint8Array(0));
      const [tombstone] = (await store.list(prefix)).objects;
      expect(tombstone).toMatchObject({ key, size: 0, etag: buried!.etag });
      expect(tombstone!.etag).not.toBe(put!.etag);
    });

    it('pages through a listing with limit and cursor, losing and repeating nothing', async () => {
      const prefix = `${fresh()}pages/`;
      const keys = Array.from({ length: 11 }, (_, i) => `${prefix}${String(i).padStart(3, '0')}`);
      await Promise.all(keys.map((key) => store.put(key, key)));
      const { keys: listed, pages } = await listAll(store, prefix, 4);
      expect(listed).toEqual(keys);
      expect(pages[0]!.truncated).toBe(true);
      for (const page of pages) expect(page.objects.length).toBeLessThanOrEqual(4);
      expect(pages.at(-1)!.truncated).toBe(false);
      expect(pages.at(-1)!.cursor).toBeUndefined();

      const single = await listAll(store, prefix, 1);
      expect(single.keys).toEqual(keys);
    });

    it('lists an empty prefix as an empty, untruncated page', async () => {
      const listed = await store.list(`${fresh()}nothing/`);
      expect(listed).toEqual({ objects: [], truncated: false });
    });

    it(
      'groups keys by a delimiter: each group once, counted once against the limit, pages continue ' + 'after it',
      async () => {
        const prefix = `${fresh()}groups/`;
        const keys = ['a-b/x', 'a/1', 'a/2/deep', 'a0/1', 'b/1', 'loose', 'z/1'].map((name) => `${prefix}${name}`);
        await Promise.all(keys.map((key) => store.put(key, 'v')));
        const all = await store.list(prefix, { delimiter: '/' });
        expect(all.prefixes).toEqual(['a-b/', 'a/', 'a0/', 'b/', 'z/'].map((name) => `${prefix}${name}`));
        expect(all.objects.map((object) => object.key)).toEqual([`${prefix}loose`]);
        expect(all.truncated).toBe(false);
        const first = await store.list(prefix, { delimiter: '/', limit: 2 });
        expect(first.prefixes).toEqual([`${prefix}a-b/`, `${prefix}a/`]);
        expect(first.objects).toEqual([]);
        expect(first.truncated).toBe(true);
        // Past a group: startAfter just above every key that starts with it.
        const next = await store.list(prefix, { delimiter: '/', limit: 2, startAfter: `${prefix}a0` });
        expect(next.prefixes).toEqual([`${prefix}a0/`, `${prefix}b/`]);
        const continued = await store.list(prefix, { delimiter: '/', limit: 2, cursor: first.cursor! });
        expect(continued.prefixes).toEqual([`${prefix}a0/`, `${prefix}b/`]);
      },
    );

    it('pages a delimited listing past a group once, whatever its keys hold after the delimiter', async () => {
      const prefix = `${fresh()}edge/`;
      // U+10FFFF right after the delimiter sorts after any bound a group's walk jumps to.
      for (const name of ['g/a', 'g/\u{10FFFF}x', 'g/\u{10FFFF}', 'h']) await store.put(`${prefix}${name}`, 'v');
      const rows: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await store.list(prefix, {
          delimiter: '/',
          limit: 1,
          ...(cursor === undefined ? {} : { cursor }),
        });
        rows.push(...(page.prefixes ?? []), ...page.objects.map((object) => object.key));
        cursor = page.truncated ? page.cursor : undefined;
      } while (cursor !== undefined && ++pages < 10);
      expect(rows).toEqual([`${prefix}g/`, `${prefix}h`]);
      const whole = await store.list(prefix, { delimiter: '/' });
      expect([...(whole.prefixes ?? []), ...whole.objects.map((object) => object.key)]).toEqual(rows);
    });

    it('skips keys up to and including startAfter', async () => {
      const prefix = `${fresh()}after/`;
      const keys = ['a', 'b', 'b0', 'c', 'd'].map((name) => `${prefix}${name}`);
      await Promise.all(keys.map((key) => store.put(key, 'v')));
      const keysOf = (result: ListResult) => result.objects.map((object) => object.key);
      expect(keysOf(await store.list(prefix, { startAfter: `${prefix}b` }))).toEqual(keys.slice(2));
      // startAfter need not be an existing key.
      expect(keysOf(await store.list(prefix, { startAfter: `${prefix}b5` }))).toEqual(keys.slice(3));
      const limited = await store.list(prefix, { startAfter: `${prefix}a`, limit: 2 });
      expect(keysOf(limited)).toEqual(keys.slice(1, 3));
      expect(limited.truncated).toBe(true);
      const rest = await store.list(prefix, { startAfter: `${prefix}a`, limit: 2, cursor: limited.cursor! });
      expect(keysOf(rest)).toEqual(keys.slice(3));
    });

    it('deletes single keys, many keys, and missing keys without error', async () => {
      const prefix = `${fresh()}delete/`;
      const keys = Array.from({ length: 6 }, (_, i) => `${prefix}${i}`);
      await Promise.all(keys.map((key) => store.put(key, 'doomed')));

      await store.delete(keys[0]!);
      expect(await store.head(keys[0]!)).toBeNull();
      expect(await store.head(keys[1]!)).not.toBeNull();

      await store.delete([keys[1]!, keys[2]!, `${prefix}never-existed`, keys[3]!]);
      for (const key of keys.slice(0, 4)) expect(await store.get(key)).toBeNull();

      await store.delete(`${prefix}never-existed`);
      await store.delete([]);
      expect((await store.list(prefix)).objects.map((object) => object.key)).toEqual(keys.slice(4));
      await store.delete(keys.slice(4));
      expect((await store.list(prefix)).objects).toEqual([]);
    });

    it('stores empty bodies', async () => {
      const key = `${fresh()}empty`;
      const put = await store.put(key, new Uint8Array(0), { metadata: { empty: 'yes' } });
      expect(put).toMatchObject({ size: 0 });
      const got = await store.get(key);
      expect(got!.body.length).toBe(0);
      expect(got).toMatchObject({ size: 0, metadata: { empty: 'yes' } });
      expect((await store.head(key))!.size).toBe(0);
      expect((await store.get(key, { range: { suffix: 5 } }))!.body.length).toBe(0);
      expect((await store.get(key, { range: { offset: 0 } }))!.body.length).toBe(0);
      expect(await store.put(`${fresh()}empty-once`, '', { onlyIfAbsent: true })).not.toBeNull();
    });

    it('round-trips binary bodies that are not UTF-8 byte for byte', async () => {
      const key = `${fresh()}binary`;
      const body = new Uint8Array([
        0xff,
        0xfe,
        0x00,
        0xc3,
        0x28,
        0x80,
        0xed,
        0xa0,
        0x80,
        ...Array.from({ length: 256 }, (_, i) => i),
      ]);
      const put = await store.put(key, body);
      expect(put!.size).toBe(body.length);
      const got = await store.get(key);
      expect(got!.body).toEqual(body);
      expect((await store.get(key, { range: { suffix: 4 } }))!.body).toEqual(body.slice(-4));
      expect((await store.get(key, { range: { offset: 1, length: 5 } }))!.body).toEqual(body.slice(1, 6));
    });

    it('encodes string bodies as UTF-8', async () => {
      const key = `${fresh()}utf8`;
      await store.put(key, 'naïve ☕ 𝄞');
      expect((await store.get(key))!.body).toEqual(encoder.encode('naïve ☕ 𝄞'));
    });

    it('lets exactly one of 16 parallel create-only puts win, and keeps the winner’s body', async () => {
      const key = `${fresh()}race`;
      const bodies = Array.from({ length: 16 }, (_, i) => `contender ${i} ${'.'.repeat(i * 3)}`);
      const results = await Promise.all(
        bodies.map((body, i) => store.put(key, body, { onlyIfAbsent: true, metadata: { contender: String(i) } })),
      );
      const winners = results.flatMap((result, i) => (result ? [i] : []));
      expect(winners).toHaveLength(1);
      const winner = winners[0]!;
      const got = await store.get(key);
      expect(text(got!.body)).toBe(bodies[winner]);
      expect(got!.metadata).toEqual({ contender: String(winner) });
      expect(got!.etag).toBe(results[winner]!.etag);
    });
  });
}

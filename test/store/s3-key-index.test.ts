import fc from 'fast-check';
import { startFauxqs } from 'fauxqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listAll, mapLimit } from '../../lib/store/object-store.ts';
import { type IndexedObject, type IndexPage, KeyIndex } from '../support/s3-key-index.ts';
import { type ConditionalGateway, createTestS3Store, startConditionalGateway } from '../support/s3-store.ts';
import { compareBytes, defineObjectStoreConformance } from './object-store-conformance.ts';

/** Where a listing goes on from: after a key (start-after, or the last key of a page), or past a group. */
type Resume = { after: string } | { past: string } | undefined;

/** The rows S3 lists from `resume` on, computed from the whole model: sorted, filtered, grouped. */
function expectedRows(
  model: Map<string, IndexedObject>,
  prefix: string,
  delimiter: string | undefined,
  resume: Resume,
) {
  const rows: ({ object: IndexedObject } | { group: string })[] = [];
  for (const key of [...model.keys()].sort(compareBytes)) {
    if (!key.startsWith(prefix)) continue;
    if (resume && 'after' in resume && compareBytes(key, resume.after) <= 0) continue;
    if (resume && 'past' in resume && (compareBytes(key, resume.past) <= 0 || key.startsWith(resume.past))) continue;
    const at = delimiter === undefined ? -1 : key.indexOf(delimiter, prefix.length);
    if (at < 0) rows.push({ object: model.get(key)! });
    else {
      const group = key.slice(0, at + delimiter!.length);
      const last = rows.at(-1);
      if (!(last && 'group' in last && last.group === group)) rows.push({ group });
    }
  }
  return rows;
}

const characters = ['a', 'b', 'A', '/', '0', '~', '_', 'é', '\u{FFFD}', '\u{1D11E}'];
const keyArbitrary = fc
  .array(fc.constantFrom(...characters), { minLength: 1, maxLength: 4 })
  .map((parts) => parts.join(''));
const commandArbitrary = fc.oneof(
  { weight: 4, arbitrary: fc.record({ put: keyArbitrary, size: fc.nat(100) }) },
  { weight: 2, arbitrary: fc.record({ delete: keyArbitrary }) },
  {
    weight: 1,
    arbitrary: fc.record({
      list: fc.constantFrom('', 'a', 'a/', 'é', '\u{1D11E}'),
      delimiter: fc.option(fc.constantFrom('/', 'é'), { nil: undefined }),
      maxKeys: fc.integer({ min: 1, max: 4 }),
      startAfter: fc.option(keyArbitrary, { nil: undefined }),
    }),
  },
  { weight: 3, arbitrary: fc.constant({ next: true }) },
);

describe('the test gateway’s key index (test/support/s3-key-index.ts)', () => {
  it('pages as S3 lists, in byte order, with puts and deletes between the pages (property)', () => {
    fc.assert(
      fc.property(fc.array(commandArbitrary, { minLength: 20, maxLength: 120, size: 'max' }), (commands) => {
        const index = new KeyIndex();
        const model = new Map<string, IndexedObject>();
        let listing:
          | {
              prefix: string;
              delimiter: string | undefined;
              maxKeys: number;
              resume: Resume;
              token?: string | undefined;
            }
          | undefined;
        const check = (page: IndexPage, resume: Resume) => {
          const { prefix, delimiter, maxKeys } = listing!;
          const rows = expectedRows(model, prefix, delimiter, resume);
          const shown = rows.slice(0, maxKeys);
          expect(page.objects).toEqual(shown.flatMap((row) => ('object' in row ? [row.object] : [])));
          expect(page.prefixes).toEqual(shown.flatMap((row) => ('group' in row ? [row.group] : [])));
          expect(page.truncated).toBe(rows.length > maxKeys);
          expect(page.next === undefined).toBe(!page.truncated);
          const last = shown.at(-1);
          listing!.resume = last && ('object' in last ? { after: last.object.key } : { past: last.group });
          listing!.token = page.next;
        };
        for (const [step, command] of commands.entries()) {
          if ('put' in command) {
            const object = { key: command.put, size: command.size, etag: `"${step}"`, lastModified: new Date(step) };
            index.set(object);
            model.set(command.put, object);
          } else if ('delete' in command) {
            index.delete(command.delete);
            model.delete(command.delete);
          } else if ('list' in command) {
            const { list: prefix, delimiter, maxKeys, startAfter } = command;
            listing = {
              prefix,
              delimiter,
              maxKeys,
              resume: startAfter === undefined ? undefined : { after: startAfter },
            };
            check(index.list({ prefix, delimiter, maxKeys, startAfter }), listing.resume);
          } else if (listing?.token !== undefined) {
            const { prefix, delimiter, maxKeys, token } = listing;
            // The token wins over start-after, as on S3.
            check(
              index.list({ prefix, delimiter, maxKeys, continuationToken: token, startAfter: 'zzz' }),
              listing.resume,
            );
          }
        }
      }),
      { numRuns: 200 },
    );
  });

  it('lists nothing for max-keys 0, and steps over a group of many keys in one page', () => {
    const index = new KeyIndex();
    for (let number = 0; number < 5_000; number++)
      index.set({ key: `s/turn/${number}`, size: 1, etag: '"e"', lastModified: new Date(0) });
    index.set({ key: 's/config', size: 1, etag: '"c"', lastModified: new Date(0) });
    index.set({ key: 's/view', size: 1, etag: '"v"', lastModified: new Date(0) });
    expect(index.list({ prefix: 's/', maxKeys: 0 })).toEqual({ objects: [], prefixes: [], truncated: false });
    const first = index.list({ prefix: 's/', delimiter: '/', maxKeys: 2 });
    expect([first.objects.map((object) => object.key), first.prefixes, first.truncated]).toEqual([
      ['s/config'],
      ['s/turn/'],
      true,
    ]);
    const second = index.list({ prefix: 's/', delimiter: '/', maxKeys: 2, continuationToken: first.next! });
    expect([second.objects.map((object) => object.key), second.prefixes, second.truncated]).toEqual([
      ['s/view'],
      [],
      false,
    ]);
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

  defineObjectStoreConformance('s3 (fauxqs, gateway key index)', store, 'of the body');

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

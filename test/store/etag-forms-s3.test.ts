import { describe, expect, inject, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { canonicalEtag } from '../../lib/store/etag.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { defineRecordCacheSuite } from '../session/record-cache-suite.ts';
import { CountingStore } from '../support/counting-store.ts';
import { type EtagForm, serviceEtagForms } from '../support/etag-forms.ts';
import { createTestS3Store } from '../support/s3-store.ts';
import { SessionLog } from '../support/session-log.ts';

// S3-compatible services that list an etag in another form than their puts and gets answer it
// (fauxqs behind the conditional gateway, its etags rewritten by test/support/etag-forms.ts).
const services: { listed: EtagForm; answered: EtagForm }[] = [
  { listed: 'bare', answered: 'quoted' },
  { listed: 'quoted', answered: 'bare' },
  { listed: 'weak', answered: 'bare upper case' },
];

const plainStore = () => createTestS3Store(inject('s3Endpoint'), inject('s3Bucket'));
const ownPrefix = () => `etag-forms-${crypto.randomUUID()}/`;
const items = (from: number, count: number): Item[] =>
  Array.from({ length: count }, (_, index) => ({ type: 'message', role: 'user', content: `m${from + index}` }));

/** The storage calls of an append to a session of three appends, each by the process that wrote them. */
async function warmAppendCounts(store: ObjectStore) {
  const counting = new CountingStore(store);
  const log = new SessionLog(counting, { keyPrefix: ownPrefix() });
  await log.create({ id: 's' });
  for (let index = 0; index < 3; index++) await log.append('s', items(index * 2, 2));
  counting.reset();
  await log.append('s', items(6, 2));
  return counting.counts;
}

for (const forms of services) {
  const name = `listed ${forms.listed}, answered ${forms.answered}`;
  const oddStore = () => serviceEtagForms(plainStore(), forms);

  defineRecordCacheSuite(`s3 with etags ${name}`, oddStore);

  describe(`etags of a service that lists them ${forms.listed} and answers them ${forms.answered}`, () => {
    it('come in one form from put, get, head and list, and compare-and-set takes any of them', async () => {
      const store = oddStore();
      const key = `${ownPrefix()}object`;
      const put = await store.put(key, 'first', { onlyIfAbsent: true });
      const [got, head, listed] = [await store.get(key), await store.head(key), await store.list(key)];
      expect(canonicalEtag(put!.etag)).toBe(put!.etag);
      expect([got!.etag, head!.etag, listed.objects[0]!.etag]).toEqual([put!.etag, put!.etag, put!.etag]);
      // If-Match on the listed etag, the put's and a quoted one: each the current etag, each lands.
      const second = await store.put(key, 'second', { ifMatch: listed.objects[0]!.etag });
      expect(second).not.toBeNull();
      const third = await store.put(key, 'third', { ifMatch: `"${second!.etag}"` });
      expect(third).not.toBeNull();
      expect(await store.put(key, 'stale', { ifMatch: put!.etag })).toBeNull();
      expect(new TextDecoder().decode((await store.get(key))!.body)).toBe('third');
    });

    it("a store's first If-Match, before an answer showed the service's form, lands on the current etag", async () => {
      const key = `${ownPrefix()}object`;
      const writer = oddStore();
      const first = (await writer.put(key, 'first'))!;
      // Other processes: the one lists the key, the other was handed the etag; neither had an answer.
      const lister = oddStore();
      const listed = (await lister.list(key)).objects[0]!;
      expect(await lister.put(key, 'second', { ifMatch: listed.etag })).not.toBeNull();
      const second = (await writer.head(key))!;
      expect(await oddStore().put(key, 'third', { ifMatch: second.etag })).not.toBeNull();
      // A stale etag is still refused, by a fresh store as by one that knows the form.
      expect(await oddStore().put(key, 'stale', { ifMatch: first.etag })).toBeNull();
      expect(await writer.put(key, 'stale', { ifMatch: first.etag })).toBeNull();
      expect(new TextDecoder().decode((await writer.get(key))!.body)).toBe('third');
    });

    it('a warm append makes the storage calls it makes on a service of one form, and a PATCH lands', async () => {
      expect(await warmAppendCounts(oddStore())).toEqual(await warmAppendCounts(plainStore()));
      const log = new SessionLog(oddStore(), { keyPrefix: ownPrefix() });
      await log.create({ id: 's' });
      await log.update('s', { metadata: { topic: 'etags' } });
      expect((await log.get('s')).metadata).toEqual({ topic: 'etags' });
    });
  });
}

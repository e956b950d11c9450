import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { FileStore } from '../../lib/store/file.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { decodeUtf8, listAll, type ObjectStore } from '../../lib/store/object-store.ts';
import { appHarness } from '../support/app-harness.ts';
import { createTestS3Store, startConditionalGateway } from '../support/s3-store.ts';
import { createClient, TOKEN } from './http-suite.ts';

// A large POST /items (more item bytes than afterViewBytes of the view its pack writes) is
// followed by a record of no items (lib/session/log/state-record.ts): on the memory store, the
// file store and S3 (fauxqs behind the conditional gateway), every item reads back and a turn
// after it runs.
const directory = await mkdtemp(join(tmpdir(), 'tailgate-large-append-'));
const gateway = await startConditionalGateway(inject('s3Endpoint'));
afterAll(async () => {
  await gateway.close();
  await rm(directory, { recursive: true, force: true, maxRetries: 5 });
});

/** `count` calls with outputs of `bytes` characters. */
const calls = (batch: number, count: number, bytes: number) =>
  Array.from({ length: count }, (_, index) => {
    const call_id = `c${batch}_${index}`;
    return [
      { type: 'function_call', call_id, name: 'read', arguments: `{"b":${batch},"i":${index}}` },
      { type: 'function_call_output', call_id, output: 'x'.repeat(bytes) },
    ];
  }).flat();

const stores: [string, () => ObjectStore][] = [
  ['memory', () => new MemoryStore()],
  ['file store', () => new FileStore(directory)],
  ['s3 (fauxqs)', () => createTestS3Store(gateway.endpoint, inject('s3Bucket'))],
];

describe.each(stores)('a large append: %s', (_, store) => {
  it('is followed by a record of no items; every item reads back, and a turn runs after it', async () => {
    const harness = appHarness(store(), { API_TOKEN: TOKEN, ALLOW_ANONYMOUS: 'false', DEFAULT_MODEL: 'echo' });
    const api = createClient(harness);
    const id = await api.session();
    for (let batch = 1; batch <= 10; batch++)
      expect((await api.post(`/v1/sessions/${id}/items`, { items: calls(batch, 5, 2_000) })).status).toBe(201);
    const large = await api.post(`/v1/sessions/${id}/items`, { items: calls(11, 60, 8_000) });
    expect(large.body).toMatchObject({ first_seq: 101, last_seq: 220 });
    const objects = await listAll(harness.store, `${harness.keyPrefix}sessions/${id}/turn/`);
    const records = objects.filter((object) => /\/\d{12}$/.test(object.key) && object.size > 0).slice(0, 2);
    const [newest, appended] = await Promise.all(
      records.map(async (object) => JSON.parse(decodeUtf8((await harness.store.get(object.key))!.body))),
    );
    expect(newest).toMatchObject({ record: appended.record + 1, items: [], counts: appended.counts });
    expect(appended.items).toHaveLength(120);
    const seqs: number[] = [];
    for (let before: number | null = null; ; ) {
      const page: { body: any } = await api.get(
        `/v1/sessions/${id}/items?limit=50${before ? `&before=${before}` : ''}`,
      );
      seqs.push(...page.body.items.map((item: { seq: number }) => item.seq));
      if (!page.body.has_more) break;
      before = page.body.next_before;
    }
    expect(seqs.reverse()).toEqual(Array.from({ length: 220 }, (_, index) => index + 1));
    const turn = await api.post(`/v1/sessions/${id}/turns`, { input: 'go on' });
    expect(turn.status, JSON.stringify(turn.body)).toBe(200);
    expect((await api.get(`/v1/sessions/${id}`)).body.counts).toMatchObject({ items: 222, turns: 1 });
  });
});

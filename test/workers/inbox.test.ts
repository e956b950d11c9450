import { env } from 'cloudflare:test';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { describe, expect, it } from 'vitest';
import { Inbox } from '../../lib/inbox/inbox.ts';
import { sessionConfigKey, sessionPrefix } from '../../lib/session/keys.ts';
import { CountingStore } from '../support/counting-store.ts';
import { R2Store } from '../../lib/store/r2.ts';
import { inboxSemanticsSuite } from '../inbox/inbox-suite.ts';

const bucket = (env as { BUCKET: R2Bucket }).BUCKET;

/** A notice written by an outside Worker: a plain binding put, no custom metadata. */
async function writeDirect(key: string, body: string | Uint8Array): Promise<void> {
  await bucket.put(key, body);
}

inboxSemanticsSuite('R2 (workerd)', () => ({ store: new R2Store(bucket), writeDirect }));

describe('inbox on R2', () => {
  it('reads delivery records from the listing alone, since R2 lists custom metadata', async () => {
    const keyPrefix = `inbox-r2-${crypto.randomUUID()}/`;
    const store = new CountingStore(new R2Store(bucket));
    const inbox = new Inbox(store, {
      keyPrefix,
      sessionExists: sessionExistsIn(store, keyPrefix),
      clock: () => new Date('2031-02-03T04:05:06.007Z'),
    });
    await store.put(sessionConfigKey(keyPrefix, 's1'), '{}');
    await inbox.post('s1', { name: 'api.md', content: 'from the API' });
    await writeDirect(`${sessionPrefix(keyPrefix, 's1')}inbox/direct.md`, 'from a client');
    const uploaded = (await bucket.head(`${sessionPrefix(keyPrefix, 's1')}inbox/direct.md`))!.uploaded.toISOString();

    store.reset();
    const result = await inbox.consume('s1', { turn: 2, sessionExists: true });
    expect(result.delivered.map((notice) => [notice.name, notice.content, notice.posted_at])).toEqual([
      ['api.md', 'from the API', '2031-02-03T04:05:06.007Z'],
      ['direct.md', 'from a client', uploaded],
    ]);
    expect(store.counts).toMatchObject({ list: 1, get: 2, put: 2, delete: 2, head: 0 });

    store.reset();
    expect(await inbox.listDelivered('s1')).toEqual([
      {
        name: 'api.md',
        stored_as: 'api.md',
        posted_at: '2031-02-03T04:05:06.007Z',
        delivered_at: '2031-02-03T04:05:06.007Z',
        turn: 2,
      },
      {
        name: 'direct.md',
        stored_as: 'direct.md',
        posted_at: uploaded,
        delivered_at: '2031-02-03T04:05:06.007Z',
        turn: 2,
      },
    ]);
    expect(store.counts).toMatchObject({ list: 1, head: 1, get: 0 });
  });
});

describe('inbox on R2: the incarnation a notice was posted to', () => {
  it('keeps it in custom metadata: a session imported again under the id drops the notice', async () => {
    const keyPrefix = `inbox-r2-${crypto.randomUUID()}/`;
    // Created before the notices' uploads (a consume drops notices uploaded before its session).
    const created_at = new Date(Date.now() - 60_000).toISOString();
    let current = { created_at, incarnation: 'first' };
    const inbox = new Inbox(new R2Store(bucket), { keyPrefix, sessionExists: async () => current });
    await inbox.post('s1', { name: 'kept.md', content: 'for the first' });
    const consume = () =>
      inbox.consume('s1', { turn: 1, sessionExists: true, since: created_at, incarnation: current.incarnation });
    expect((await consume()).delivered.map((notice) => notice.name)).toEqual(['kept.md']);
    await inbox.post('s1', { name: 'late.md', content: 'for the first too' });
    // Deleted and imported again: the same created_at, an incarnation of its own.
    current = { created_at, incarnation: 'second' };
    expect((await consume()).delivered).toEqual([]);
    expect(await inbox.listPending('s1')).toEqual([]);
  });
});

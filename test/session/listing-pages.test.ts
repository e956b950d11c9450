import { describe, expect, it } from 'vitest';
import { Inbox } from '../../lib/inbox/inbox.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { importLines } from '../../lib/transfer.ts';
import { headerLine } from '../support/export-lines.ts';
import { READ_ON_KEYS, READ_ON_LISTINGS } from '../../lib/session/log/listing.ts';
import { indexPosition, indexPrefix } from '../../lib/session/log/session-index.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { CountingStore } from '../support/counting-store.ts';
import { SessionLog } from '../support/session-log.ts';

/**
 * How far a page of the session listing reads on past delete markers (lib/session/log/listing.ts):
 * at most READ_ON_LISTINGS listings after its first, and a page cut short there continues
 * where no session is skipped.
 */
describe('session listing: reading on', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  const keyPrefix = 'pages/';

  /**
   * A log whose index holds session `live`, a marker of another generation at its position, and
   * `markers` markers of newer positions.
   */
  async function world(markers: number) {
    const store = new CountingStore(new MemoryStore());
    const log = new SessionLog(store, { keyPrefix, clock: () => new Date(now) });
    await log.create({ id: 'live' });
    const prefix = indexPrefix(keyPrefix);
    // An incarnation of `live` deleted before this one was created at the same millisecond
    // (its marker names no generation): the first key of the position, before the live entry.
    await store.put(`${prefix}${indexPosition('live', now)}/-g.${now}`, '');
    for (let index = 0; index < markers; index++)
      await store.put(`${prefix}${indexPosition(`d${index}`, now + 1000 + index)}/-g.${now}`, '');
    return { store, log };
  }

  it('a page reads on through more markers than one listing holds', async () => {
    const { store, log } = await world(2 * READ_ON_KEYS);
    const before = store.counts.list;
    const page = await log.listSessions({ limit: 3 });
    expect([page.sessions.map((row) => row.id), page.has_more]).toEqual([['live'], false]);
    // The first listing (3 keys), then listings of READ_ON_KEYS to the index's end.
    expect(store.counts.list - before).toBe(3);
  });

  it('a page cut short by the bound ends before a position it did not read whole', async () => {
    // The bound's last key is the marker at `live`'s position: its live entry is not read.
    const { store, log } = await world(READ_ON_LISTINGS * READ_ON_KEYS);
    const before = store.counts.list;
    const first = await log.listSessions({ limit: 1 });
    expect([first.sessions, first.has_more]).toEqual([[], true]);
    expect(store.counts.list - before).toBe(1 + READ_ON_LISTINGS);
    const second = await log.listSessions({ limit: 1, after: first.next_after! });
    expect([second.sessions.map((row) => row.id), second.has_more]).toEqual([['live'], false]);
  });

  it('an incarnation imported again at the millisecond of one deleted lists, its entry behind the marker', async () => {
    const store = new CountingStore(new MemoryStore());
    const log = new SessionLog(store, { keyPrefix, clock: () => new Date(now) });
    const inbox = new Inbox(store, { sessionExists: sessionExistsIn(store, keyPrefix) });
    const services = { sessions: log, inbox, env: {} };
    const limits = { maxItemBytes: 2048, maxNoticeBytes: 1024, maxLineBytes: 8192 };
    const lines = async function* () {
      yield new TextEncoder().encode(`${headerLine('x')}\n`);
    };
    await importLines(services, lines(), limits);
    await log.delete('x');
    // The export keeps `created_at`: the same position, under a generation of its own.
    await importLines(services, lines(), limits);
    // The first listing (one key) holds the marker alone; the page reads on to the entry.
    const page = await log.listSessions({ limit: 1 });
    expect([page.sessions.map((row) => row.id), page.has_more]).toEqual([['x'], false]);
  });
});

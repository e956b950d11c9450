import { describe, expect, it } from 'vitest';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { importLines } from '../../lib/transfer.ts';
import { exportText, headerLine, inOneChunk, messageLine } from '../support/export-lines.ts';
import { HeldStore } from '../support/held-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { transferWorld } from '../support/transfer-world.ts';

/**
 * A fork's delete sweeps each ancestor id whose session is gone. An import of such an id before
 * its config (its log written under a generation no config names yet) loses nothing to it.
 */

const LIMITS = { maxItemBytes: 2048, maxNoticeBytes: 1024, maxLineBytes: 8192 };

const START = Date.parse('2026-03-01T00:00:00.000Z');
const HOUR = 3_600_000;
/** The time every actor reads: the parent and its fork are made at START, the rest an hour later. */
let now = START;

function world(store: ObjectStore) {
  const clock = () => new Date(now);
  return transferWorld(store, { log: { clock }, inbox: { clock } });
}

async function keys(store: ObjectStore, prefix: string): Promise<string[]> {
  return (await store.list(prefix, { limit: 1000 })).objects.map((object) => object.key).sort();
}

describe.each(await memoryAndFileStores('import-fork-sweep'))('a fork deleted (%s)', (_name, makeStore) => {
  it('sweeps nothing of an import of its deleted parent’s id in flight, and the rest it kept', async () => {
    now = START;
    const store = makeStore();
    const w = world(store);
    await w.sessions.create({ id: 'p' });
    await w.sessions.append('p', [
      { type: 'message', role: 'user', content: 'one' },
      { type: 'message', role: 'user', content: 'two' },
    ]);
    await w.sessions.fork('p', { at_seq: 2, fields: { id: 'f' } });
    await w.sessions.delete('p');
    // What the fork kept of its parent.
    const kept = await keys(store, 'sessions/p/');
    expect(kept.length).toBeGreaterThan(0);

    now = START + HOUR;
    // An import of the id, held at its pending object: its log is written, its config not yet.
    const held = new HeldStore(store);
    const hold = held.hold(
      ({ operation, keys }) => operation === 'put' && keys[0]!.includes('/import/') && keys[0]!.endsWith('/pending'),
    );
    const exported = `${[headerLine('p'), messageLine(1), messageLine(2), messageLine(3)].join('\n')}\n`;
    const importing = importLines(world(held).services, inOneChunk(exported), LIMITS);
    importing.catch(() => undefined);
    await hold.reached;
    const written = (await keys(store, 'sessions/p/')).filter((key) => !kept.includes(key));
    expect(written.length).toBeGreaterThan(0);

    await w.sessions.delete('f');
    // The parent's generation the fork kept is gone; what the import wrote is all there.
    expect(await keys(store, 'sessions/p/')).toEqual(written);
    hold.release();

    await importing;
    expect(await exportText(world(store).services, 'p')).toBe(exported);
  });
});

describe.each(await memoryAndFileStores('import-fork-sweep-commit'))(
  'a fork deleted while (%s)',
  (_name, makeStore) => {
    it('keeps an import of its parent’s id that commits and finishes as the sweep reads', async () => {
      now = START;
      const store = makeStore();
      const w = world(store);
      await w.sessions.create({ id: 'p' });
      await w.sessions.append('p', [{ type: 'message', role: 'user', content: 'one' }]);
      await w.sessions.fork('p', { at_seq: 1, fields: { id: 'f' } });
      await w.sessions.delete('p');

      now = START + HOUR;
      const held = new HeldStore(store);
      // The import, its log written, held at its config's put.
      const atConfig = held.hold(({ operation, keys }) => operation === 'put' && keys[0] === 'sessions/p/session.json');
      const exported = `${[headerLine('p'), messageLine(1), messageLine(2)].join('\n')}\n`;
      const importing = importLines(world(held).services, inOneChunk(exported), LIMITS);
      importing.catch(() => undefined);
      await atConfig.reached;
      // The fork's delete sweeps the parent's id: it lists a page holding the import's objects, finds
      // no config, and is held at its listing of the marks.
      const atMarks = held.hold(({ operation, keys }) => operation === 'list' && keys[0] === 'sessions/p/import/');
      const deleting = world(held).sessions.delete('f');
      deleting.catch(() => undefined);
      await atMarks.reached;
      // The import commits and finishes meanwhile: its mark goes with its pending object.
      atConfig.release();
      await importing;
      atMarks.release();
      await deleting;
      expect(await exportText(world(store).services, 'p')).toBe(exported);
    });
  },
);

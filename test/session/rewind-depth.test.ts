import { describe, expect, it } from 'vitest';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SessionLog } from '../support/session-log.ts';
import type { Item } from '../../lib/items.ts';
import { contents, turnOf } from './rewind-simulation-suite.ts';

describe('SessionLog.deleteTurn, again and again', () => {
  it('keeps the ancestry as deep when the newest turn goes more times than a config may name forks', async () => {
    const store = new MemoryStore();
    const log = new SessionLog(store, { packMinRecords: 2, keepRecords: 1 });
    await log.create({ id: 's' });
    await turnOf(log, 's', 'one');
    for (let n = 1; n <= 12; n++) {
      await turnOf(log, 's', `try ${n}`);
      await log.deleteTurn('s', 2);
      await expect(log.get('s'), `after delete ${n}`).resolves.toMatchObject({ counts: { turns: 1 } });
      const config = JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', 's')))!.body));
      expect(config.fork_of, `after delete ${n}`).toHaveLength(1);
    }
    // The history reads as it was before the first delete.
    const items = await log.listItems('s', { limit: 10 });
    expect(items.items.map((item) => item.seq)).toEqual([2, 1]);
    await turnOf(log, 's', 'two');
    await expect(log.get('s')).resolves.toMatchObject({ counts: { turns: 2 } });
  });

  it('keeps it at most one level deep when the only turn goes again and again', async () => {
    const store = new MemoryStore();
    const log = new SessionLog(store, { packMinRecords: 2, keepRecords: 1 });
    await log.create({ id: 'fresh' });
    for (let n = 1; n <= 12; n++) {
      await turnOf(log, 'fresh', `try ${n}`);
      await log.deleteTurn('fresh', 1);
      await expect(log.get('fresh'), `after delete ${n}`).resolves.toMatchObject({ counts: { turns: 0, items: 0 } });
      const config = JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', 'fresh')))!.body));
      expect(config.fork_of?.length ?? 0, `after delete ${n}`).toBeLessThanOrEqual(1);
    }
    await turnOf(log, 'fresh', 'kept');
    const items = await log.listItems('fresh', { limit: 10 });
    expect(items.items.map((item) => item.seq)).toEqual([2, 1]);
  });

  it.each<[string, object, number]>([
    ['its records', { packMinRecords: 100, keepRecords: 100 }, 1],
    ['packed into segments', { packMinRecords: 2, keepRecords: 1, segmentTargetBytes: 600 }, 2],
  ])('flattens a history past the ancestry a config may name, %s: it reads the same', async (_, options, least) => {
    const store = new MemoryStore();
    const log = new SessionLog(store, options);
    await log.create({ id: 'deep' });
    const kept: string[] = [];
    // Each delete after a turn that stays forks one generation deeper, until the history is flattened.
    for (let n = 1; n <= 20; n++) {
      const text = `kept ${n}`;
      const begun = await log.beginTurn('deep', { input: [user(text)], idempotencyKey: `key ${n}` });
      if (begun.kind !== 'claimed') throw new Error('expected a claim');
      await log.completeTurn(begun.turn, { status: 'completed', output: [assistant(`re ${text}`)], receipt: {} });
      kept.push(text, `re ${text}`);
      // A fork of the first generation stays listed once the history is flattened.
      if (n === 1) await log.fork('deep', { at_turn: 1, fields: { id: 'branch' } });
      await turnOf(log, 'deep', `gone ${n}`);
      await log.deleteTurn('deep', n + 1);
      await expect(contents(log, 'deep'), `after delete ${n}`).resolves.toEqual(kept);
      const config = JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', 'deep')))!.body));
      expect(config.fork_of?.length ?? 0, `after delete ${n}`).toBeLessThanOrEqual(8);
      if (n === 9) {
        expect(config.fork_of, 'the first flattened').toBeUndefined();
        // Its history is its own: segments of records 1 to the turn before the one deleted.
        const own = await store.list(`sessions/deep/turn/${config.generation}/`, { limit: 100 });
        const segments = own.objects.filter((object) => object.key.endsWith('.seg'));
        expect(segments.length).toBeGreaterThanOrEqual(least);
      }
    }
    await expect(log.get('deep')).resolves.toMatchObject({ counts: { turns: 20, items: 40 } });
    const forks = await log.listForks('deep', { limit: 1000 });
    expect(forks.forks.map((fork) => fork.id)).toEqual(['branch']);
    await expect(contents(log, 'branch')).resolves.toEqual(['kept 1', 're kept 1']);
    // The fork's delete sweeps the session: the generations its ids name stay while it names them
    // (a turn closed there is still charged from its `spent/` object).
    await log.delete('branch');
    const named = JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', 'deep')))!.body)).named;
    for (const { generation } of named) {
      const left = await store.list(`sessions/deep/turn/${generation}/`, { limit: 1 });
      expect(left.objects, generation).toHaveLength(1);
    }
    // Its turns are all there, and a retry of the oldest is answered from its key, not run again.
    const turns = await log.listTurns('deep', { limit: 100 });
    expect(turns.turns.map((turn) => turn.turn).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 20 }, (_, index) => index + 1),
    );
    const again = await log.beginTurn('deep', { input: [user('kept 1')], idempotencyKey: 'key 1' });
    expect(again).toMatchObject({ kind: 'replay', turn: 1 });
    await turnOf(log, 'deep', 'next');
    await expect(contents(log, 'deep')).resolves.toEqual([...kept, 'next', 're next']);
  });

  it('deletes the turn before the one a flattening delete took out', async () => {
    const store = new MemoryStore();
    const log = new SessionLog(store, { packMinRecords: 2, keepRecords: 1, segmentTargetBytes: 600 });
    await log.create({ id: 'deep' });
    const kept: string[] = [];
    for (let n = 1; n <= 9; n++) {
      await turnOf(log, 'deep', `kept ${n}`);
      kept.push(`kept ${n}`, `re kept ${n}`);
      await turnOf(log, 'deep', `gone ${n}`);
      await log.deleteTurn('deep', n + 1);
    }
    const config = JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', 'deep')))!.body));
    expect(config.named, 'the last delete flattened').toBeDefined();
    // Its history's newest records stay records: the kept turn before the point goes too.
    await log.deleteTurn('deep', 9);
    await expect(contents(log, 'deep')).resolves.toEqual(kept.slice(0, -2));
    await turnOf(log, 'deep', 'next');
    await expect(contents(log, 'deep')).resolves.toEqual([...kept.slice(0, -2), 'next', 're next']);
  });

  it('flattens only its own generations: a fork goes on reading its parent', async () => {
    const store = new MemoryStore();
    let offset = 0;
    const clock = () => new Date(Date.now() + offset);
    const log = new SessionLog(store, { clock, packMinRecords: 2, keepRecords: 1, segmentTargetBytes: 600 });
    await log.create({ id: 'parent' });
    await turnOf(log, 'parent', 'inherited');
    await log.fork('parent', { at_turn: 1, fields: { id: 'child' } });
    const kept = ['inherited', 're inherited'];
    for (let n = 1; n <= 20; n++) {
      await turnOf(log, 'child', `kept ${n}`);
      kept.push(`kept ${n}`, `re kept ${n}`);
      await turnOf(log, 'child', `gone ${n}`);
      await log.deleteTurn('child', n + 2);
      await expect(contents(log, 'child'), `after delete ${n}`).resolves.toEqual(kept);
    }
    const config = JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', 'child')))!.body));
    expect(config.fork_of.at(-1)).toMatchObject({ id: 'parent', seq: 2 });
    await expect(log.get('child')).resolves.toMatchObject({ forked_from: { id: 'parent', seq: 2 } });
    await turnOf(log, 'child', 'next');
    await expect(contents(log, 'child')).resolves.toEqual([...kept, 'next', 're next']);
    // Deleted, the child leaves nothing under either id once the parent goes too (a lease later:
    // a reference younger than that may be a fork still being written).
    offset += 3_600_000;
    await log.delete('child');
    await log.delete('parent');
    expect((await store.list('sessions/', { limit: 1000 })).objects.map((object) => object.key)).toEqual([]);
  });
});

const user = (content: string): Item => ({ type: 'message', role: 'user', content });
const assistant = (content: string): Item => ({ type: 'message', role: 'assistant', content });

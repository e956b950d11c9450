import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { sha256Hex } from '../../lib/hash.ts';
import { parseRecordsEntry, recordsPrefix } from '../../lib/session/keys.ts';
import { idGeneration } from '../../lib/session/log/rewind.ts';
import { buildSegment, SegmentReader } from '../../lib/session/segment.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SessionLog, summarized as summaryOf } from '../support/session-log.ts';
import { contents, turnOf, USAGE } from './rewind-simulation-suite.ts';

const user = (content: string): Item => ({ type: 'message', role: 'user', content });

const OPTIONS = { blobThreshold: 64, segmentTargetBytes: 2048, packMinRecords: 2, keepRecords: 1 };

function setup(options: Partial<typeof OPTIONS> = OPTIONS) {
  const store = new MemoryStore();
  let now = new Date('2026-01-01T00:00:00Z');
  const log = new SessionLog(store, { clock: () => now, leaseMs: 30_000, ...options });
  return { store, log, advance: (ms: number) => (now = new Date(now.getTime() + ms)) };
}

/** The items as `<seq>:<content>`, oldest first. */
async function numbered(log: SessionLog, id: string): Promise<string[]> {
  const page = await log.listItems(id, { limit: 1000 });
  return page.items.reverse().map((item) => `${item.seq}:${(item as { content: string }).content}`);
}

describe('SessionLog.deleteTurn', () => {
  it('takes the newest turn out, and the session goes on from the turn before it', async () => {
    const { log } = setup();
    await log.create({ id: 's', instructions: 'be brief' });
    await turnOf(log, 's', 'one');
    await log.append('s', [user('aside')]);
    await turnOf(log, 's', 'two');
    const back = await log.deleteTurn('s', 2);
    expect(back.counts).toEqual({ items: 3, turns: 1, tool_calls: 0 });
    expect(await numbered(log, 's')).toEqual(['1:one', '2:re one', '3:aside']);
    expect((await log.get('s')).instructions).toBe('be brief');
    // The prompt of the next turn holds nothing of it.
    const preview = await log.previewContext('s', () => ({ toolCalls: 'all' as const, seqs: [] }));
    expect(preview.items.map((item) => item.seq)).toEqual([1, 2, 3]);
    await turnOf(log, 's', 'three');
    expect(await numbered(log, 's')).toEqual(['1:one', '2:re one', '3:aside', '4:three', '5:re three']);
    expect((await log.get('s')).counts.turns).toBe(2);
    // Spent is spent: the usage totals keep the deleted turn's.
    expect((await log.get('s')).usage.turns).toBe(3);
  });

  it('refuses a turn that is not the newest, and a retry finds the turn gone', async () => {
    const { log } = setup();
    await log.create({ id: 's' });
    await turnOf(log, 's', 'one');
    await turnOf(log, 's', 'two');
    await expect(log.deleteTurn('s', 1)).rejects.toMatchObject({ code: 'delete_refused' });
    await log.deleteTurn('s', 2);
    await expect(log.deleteTurn('s', 2)).rejects.toMatchObject({ code: 'not_found' });
    await log.deleteTurn('s', 1);
    expect(await numbered(log, 's')).toEqual([]);
    expect((await log.get('s')).counts).toEqual({ items: 0, turns: 0, tool_calls: 0 });
    await turnOf(log, 's', 'again');
    expect(await numbered(log, 's')).toEqual(['1:again', '2:re again']);
  });

  it('names the generation holding a turn in its id, and a delete naming another finds nothing', async () => {
    const { log } = setup();
    await log.create({ id: 's' });
    await turnOf(log, 's', 'one');
    await turnOf(log, 's', 'two');
    // From its creation on, a session's ids name its generation.
    const created = (await log.scope('s')).generation;
    expect(idGeneration(await log.scope('s'), 3)).toBe(created);
    await log.deleteTurn('s', 2);
    await turnOf(log, 's', 'three');
    const scope = await log.scope('s');
    expect(idGeneration(scope, 1)).toBe(created);
    expect(idGeneration(scope, 3)).toBe(scope.generation);
    // The deleted turn 2, named as its id named it, is not the turn 2 there now.
    await expect(log.deleteTurn('s', 2, { names: { seq: 3, generation: created } })).rejects.toMatchObject({
      code: 'not_found',
    });
    expect(await numbered(log, 's')).toEqual(['1:one', '2:re one', '3:three', '4:re three']);
    await log.deleteTurn('s', 2, { names: { seq: 3, generation: scope.generation } });
    await log.deleteTurn('s', 1, { names: { seq: 1, generation: created } });
    await turnOf(log, 's', 'again');
    // Back to the first record: the new generation holds every turn, and only the newest
    // deletes' generations that the history still reads are kept.
    const last = await log.scope('s');
    expect(idGeneration(last, 1)).toBe(last.generation);
    expect(last.rewound).toEqual([last.generation]);
  });

  it('names no generation in the ids of a session stored before ids named them, until a delete', async () => {
    const { store, log } = setup();
    await log.create({ id: 's' });
    await turnOf(log, 's', 'one');
    // Its config as it was stored then: without `rewound`.
    const key = 'sessions/s/session.json';
    const { rewound: _named, ...config } = JSON.parse(new TextDecoder().decode((await store.get(key))!.body));
    await store.put(key, JSON.stringify(config));
    expect(idGeneration(await log.scope('s'), 1)).toBeUndefined();
    await turnOf(log, 's', 'two');
    await log.deleteTurn('s', 2, { names: { seq: 3, generation: undefined } });
    await turnOf(log, 's', 'three');
    const scope = await log.scope('s');
    expect(idGeneration(scope, 1)).toBeUndefined();
    expect(idGeneration(scope, 3)).toBe(scope.generation);
  });

  it('a manual compaction the delete of the newest turn raced summarizes the history the session has now', async () => {
    const { log } = setup();
    await log.create({ id: 's' });
    await turnOf(log, 's', 'one');
    await turnOf(log, 's', 'secret');
    const summarized: string[] = [];
    // The summary model is slow: the newest turn is deleted while it makes the first summary.
    const result = await log.compact('s', async (view) => {
      const texts = view.items.map((item) => (item.type === 'message' ? String(item.content) : item.type));
      summarized.push(texts.join(', '));
      if (summarized.length === 1) await log.deleteTurn('s', 2);
      const last = view.items.at(-1)!.seq!;
      return summaryOf({
        start_seq: last + 1,
        summary: `summary of ${texts.join(', ')}`,
        summarized: { first_seq: 1, last_seq: last },
        interrupted: [],
        model: 'echo',
      });
    });
    expect(summarized).toEqual(['one, re one, secret, re secret', 'one, re one']);
    expect(result.context?.summary).toBe('summary of one, re one');
    await turnOf(log, 's', 'three');
    const preview = await log.previewContext('s', () => ({ toolCalls: 'all' as const, seqs: [] }));
    expect(preview.context?.summary).toBe('summary of one, re one');
    expect(preview.items.map((item) => item.seq)).toEqual([3, 4]);
  });

  it('a sweep racing a delete of the newest turn keeps the history the new generation reads', async () => {
    /** Runs `hook` once, right after the first listing of the session's `forks/` answered. */
    class HookStore extends MemoryStore {
      hook: (() => Promise<void>) | null = null;
      override async list(...args: Parameters<MemoryStore['list']>) {
        const result = await super.list(...args);
        const hook = args[0] === 'sessions/s/forks/' ? this.hook : null;
        if (hook) {
          this.hook = null;
          await hook();
        }
        return result;
      }
    }
    const store = new HookStore();
    const log = new SessionLog(store, { clock: () => new Date('2026-01-01T00:00:00Z'), leaseMs: 30_000 });
    await log.create({ id: 's' });
    await turnOf(log, 's', 'one');
    await turnOf(log, 's', 'two');
    await log.create({ id: 'taken' });
    // A fork whose id is taken gives up and sweeps its parent; the parent's newest turn is
    // deleted between that sweep's listing of `forks/` and its listing of the objects.
    store.hook = async () => {
      await log.deleteTurn('s', 2);
    };
    await expect(log.fork('s', { at_turn: 2, fields: { id: 'taken' } })).rejects.toMatchObject({
      code: 'session_exists',
    });
    expect(store.hook).toBeNull();
    expect(await contents(log, 's')).toEqual(['one', 're one']);
  });

  it('replays a keyed turn from before the point a delete went back to, and not the deleted one', async () => {
    const { log } = setup();
    await log.create({ id: 's' });
    const keyed = async (text: string, key: string) => {
      const begun = await log.beginTurn('s', { input: [user(text)], keyHash: sha256Hex(key) });
      if (begun.kind !== 'claimed') return begun;
      await log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {}, usage: USAGE });
      return begun;
    };
    expect(await keyed('one', 'key-1')).toMatchObject({ kind: 'claimed' });
    await keyed('two', 'key-2');
    await log.deleteTurn('s', 2);
    // key-1's turn is still the session's: its retry is replayed in the new generation.
    expect(await keyed('one', 'key-1')).toMatchObject({ kind: 'replay', turn: 1 });
    // key-2's turn is gone: its retry is a new turn.
    expect(await keyed('two', 'key-2')).toMatchObject({ kind: 'claimed' });
    expect(await numbered(log, 's')).toEqual(['1:one', '2:two']);
  });

  it('refuses a turn whose previous record is packed', async () => {
    const { log } = setup();
    await log.create({ id: 's' });
    for (const text of ['a', 'b', 'c']) await turnOf(log, 's', text);
    await log.pack('s');
    await expect(log.deleteTurn('s', 3)).rejects.toMatchObject({ code: 'delete_refused' });
    expect((await log.get('s')).counts.turns).toBe(3);
  });

  it('goes back over deletes and packs, and a delete of the session removes every generation', async () => {
    const { store, log } = setup({ blobThreshold: 64 });
    await log.create({ id: 's' });
    for (const text of ['a', 'b', 'c', 'd']) await turnOf(log, 's', text);
    await log.pack('s');
    await log.deleteTurn('s', 4);
    await log.pack('s');
    await log.deleteTurn('s', 3);
    await turnOf(log, 's', 'e');
    expect(await numbered(log, 's')).toEqual(['1:a', '2:re a', '3:b', '4:re b', '5:e', '6:re e']);
    await log.delete('s');
    expect((await store.list('sessions/', { limit: 1000 })).objects).toEqual([]);
  });

  /**
   * Turn 1 deleted after an append: the new generation's first record (2) holds no items, and
   * a pack leaves it alone in a segment naming the empty seq range 2..1.
   */
  async function packedEmptyRecord() {
    const { store, log } = setup({ ...OPTIONS, packMinRecords: 1, keepRecords: 2 });
    await log.create({ id: 's' });
    await log.append('s', [user('one')]);
    await turnOf(log, 's', 'a');
    await log.deleteTurn('s', 1);
    await turnOf(log, 's', 'b');
    await log.append('s', [user('two')]);
    await log.pack('s');
    const prefix = recordsPrefix(await log.scope('s'));
    const [key] = (await store.list(prefix, { limit: 100 })).objects.filter((o) => o.key.endsWith('.seg'));
    const range = parseRecordsEntry(key!.key.slice(prefix.length));
    if (range?.kind !== 'segment') throw new Error('expected a segment');
    expect(range).toEqual({ kind: 'segment', firstRecord: 2, lastRecord: 2, firstSeq: 2, lastSeq: 1 });
    return { store, log, key: key!.key, range };
  }

  it('packs the first record of a generation a delete went back to, which holds no items', async () => {
    const { log } = await packedEmptyRecord();
    await turnOf(log, 's', 'c');
    await log.append('s', [user('three')]);
    await log.pack('s');
    await log.pack('s');
    expect(await numbered(log, 's')).toEqual(['1:one', '2:b', '3:re b', '4:two', '5:c', '6:re c', '7:three']);
  });

  it("merges such a record's segment as older versions wrote it, its index naming the range 1..0", async () => {
    const { store, log, key, range } = await packedEmptyRecord();
    await store.put(key, buildSegment(await new SegmentReader(store, key, range).content(), 1));
    await turnOf(log, 's', 'c');
    expect(await log.pack('s')).toMatchObject({ packed: true, through: 3 });
    expect(await store.get(key)).toBeNull();
    expect(await numbered(log, 's')).toEqual(['1:one', '2:b', '3:re b', '4:two', '5:c', '6:re c']);
  });

  it('packs whatever appends, turns and deletes of the newest turn left, and reads the whole history', async () => {
    const step = fc.constantFrom('append' as const, 'turn' as const, 'delete' as const, 'pack' as const);
    await fc.assert(
      fc.asyncProperty(
        fc.array(step, { minLength: 6, maxLength: 16 }),
        fc.constantFrom(1, 2),
        async (steps, keepRecords) => {
          const { log } = setup({ ...OPTIONS, packMinRecords: 1, keepRecords });
          await log.create({ id: 's' });
          // What the session holds, a record at a time: its items, and whether it is a turn.
          const records: { turn: boolean; items: string[] }[] = [];
          for (const [index, kind] of steps.entries()) {
            const text = `t${index}`;
            if (kind === 'append') {
              await log.append('s', [user(text)]);
              records.push({ turn: false, items: [text] });
            } else if (kind === 'turn') {
              await turnOf(log, 's', text);
              records.push({ turn: true, items: [text, `re ${text}`] });
            } else if (kind === 'pack') await log.pack('s');
            else {
              const turns = records.filter((record) => record.turn).length;
              if (turns === 0) continue;
              const deleted = await log.deleteTurn('s', turns).then(
                () => true,
                (error: unknown) => {
                  // Refused only when the turn is not the newest record with items, or the record before it is packed.
                  expect(error).toMatchObject({ code: 'delete_refused' });
                  return false;
                },
              );
              if (deleted) expect(records.pop()?.turn).toBe(true);
            }
            const items = records.flatMap((record) => record.items);
            expect(await numbered(log, 's')).toEqual(items.map((item, at) => `${at + 1}:${item}`));
          }
        },
      ),
      {
        numRuns: 100,
        examples: [[['append', 'turn', 'delete', 'turn', 'append', 'pack', 'turn', 'append', 'pack', 'pack'], 2]],
      },
    );
  });

  it("keeps the session's response objects and its old generation when a fork's delete sweeps it", async () => {
    const { store, log } = setup({ blobThreshold: 64 });
    const session = await log.create({ id: 's' });
    await turnOf(log, 's', 'a');
    await turnOf(log, 's', 'b');
    await log.fork('s', { at_turn: 2, fields: { id: 'f' } });
    const kept = `sessions/s/openai/${Date.parse(session.created_at)}/1.json`;
    await store.put(kept, '{}');
    await log.deleteTurn('s', 2);
    // The fork's delete sweeps its parent, which names another generation now.
    await log.delete('f');
    expect(await store.get(kept)).not.toBeNull();
    expect(await numbered(log, 's')).toEqual(['1:a', '2:re a']);
    await turnOf(log, 's', 'c');
    expect(await numbered(log, 's')).toEqual(['1:a', '2:re a', '3:c', '4:re c']);
  });
});

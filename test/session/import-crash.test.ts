import { describe, expect, it } from 'vitest';
import { TailgateError } from '../../lib/errors.ts';
import type { Item } from '../../lib/items.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { importLines } from '../../lib/transfer.ts';
import { exportText } from '../support/export-lines.ts';
import { CountingStore } from '../support/counting-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { summarized } from '../support/session-log.ts';
import { transferWorld } from '../support/transfer-world.ts';

/**
 * An import cut short at each of its storage calls (the call failing, or landing unanswered, and
 * every call after it failing, as a process that stops there), then sent again with the same
 * export: the session ends whole, every line of the export there (delivered notices included),
 * and no attempt is answered with a session that is not.
 */

/** Small segments and blobs: a few dozen items make several segments, out-of-line outputs and a held view. */
const LOG_OPTIONS = { blobThreshold: 64, segmentTargetBytes: 1024, packMinRecords: 2, keepRecords: 1 };
const LIMITS = { maxItemBytes: 2048, maxNoticeBytes: 1024, maxLineBytes: 8192 };

const world = (store: ObjectStore) => transferWorld(store, { log: LOG_OPTIONS });

/** The bytes of `text`, in chunks of `size` (lines split across chunks). */
async function* chunks(text: string, size = 113): AsyncGenerator<Uint8Array> {
  const bytes = new TextEncoder().encode(text);
  for (let start = 0; start < bytes.length; start += size) yield bytes.slice(start, start + size);
}

/** The export of a session with segments, out-of-line outputs, a compaction and three delivered notices. */
async function sourceExport(): Promise<string> {
  const source = world(new MemoryStore());
  await source.sessions.create({ id: 'moved', instructions: 'be brief', metadata: { team: 'a' } });
  for (let round = 0; round < 6; round++) {
    const items: Item[] = [
      { type: 'message', role: 'user', content: `question ${round} ${'q'.repeat(150)}` },
      { type: 'function_call', call_id: `c${round}`, name: 'read', arguments: '{}' },
      { type: 'function_call_output', call_id: `c${round}`, output: `output ${round} ${'o'.repeat(200)}` },
    ];
    await source.sessions.append('moved', items);
    if (round % 2 === 1) {
      await source.inbox.post('moved', { content: `notice ${round}` });
      await source.inbox.consume('moved', { turn: round });
    }
  }
  await source.sessions.compact('moved', async (view) => {
    const last = view.items[view.items.length - 1]?.seq;
    if (last === undefined) return null;
    return summarized({
      start_seq: last,
      summary: `summary up to ${last - 1}`,
      summarized: { first_seq: 1, last_seq: last - 1 },
      interrupted: [],
      model: 'echo',
    });
  });
  return exportText(source.services, 'moved');
}

/** The storage calls of an import that nothing cuts short. */
async function importCalls(exported: string): Promise<number> {
  const counting = new CountingStore(new MemoryStore());
  await importLines(world(counting).services, chunks(exported), LIMITS);
  return counting.operations;
}

describe('an import cut short at a storage call, then sent again', () => {
  it('ends with the whole session at every call, the call failing or landing unanswered', async () => {
    const exported = await sourceExport();
    expect(exported.split('\n').filter((line) => line.includes('"type":"notice"'))).toHaveLength(3);
    const calls = await importCalls(exported);
    expect(calls).toBeGreaterThan(20);
    const outcomes = new Set<string>();
    for (const after of [false, true]) {
      for (let cut = 1; cut <= calls + 1; cut++) {
        const memory = new MemoryStore();
        // The `cut`th call and every one after it fail (a delete of many keys is one call, as
        // CountingStore counts it).
        const seen = new Set<string>();
        const faulty = new FaultyStore(memory).failWhen(
          ({ operation, index }) => {
            seen.add(`${operation} ${index}`);
            return seen.size >= cut;
          },
          { after },
        );
        const first = await importLines(world(faulty).services, chunks(exported), LIMITS).then(
          () => 'answered',
          (error: unknown) => (error instanceof TailgateError ? error.code : String(error)),
        );
        const stopped = world(memory);
        // Nothing half-imported is answered: an answered import is the whole session.
        if (first === 'answered') expect(await exportText(stopped.services, 'moved')).toBe(exported);
        const retry = await importLines(stopped.services, chunks(exported, 89), LIMITS).then(
          () => 'imported',
          (error: unknown) => (error instanceof TailgateError ? error.code : String(error)),
        );
        outcomes.add(`${first} -> ${retry}`);
        // Only an import answered already may refuse its retry (the session kept): any other one imports.
        const allowed = retry === 'imported' || (first === 'answered' && retry === 'session_exists');
        expect(allowed, `cut at call ${cut}${after ? ', landed' : ''}: ${first} -> ${retry}`).toBe(true);
        expect(await exportText(stopped.services, 'moved'), `cut at call ${cut}${after ? ', landed' : ''}`).toBe(
          exported,
        );
      }
    }
    expect(outcomes).toContain('storage_error -> imported');
    expect(outcomes).toContain('answered -> session_exists');
  });

  it('finishes only from the export it began with: another one is 409, telling how to finish', async () => {
    const exported = await sourceExport();
    const memory = new MemoryStore();
    // The process stops at the first delivered-notice record: the config exists, no notice does.
    let stopped = false;
    const faulty = new FaultyStore(memory).failWhen(({ operation, key }) => {
      stopped ||= operation === 'put' && key.includes('/inbox_removed/');
      return stopped;
    });
    await expect(importLines(world(faulty).services, chunks(exported), LIMITS)).rejects.toMatchObject({
      code: 'storage_error',
    });
    const w = world(memory);
    expect(await exportText(w.services, 'moved')).not.toContain('"type":"notice"');
    const other = exported.replace('question 0', 'question zero');
    await expect(importLines(w.services, chunks(other), LIMITS)).rejects.toMatchObject({
      code: 'session_exists',
      message: expect.stringContaining('send that export again to finish it'),
      details: { id: 'moved', import_unfinished: true },
    });
    // The same lines with other line ends, blank lines and chunks are the same export.
    const resent = `${exported.replaceAll('\n', '\r\n')}\r\n`;
    const record = await importLines(w.services, chunks(resent, 7), LIMITS);
    expect(record).toMatchObject({ id: 'moved', counts: { items: 18 } });
    expect(await exportText(w.services, 'moved')).toBe(exported);
    expect((await w.sessions.listSessions({ limit: 10 })).sessions.map((session) => session.id)).toEqual(['moved']);
    await expect(importLines(w.services, chunks(exported), LIMITS)).rejects.toMatchObject({
      code: 'session_exists',
      details: { id: 'moved' },
    });
  });
});

describe.each(await memoryAndFileStores('import-cleanup'))(
  'an import whose cleanup stopped after its config went, sent again (%s)',
  (_name, makeStore) => {
    it('imports at every call of that cleanup: the delivery records it left are an unfinished import’s', async () => {
      const exported = await sourceExport();
      /** The import's read of its config after its records fails once; its cleanup stops at its `cut`th call. */
      const attempt = async (cut: number) => {
        const memory = makeStore();
        let recorded = false;
        let cleanup = 0;
        const faulty = new FaultyStore(memory)
          .failWhen(
            ({ operation, key }) => {
              recorded ||= operation === 'put' && key.includes('/inbox_removed/');
              return recorded && operation === 'get' && key.endsWith('/session.json');
            },
            { times: 1 },
          )
          .failWhen(() => faulty.injected > 0 && ++cleanup >= cut);
        await expect(importLines(world(faulty).services, chunks(exported), LIMITS)).rejects.toMatchObject({
          code: 'storage_error',
        });
        return { memory, cleanup };
      };
      const { cleanup: calls } = await attempt(Number.POSITIVE_INFINITY);
      expect(calls).toBeGreaterThan(5);
      const left = new Set<string>();
      for (let cut = 1; cut <= calls + 1; cut++) {
        const { memory } = await attempt(cut);
        const stopped = world(memory);
        const listed = await memory.list('sessions/moved/', { limit: 1000 });
        if (!listed.objects.some(({ key }) => key.endsWith('/session.json')))
          for (const { key } of listed.objects) if (key.includes('/inbox_removed/')) left.add(`${cut}`);
        await expect(
          importLines(stopped.services, chunks(exported, 89), LIMITS).then(() => 'imported'),
          `cleanup cut at call ${cut}`,
        ).resolves.toBe('imported');
        expect(await exportText(stopped.services, 'moved'), `cleanup cut at call ${cut}`).toBe(exported);
      }
      // Some cuts left delivery records without a config: the case this covers.
      expect(left.size).toBeGreaterThan(0);
    });

    it('is still 409 session_exists for a session that exists', async () => {
      const exported = await sourceExport();
      const w = world(makeStore());
      await importLines(w.services, chunks(exported), LIMITS);
      await expect(importLines(w.services, chunks(exported), LIMITS)).rejects.toMatchObject({
        code: 'session_exists',
      });
      expect(await exportText(w.services, 'moved')).toBe(exported);
    });
  },
);

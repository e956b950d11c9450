import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { AppOptions } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { listAll } from '../../lib/store/object-store.ts';
import { CountingStore } from '../support/counting-store.ts';
import { appHarness } from '../support/app-harness.ts';
import { SessionLog } from '../support/session-log.ts';
import { createClient, TOKEN } from './http-suite.ts';

// Over any sequence of what a busy session's queue (busy policy `enqueue`) goes through (inputs
// queued, a withdraw stopped before its delete, a pickup that marked the next input and stored
// nothing, or stored its turn and could not delete its entry), the position an enqueue answers
// is the one the listing gives that input, every page of the listing is a prefix of the whole
// one with the same `total`, and a page reads what docs/STORAGE.md says it does.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '600000' };

type Op = 'enqueue' | 'withdraw-stopped' | 'mark-nothing' | 'turn-stored' | 'entry-deleted';

async function entryKeys(store: MemoryStore): Promise<Map<string, { key: string; size: number; uploaded: Date }>> {
  const found = new Map<string, { key: string; size: number; uploaded: Date }>();
  for (const object of await listAll(store, ''))
    if (object.key.includes('/queue/')) found.set(object.key.slice(object.key.lastIndexOf('/') + 1), object);
  return found;
}

async function run(ops: Op[], picks: number[], store = new MemoryStore()): Promise<void> {
  const options: AppOptions = { store: () => store, readEnvironment: () => environment };
  options.queueTurn = () => async () => undefined;
  const client = createClient(appHarness(store, environment, options));
  const id = await client.session({ on_busy: 'enqueue' });
  expect((await client.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
  // The input a pickup marked (named in `queue_taking/`), and whether its turn is stored (`idem/`).
  let marked: { keyHash: string; key: string; stored: boolean } | undefined;
  const full = async () => (await client.get(`/v1/sessions/${id}/queue?limit=100`)).body;
  for (const [at, op] of ops.entries()) {
    const pick = picks[at % picks.length]!;
    const listed = await full();
    const rows: { queued_turn: string; position: number }[] = listed.queued;
    if (op === 'enqueue') {
      const answer = await client.post(`/v1/sessions/${id}/turns`, { input: `input ${at}` });
      expect(answer.status).toBe(202);
      const after = await full();
      const row = after.queued.find((one: { queued_turn: string }) => one.queued_turn === answer.body.queued_turn);
      expect(answer.body.position, JSON.stringify({ ops, after })).toBe(row?.position);
      expect(after.total).toBe(rows.length + 1);
    } else if (op === 'withdraw-stopped') {
      const unmarked = rows.filter((row) => row.queued_turn !== marked?.keyHash);
      const row = unmarked[pick % Math.max(1, unmarked.length)];
      if (row) await store.put((await entryKeys(store)).get(row.queued_turn)!.key, '');
    } else if (op === 'mark-nothing') {
      // A pickup names and marks the next input (only while no other stands marked: it takes that one first).
      const row = rows[0];
      if (marked || !row) continue;
      const key = (await entryKeys(store)).get(row.queued_turn)!.key;
      const entry = JSON.parse(new TextDecoder().decode((await store.get(key))!.body)) as { writer: string };
      const name = key.replace('/queue/', '/queue_taking/').replace(row.queued_turn, 'latest');
      await store.put(name, JSON.stringify({ key_sha256: row.queued_turn, writer: entry.writer }));
      await store.put(key, JSON.stringify({ ...entry, taking_at: new Date().toISOString() }));
      marked = { keyHash: row.queued_turn, key, stored: false };
    } else if (op === 'turn-stored') {
      if (!marked || marked.stored) continue;
      await store.put(marked.key.replace('/queue/', '/idem/'), '{}');
      marked.stored = true;
    } else if (op === 'entry-deleted') {
      if (!marked?.stored) continue;
      await store.delete(marked.key);
      marked = undefined;
    }
    await checkPages(store, id, marked);
  }
}

/** Every page is the whole listing's prefix with its `total`, and reads what its rows need. */
async function checkPages(
  store: MemoryStore,
  id: string,
  marked: { keyHash: string; stored: boolean } | undefined,
): Promise<void> {
  const whole = await new SessionLog(store).listQueuedInputs(id, 100);
  const entries = await entryKeys(store);
  const inputs = [...entries.values()].filter((entry) => entry.size > 0).length;
  // Inputs the store stamped alike (an upload time to the second, on S3) are read to order them.
  const stamps = new Map<number, number>();
  for (const entry of entries.values())
    if (entry.size > 0) stamps.set(entry.uploaded.getTime(), (stamps.get(entry.uploaded.getTime()) ?? 0) + 1);
  const tied = [...stamps.values()].filter((count) => count > 1).reduce((sum, count) => sum + count, 0);
  const dropped = marked?.stored ? 1 : 0;
  expect(whole.total).toBe(inputs - dropped);
  expect(whole.queued.map((row) => row.position)).toEqual(whole.queued.map((_, index) => index + 1));
  for (let limit = 1; limit <= whole.total + 1; limit++) {
    const counting = new CountingStore(store);
    const page = await new SessionLog(counting).listQueuedInputs(id, limit);
    expect(page.queued).toEqual(whole.queued.slice(0, limit));
    expect(page.total).toBe(whole.total);
    // The config; the listing; the name when two entries or more are listed, and the entry it
    // names when listed behind another (a mark moves it); each input shown, and one more for
    // each left out; a head for a marked entry read, and the newest record when it finds no key;
    // and each input stamped alike with another (never a tombstone: its size in the listing tells it).
    const read = Math.min(inputs, limit + dropped);
    const markedRead = marked !== undefined;
    const newest = markedRead && !marked.stored ? 1 : 0;
    const counts = counting.counts;
    expect(counts.list).toBe(1 + newest);
    expect(counts.head).toBe(markedRead ? 1 : 0);
    expect(counts.get).toBeLessThanOrEqual(1 + (entries.size >= 2 ? 2 : 0) + read + newest + tied);
    expect(counts.put + counts.delete).toBe(0);
  }
}

describe('GET /v1/sessions/{id}/queue and the positions enqueues answer, over sequences', () => {
  it('agree on every input, page by page', async () => {
    const op = fc.constantFrom<Op>(
      'enqueue',
      'enqueue',
      'withdraw-stopped',
      'mark-nothing',
      'turn-stored',
      'entry-deleted',
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(op, { minLength: 1, maxLength: 10 }),
        fc.array(fc.nat(8), { minLength: 1 }),
        (ops, picks) => run(ops, picks),
      ),
      { numRuns: 40 },
    );
  }, 120_000);

  it('read no tombstone stamped alike with another entry', async () => {
    // A store whose clock stands still stamps every entry alike, as a loaded machine may two
    // puts in one millisecond and S3 any two in one second: the inputs are read to order them.
    const at = new Date('2030-01-02T03:04:05.000Z');
    const ops: Op[] = ['enqueue', 'enqueue', 'withdraw-stopped', 'withdraw-stopped', 'enqueue', 'enqueue'];
    await run(ops, [3, 0], new MemoryStore({ clock: () => at }));
  });
});

import { describe, expect, it } from 'vitest';
import type { AppOptions } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { listAll } from '../../lib/store/object-store.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, TOKEN } from './http-suite.ts';

// The positions and totals of a session's queue (busy policy `enqueue`) count the inputs that
// will still run: neither a withdraw's tombstone left standing (its withdraw stopped before its
// delete) nor a turn a pickup stored, but an input a pickup marked and then stored nothing for
// (it runs at the next pickup, first).

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '600000' };

/** A process that never runs its background turns: turn 1 holds the session, the inputs wait. */
function world() {
  const store = new MemoryStore();
  const options: AppOptions = { store: () => store, readEnvironment: () => environment };
  options.queueTurn = () => async () => undefined;
  return { store, client: createClient(appHarness(store, environment, options)) };
}

async function busySession(client: ReturnType<typeof world>['client'], inputs: string[]) {
  const id = await client.session({ on_busy: 'enqueue' });
  expect((await client.post(`/v1/sessions/${id}/turns`, { input: 'first', background: true })).status).toBe(202);
  const queued: string[] = [];
  for (const input of inputs) {
    const answer = await client.post(`/v1/sessions/${id}/turns`, { input });
    expect(answer.status).toBe(202);
    queued.push(answer.body.queued_turn);
  }
  return { id, queued };
}

/** The key of the input queued as `keyHash` (`<session>/queue/<g>/<key hash>`). */
async function entryKey(store: MemoryStore, keyHash: string): Promise<string> {
  return (await listAll(store, '')).find(
    (object) => object.key.endsWith(`/${keyHash}`) && object.key.includes('/queue/'),
  )!.key;
}

/** Marks the input at `key` as a pickup does (named in `queue_taking/`, then `taking_at`), storing no turn. */
async function markStoringNothing(store: MemoryStore, key: string, keyHash: string): Promise<void> {
  const entry = JSON.parse(new TextDecoder().decode((await store.get(key))!.body)) as { writer: string };
  const name = key.replace('/queue/', '/queue_taking/').replace(keyHash, 'latest');
  await store.put(name, JSON.stringify({ key_sha256: keyHash, writer: entry.writer }));
  await store.put(key, JSON.stringify({ ...entry, taking_at: new Date().toISOString() }));
}

describe("GET /v1/sessions/{id}/queue and an enqueue's position", () => {
  it("leave out a withdraw's tombstone still standing, in total as in positions", async () => {
    const { store, client } = world();
    const { id, queued } = await busySession(client, ['older', 'newer']);
    // A withdraw of the older input wrote its tombstone and stopped before its delete.
    await store.put(await entryKey(store, queued[0]!), '');
    const listed = await client.get(`/v1/sessions/${id}/queue`);
    expect(listed.body.queued.map((row: any) => [row.queued_turn, row.position])).toEqual([[queued[1], 1]]);
    expect(listed.body.total).toBe(1);
    const later = await client.post(`/v1/sessions/${id}/turns`, { input: 'latest' });
    expect(later.body.position).toBe(2);
    expect((await client.get(`/v1/sessions/${id}/queue`)).body.total).toBe(2);
  });

  it('count an input a pickup marked and stored nothing for, and leave out one whose turn it stored', async () => {
    const { store, client } = world();
    const { id, queued } = await busySession(client, ['older', 'newer']);
    // A pickup named and marked the older input, then stored no turn (its record's put lost, or
    // its process died): the input runs at the next pickup, first.
    await markStoringNothing(store, await entryKey(store, queued[0]!), queued[0]!);
    const later = await client.post(`/v1/sessions/${id}/turns`, { input: 'latest' });
    expect(later.body.position).toBe(3);
    const listed = await client.get(`/v1/sessions/${id}/queue`);
    expect(listed.body.queued.map((row: any) => row.position)).toEqual([1, 2, 3]);
    expect(listed.body.total).toBe(3);
    // Once a turn is stored under its key (`idem/`), the marked input is taken up: it runs now.
    const key = await entryKey(store, queued[0]!);
    await store.put(key.replace('/queue/', '/idem/'), '{}');
    const last = await client.post(`/v1/sessions/${id}/turns`, { input: 'last' });
    expect(last.body.position).toBe(3);
    const after = await client.get(`/v1/sessions/${id}/queue`);
    expect(after.body.queued.map((row: any) => [row.queued_turn, row.position])).toEqual([
      [queued[1], 1],
      [later.body.queued_turn, 2],
      [last.body.queued_turn, 3],
    ]);
    expect(after.body.total).toBe(3);
  });

  it('fill a page with the inputs after one taken up, as the page asked', async () => {
    const { store, client } = world();
    const { id, queued } = await busySession(client, ['older', 'newer', 'newest']);
    // A pickup took the older input up: its turn is stored, its entry not deleted yet.
    const key = await entryKey(store, queued[0]!);
    await markStoringNothing(store, key, queued[0]!);
    await store.put(key.replace('/queue/', '/idem/'), '{}');
    const page = await client.get(`/v1/sessions/${id}/queue?limit=1`);
    expect(page.body.queued.map((row: any) => [row.queued_turn, row.position])).toEqual([[queued[1], 1]]);
    expect(page.body.total).toBe(2);
    const two = await client.get(`/v1/sessions/${id}/queue?limit=2`);
    expect(two.body.queued.map((row: any) => row.queued_turn)).toEqual([queued[1], queued[2]]);
  });
});

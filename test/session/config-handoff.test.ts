import { describe, expect, it } from 'vitest';
import { ConfigHandoff } from '../../lib/session/log/config-handoff.ts';
import type { SessionConfig } from '../../lib/session/records.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { CountingStore } from '../support/counting-store.ts';
import { SessionLog } from '../support/session-log.ts';

// One request's hand-off of a bound token's config read to its route (lib/session/log/config-handoff.ts).
function setup() {
  const store = new CountingStore(new MemoryStore());
  const handoff = new ConfigHandoff();
  const checked: SessionConfig[] = [];
  // The request's log, and another request's on the same store.
  // As the HTTP layer builds it: on the store the hand-off watches.
  const request = new SessionLog(handoff.watch(store), {
    configHandoff: handoff,
    checkConfig: (config) => void checked.push(config),
  });
  const other = new SessionLog(store);
  return { store, handoff, checked, request, other };
}

describe('the config hand-off', () => {
  it("hands the token check's read to the next read of the config, checked again, and to that one only", async () => {
    const { store, checked, request, other } = setup();
    await other.create({ id: 's' });
    store.reset();
    await request.tokenBinding('s');
    expect(store.counts.get).toBe(1);
    expect((await request.config('s')).instructions).toBeNull();
    expect(store.counts.get).toBe(1);
    expect(checked).toHaveLength(2);
    // Another request's change is seen by every read after the one handed over.
    await other.update('s', { instructions: 'changed' });
    store.reset();
    expect((await request.config('s')).instructions).toBe('changed');
    expect(store.counts.get).toBe(1);
  });

  it('a write after the kept read sees what another wrote meanwhile; the reads after it, the write', async () => {
    const { request, other } = setup();
    await other.create({ id: 's' });
    await request.tokenBinding('s');
    // Between the check and the route: the kept read is stale, the put on its etag loses and is retried.
    expect(await other.revokeTokens('s')).toBe(1);
    await request.update('s', { instructions: 'mine' });
    const config = await request.config('s');
    expect(config.instructions).toBe('mine');
    expect(config.token_generation).toBe(1);
    // And a revocation the request writes itself is what its next check reads.
    await request.tokenBinding('s');
    expect(await request.revokeTokens('s')).toBe(2);
    expect((await request.tokenBinding('s')).generation).toBe(2);
  });

  it("drops the kept read at any write of the request's own, whatever its key", async () => {
    const { store, handoff, request, other } = setup();
    await other.create({ id: 's' });
    for (const write of [
      () => handoff.watch(store).put('elsewhere', 'x'),
      () => handoff.watch(store).delete(['elsewhere']),
    ]) {
      await request.tokenBinding('s');
      await write();
      store.reset();
      await request.config('s');
      expect(store.counts.get).toBe(1);
    }
  });

  it('keeps nothing once cleared, nor for a session not found', async () => {
    const { store, handoff, request, other } = setup();
    await other.create({ id: 's' });
    await request.tokenBinding('s');
    handoff.clear();
    store.reset();
    await request.config('s');
    expect(store.counts.get).toBe(1);
    await expect(request.tokenBinding('gone')).rejects.toMatchObject({ code: 'not_found' });
    expect(handoff.take('gone')).toBeUndefined();
  });
});

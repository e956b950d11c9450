import { describe, expect, it } from 'vitest';
import { CorruptObjectError } from '../../lib/errors.ts';
import { sha256Hex } from '../../lib/hash.ts';
import type { Item } from '../../lib/items.ts';
import { doneKey, idempotencyKey, recordKey } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { Body, ObjectInfo, PutOptions } from '../../lib/store/object-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { SessionLog } from '../support/session-log.ts';

const user = (content: string): Item => ({ type: 'message', role: 'user', content });
const assistant = (content: string): Item => ({ type: 'message', role: 'assistant', content });
const replayed = { kind: 'replay', turn: 1, status: 'completed', response: { turn: 1, text: 'hello' }, outputSeq: 2 };

/** A keyed turn (record 1) completed, then appends after it, so that a pack covers it. */
async function keyedTurnThenAppends(log: SessionLog) {
  await log.create({ id: 's1' });
  const begun = await log.beginTurn('s1', { input: [user('a')], idempotencyKey: 'retry-me' });
  if (begun.kind !== 'claimed') throw new Error('expected a claim');
  await log.completeTurn(begun.turn, {
    status: 'completed',
    output: [assistant('hello')],
    receipt: {},
    response: { turn: 1, text: 'hello' },
  });
  for (let index = 0; index < 3; index++) await log.append('s1', [user(`x${index}`)]);
  const scope = await log.scope('s1');
  return { record: recordKey(scope, 1), done: doneKey(scope, 1) };
}

/** A pack that stops after burying one of the record and completion of turn 1 (the other's put fails). */
async function packStoppedBetweenTombstones(buried: 'record' | 'done', clock?: () => Date) {
  const store = new FaultyStore(new MemoryStore());
  const log = new SessionLog(store, { packMinRecords: 2, keepRecords: 1, ...(clock ? { clock } : {}) });
  const keys = await keyedTurnThenAppends(log);
  const kept = buried === 'record' ? keys.done : keys.record;
  store.failWhen(({ operation, key }) => operation === 'put' && key === kept, { times: 1 });
  await expect(log.pack('s1')).rejects.toThrow();
  store.heal();
  expect((await store.inner.get(buried === 'record' ? keys.record : keys.done))!.body.length).toBe(0);
  expect((await store.inner.get(kept))!.body.length).toBeGreaterThan(0);
  return log;
}

describe('the outcome a key replays', () => {
  it('is read from the segment when a pack buried the record but not yet its completion', async () => {
    const log = await packStoppedBetweenTombstones('record');
    expect(await log.beginTurn('s1', { input: [user('a')], idempotencyKey: 'retry-me' })).toEqual(replayed);
  });

  it('is read from the segment when a pack buried the completion but not yet its record', async () => {
    const log = await packStoppedBetweenTombstones('done');
    expect(await log.beginTurn('s1', { input: [user('a')], idempotencyKey: 'retry-me' })).toEqual(replayed);
  });

  it('is read from the segment so, also once the turn lease has run out (nothing is closed again)', async () => {
    let now = new Date('2026-01-01T00:00:00Z');
    const log = await packStoppedBetweenTombstones('done', () => now);
    now = new Date(now.getTime() + 24 * 3600_000);
    expect(await log.beginTurn('s1', { input: [user('a')], idempotencyKey: 'retry-me' })).toEqual(replayed);
  });

  it('of an idem/ claim naming a record number past the records is a CorruptObjectError', async () => {
    const store = new MemoryStore();
    const log = new SessionLog(store);
    await log.create({ id: 's1' });
    await log.append('s1', [user('hi')]);
    const scope = await log.scope('s1');
    await store.put(
      idempotencyKey(scope, sha256Hex('k')),
      JSON.stringify({ format: 'tailgate.idempotency.v1', record: 1_000_000_000_000 }),
    );
    await expect(log.beginTurn('s1', { input: [user('a')], idempotencyKey: 'k' })).rejects.toBeInstanceOf(
      CorruptObjectError,
    );
  });

  it('of an idem/ claim naming an append record is a CorruptObjectError, and nothing is written', async () => {
    const store = new MemoryStore();
    let now = new Date('2026-01-01T00:00:00Z');
    const log = new SessionLog(store, { clock: () => now });
    await log.create({ id: 's1' });
    await log.append('s1', [user('hi')]);
    await log.append('s1', [user('there')]);
    const scope = await log.scope('s1');
    await store.put(
      idempotencyKey(scope, sha256Hex('k')),
      JSON.stringify({ format: 'tailgate.idempotency.v1', record: 1 }),
    );
    now = new Date(now.getTime() + 3_600_000);
    await expect(log.beginTurn('s1', { input: [user('a')], idempotencyKey: 'k' })).rejects.toBeInstanceOf(
      CorruptObjectError,
    );
    expect(await store.get(doneKey(scope, 1))).toBeNull();
  });
});

/** A store whose put of one key lands, then (its answer lost) runs `meanwhile`, then fails. */
class LostAnswerStore extends MemoryStore {
  lose: { key: string; meanwhile: () => Promise<unknown> } | null = null;

  override async put(key: string, body: Body, options?: PutOptions): Promise<ObjectInfo | null> {
    const lose = this.lose;
    if (!lose || key !== lose.key) return super.put(key, body, options);
    this.lose = null;
    await super.put(key, body, options);
    await lose.meanwhile();
    throw new Error('timeout: the answer of the put was lost');
  }
}

describe('a completion whose answer was lost, packed before it was read back', () => {
  it("is the owner's: the turn completed, and completeTurn answers its output", async () => {
    const store = new LostAnswerStore();
    const options = { packMinRecords: 1, keepRecords: 1 };
    const log = new SessionLog(store, options);
    const other = new SessionLog(store, options);
    await log.create({ id: 's' });
    await log.append('s', [user('before')]);
    const begun = await log.beginTurn('s', { input: [user('go')], idempotencyKey: 'k' });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    // While the answer is on its way, another request appends and packs the turn.
    store.lose = {
      key: doneKey(begun.turn.scope, begun.turn.record),
      meanwhile: async () => {
        await other.append('s', [user('after')]);
        await other.pack('s');
      },
    };
    const output = await log.completeTurn(begun.turn, {
      status: 'completed',
      output: [assistant('done')],
      receipt: {},
      response: { ok: true },
    });
    expect(output.map((item) => item.type === 'message' && item.content)).toEqual(['done']);
    expect(await log.beginTurn('s', { input: [user('go')], idempotencyKey: 'k' })).toMatchObject({
      kind: 'replay',
      status: 'completed',
      response: { ok: true },
    });
  });

  it("is still refused when the segment keeps another closer's completion", async () => {
    const store = new LostAnswerStore();
    let now = new Date('2026-01-01T00:00:00Z');
    const options = { packMinRecords: 1, keepRecords: 1, clock: () => now };
    const log = new SessionLog(store, options);
    const other = new SessionLog(store, options);
    await log.create({ id: 's' });
    await log.append('s', [user('before')]);
    const begun = await log.beginTurn('s', { input: [user('go')] });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    // The lease runs out: another request closes the turn (lease_expired), appends and packs it.
    now = new Date(now.getTime() + 24 * 3600_000);
    await other.append('s', [user('after')]);
    await other.pack('s');
    await expect(
      log.completeTurn(begun.turn, { status: 'completed', output: [assistant('late')], receipt: {}, response: {} }),
    ).rejects.toMatchObject({ code: 'lease_expired' });
  });
});

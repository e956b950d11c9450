import { describe, expect, it } from 'vitest';
import { appendsLeasesApart, CHARGED, chargeableSession, leaseClock, user } from '../support/charges.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { type HeldCall, HeldStore } from '../support/held-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { SessionLog } from '../support/session-log.ts';

// A generation a delete of the newest turn left stays owed (`carry_from`) while a carry of one of
// its charges is unfinished (lib/session/log/owed-charges.ts): a write that lists the charge with
// no marker and then finds its marker taken by another carrier leaves the generation owed, so the
// carry is resumed when that carrier stops after its marker.

const LEASE_MS = 1000;

/** A put of a charge's carried marker. */
const markerPut = ({ operation, keys }: HeldCall) => operation === 'put' && keys[0]!.endsWith('.carried');

/** Session `s1` whose turn 1 was deleted, over `inner`: the turn a charge of the generation it left is stored for. */
async function deletedSession(inner: ObjectStore) {
  const clock = leaseClock(LEASE_MS);
  const log = new SessionLog(inner, clock.options);
  const turn = await chargeableSession(log);
  await log.deleteTurn('s1', 1);
  return { clock, options: clock.options, log, turn };
}

describe.each(await memoryAndFileStores('charge-owed-marker'))('a carry of an owed charge: %s', (_, storeOf) => {
  it('whose marker another write took is resumed once that carrier died after it', async () => {
    const inner = storeOf();
    const { clock, options, log, turn } = await deletedSession(inner);
    // The charge's writer, a process of its own: it names the generation owed, then waits at its marker.
    const writerHeld = new HeldStore(inner);
    const writerStore = new FaultyStore(writerHeld);
    const writer = new SessionLog(writerStore, options);
    const writerMarker = writerHeld.hold(markerPut);
    const stored = writer.storeCharge(turn, { usage: CHARGED }).catch(() => false);
    await writerMarker.reached;
    // A write lists the charge with no marker, and waits at its own marker.
    const held = new HeldStore(inner);
    const other = new SessionLog(held, options);
    const otherMarker = held.hold(markerPut);
    const appended = other.append('s1', [user('b')]);
    await otherMarker.reached;
    // The writer's marker lands (its call passed on already), and its process dies right after.
    writerStore.failWhen(() => true);
    writerMarker.release();
    await stored;
    otherMarker.release();
    await appended;
    await appendsLeasesApart(log, ['c', 'd', 'e'], clock);
    expect((await log.get('s1')).usage).toMatchObject({ input_tokens: 110, output_tokens: 6 });
  });

  it('resumed by two writes at once is carried by one of them', async () => {
    const inner = storeOf();
    const { clock, options, log, turn } = await deletedSession(inner);
    // The charge's writer names the generation owed, puts its marker and dies.
    const writerStore = new FaultyStore(inner);
    const writer = new SessionLog(writerStore, options);
    let dead = false;
    writerStore.failWhen(() => dead);
    writerStore.failWhen(({ operation, key }) => {
      if (operation === 'put' && key.endsWith('.carried')) dead = true;
      return false;
    });
    expect(await writer.storeCharge(turn, { usage: CHARGED }).catch(() => false)).toBe(false);
    clock.advance(2 * LEASE_MS);
    // A write resumes the carry, and waits at the put of the charge carried.
    const held = new HeldStore(inner);
    const slow = new SessionLog(held, options);
    const carriedPut = held.hold(({ operation, keys }) => operation === 'put' && /\/-charge-[0-9a-f]+$/.test(keys[0]!));
    const appended = slow.append('s1', [user('b')]);
    await carriedPut.reached;
    // Writes meanwhile resume it too, count the charge, and delete it once counted.
    for (const content of ['c', 'd', 'e', 'f']) await log.append('s1', [user(content)]);
    carriedPut.release();
    await appended;
    for (const content of ['g', 'h']) await log.append('s1', [user(content)]);
    expect((await log.get('s1')).usage).toMatchObject({ input_tokens: 110, output_tokens: 6 });
  });
});

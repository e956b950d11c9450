import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { billedLedger, LEASE_MS, ops, seeded, World } from '../support/simulation.ts';
import type { TurnObservation } from '../../lib/turn/types.ts';

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
});
afterEach(() => {
  vi.useRealTimers();
});

/** A world of `seed` with session `s`, and two actors each to send a turn of one Idempotency-Key. */
async function keyedRace(seed: number) {
  const world = new World(seeded(seed));
  const admin = world.actor();
  await world.run(admin.services.sessions.create({ id: 's' }), [admin]);
  const actors = [world.actor(), world.actor()];
  const race = () => world.run(Promise.all(actors.map((actor) => ops.turn(actor, 's', 'K', 'key-1'))), actors);
  return { world, actors, race };
}

// Two requests of one Idempotency-Key race: both call the model while their claims' records are
// put, one claim is lost, and that request replays the turn the other stored. The provider billed
// its call all the same: the session's totals count it (as a charge), once.
it('a keyed turn that replays the turn its key took meanwhile charges the call its lost claim aborted', async () => {
  let raced = 0;
  for (let seed = 1; seed <= 12; seed++) {
    const { world, race } = await keyedRace(seed);
    const outcomes = await race();
    // (One may be refused while the other runs: 409, nothing called.)
    for (const outcome of outcomes) if (!outcome.ok) expect(outcome.status, `seed ${seed}`).toBe(409);
    if (world.billed.length === 2) raced += 1;
    // The next write counts what is charged.
    world.now += LEASE_MS + 1;
    const survivor = world.actor();
    expect((await world.run(ops.turn(survivor, 's', 'F'), [survivor])).ok).toBe(true);
    const usage = (await world.run(survivor.services.sessions.get('s'))).usage;
    const billed = billedLedger(world.billed);
    expect([usage.input_tokens, usage.output_tokens], `seed ${seed}`).toEqual([
      billed.input_tokens,
      billed.output_tokens,
    ]);
    expect(usage.turns, `seed ${seed}`).toBe(2);
  }
  expect(raced).toBeGreaterThan(0);
});

// The replaying request's log line and metrics count the call its lost claim aborted too, as
// known when it is answered, as a turn whose claim's put failed does.
it('a keyed turn replaying the turn its key took tells the call its lost claim aborted in its log line', async () => {
  let raced = 0;
  for (let seed = 1; seed <= 12; seed++) {
    const { world, actors, race } = await keyedRace(seed);
    const told: TurnObservation[] = [];
    for (const actor of actors) actor.services.observeTurn = (outcome) => void told.push(outcome);
    await race();
    if (world.billed.length !== 2) continue;
    raced += 1;
    const replayed = told.filter((outcome) => outcome.status === 'replayed');
    expect(replayed, `seed ${seed}`).toHaveLength(1);
    expect(replayed[0]!.usage?.input_tokens, `seed ${seed}`).toBeGreaterThan(0);
    const completed = told.find((outcome) => outcome.status === 'completed');
    const billed = billedLedger(world.billed);
    expect(
      replayed[0]!.usage!.input_tokens + completed!.usage!.input_tokens,
      `seed ${seed}: the calls billed, told once each`,
    ).toBe(billed.input_tokens);
  }
  expect(raced).toBeGreaterThan(0);
});

import { expect, it } from 'vitest';
import { DeleteRefusedError } from '../../lib/errors.ts';
import { takeOutDead, takeOutInterrupted, type DeadTurnServices } from '../../lib/turn/dead-turn.ts';

// A turn answered at its end that cannot be taken out of its session (its delete refused: it
// took notices) stays there, and is logged as what it is: a dead turn (failed `lease_expired`)
// or one an `interrupt` cancelled, whose process may be alive.

/** Services whose session's newest turn is `newest` and whose delete of it is refused. */
function services(newest: Record<string, unknown>) {
  const logs: string[] = [];
  const newestTurn = { turn: 2, first_seq: 3, answered_at_end: true, output: null, status: 'failed', ...newest };
  const fake = {
    env: {},
    background: () => undefined,
    log: (message: string) => void logs.push(message),
    inbox: { tookNothing: async () => false },
    sessions: {
      getWithNewestTurn: async () => ({ newestTurn, scope: { keyPrefix: '', id: 's', generation: '' } }),
      closeIfExpired: async () => null,
      deleteTurn: async () => {
        throw new DeleteRefusedError('turn 2 of session s took notices');
      },
      pack: async () => undefined,
    },
  } as unknown as DeadTurnServices;
  return { fake, logs };
}

it('logs a dead turn that stays as one whose process died', async () => {
  const { fake, logs } = services({ error: 'lease_expired' });
  expect(await takeOutDead(fake, 's')).toBe(false);
  expect(logs).toEqual(['tailgate: turn 2 of s, whose process died, stays in its session']);
});

it.each([
  ['a later request', (fake: DeadTurnServices) => takeOutDead(fake, 's'), false],
  ['its interrupt', (fake: DeadTurnServices) => takeOutInterrupted(fake, 's', 2), 'stays'],
])('logs an interrupted turn that stays, found by %s, as interrupted', async (_, takeOut, answer) => {
  const { fake, logs } = services({ error: 'turn_cancelled', interrupted: true });
  expect(await takeOut(fake)).toBe(answer);
  expect(logs).toEqual(['tailgate: turn 2 of s, interrupted, stays in its session']);
});

import { expect, it } from 'vitest';
import { killMidTurnAndRecover } from './crash-recovery.ts';
import { serverEnvironment, TOKEN } from './s3-environment.ts';

// A short lease keeps the test quick; bench/crash-recovery.ts measures the default (30 s).
// The two tests run at once (own server, port, provider and key prefix each): the first one
// mostly waits out the lease.
const LEASE_MS = 6000;

it.concurrent('after kill -9 mid-stream, the session takes turns again within the lease, the input kept and marked ' +
  'failed', async () => {
  const keyPrefix = `crash-${Date.now().toString(36)}/`;
  const result = await killMidTurnAndRecover(
    (port) => ({ ...serverEnvironment(port, keyPrefix), TURN_LEASE_MS: String(LEASE_MS) }),
    TOKEN,
  );
  expect(result.streamed).toEqual(expect.arrayContaining(['turn.started', 'output_text.delta']));
  // Refused while the dead turn's lease ran (unless the restart outlasted it), then free.
  for (const status of result.refused) expect(status).toBe(409);
  if (result.restartMs < LEASE_MS - 1000) expect(result.refused.length).toBeGreaterThan(0);
  // How soon it recovers is bench/crash-recovery.ts's to measure, not a test's on a loaded machine.
  // No half turn: the input stays, the words already streamed were never stored.
  expect(result.contents).toEqual(['before', 'echo: before', 'interrupted', 'after', 'echo: after']);
}, 90_000);

it.concurrent('after kill -9, cancelling the dead turn frees the session at once', async () => {
  const keyPrefix = `cancel-${Date.now().toString(36)}/`;
  const result = await killMidTurnAndRecover(
    (port) => ({ ...serverEnvironment(port, keyPrefix), TURN_LEASE_MS: String(10 * 60_000) }),
    TOKEN,
    { cancel: true },
  );
  expect(result.refused).toEqual([]);
  expect(result.contents).toEqual(['before', 'echo: before', 'interrupted', 'after', 'echo: after']);
}, 90_000);

import { expect, it } from 'vitest';
import { sha256Hex } from '../../lib/hash.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { previewPrompt, runTurn } from '../../lib/turn/index.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { recordingEcho, turnWorld } from '../support/turn-world.ts';

/**
 * GET /prompt (`previewPrompt`) with inputs queued while a fence holds the session (a delete of
 * the newest turn whose store failed once its fence landed, its lease still running): the next
 * claim is refused by the fence before it looks at the queue (log/commit.ts), so it takes no
 * queued input up, and the preview names none (`context.queued_turn`).
 */

const LEASE_MS = 30_000;
const clock = { now: Date.parse('2026-01-01T00:00:00Z') };

it('names no queued input while a fence holds the session, as the next claim takes none up', async () => {
  const store = new MemoryStore({ clock: () => new Date(clock.now) });
  const model = recordingEcho();
  const kept: Promise<unknown>[] = [];
  const timing = { clock: () => new Date(clock.now), leaseMs: LEASE_MS };
  const { sessions, services } = turnWorld(store, model, { ...timing, kept });
  await sessions.create({ id: 's' });
  await runTurn(services, 's', { input: 'kept' });
  let fenced = false;
  const failing = new FaultyStore(store).failWhen(({ operation, key, options }) => {
    if (operation === 'put' && options?.onlyIfAbsent === true && /\/turn\/[^/]+\/\d+$/.test(key)) fenced = true;
    return fenced && operation === 'delete';
  });
  await expect(turnWorld(failing, model, timing).sessions.deleteTurn('s', 1)).rejects.toThrow();
  expect(fenced).toBe(true);
  await sessions.enqueue('s', {
    input: [{ type: 'message', role: 'user', content: 'queued' }],
    request: {},
    key_sha256: sha256Hex('queued'),
  });

  const preview = await previewPrompt(services, 's', {});
  await expect(runTurn(services, 's', { input: [] })).rejects.toMatchObject({ code: 'turn_in_progress' });
  for (let rounds = 0; rounds < 20 && kept.length > 0; rounds++) await Promise.all(kept.splice(0));
  // The claim was refused by the fence: the input still waits, no turn of it was taken.
  expect((await sessions.listQueuedInputs('s', 10)).total).toBe(1);
  expect(preview.context.queued_turn).toBeUndefined();
});

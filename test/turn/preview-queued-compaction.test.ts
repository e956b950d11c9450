import { expect, it } from 'vitest';
import { sha256Hex } from '../../lib/hash.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { previewPrompt, runTurn } from '../../lib/turn/index.ts';
import { killedAtCompletion } from '../support/killed-at-completion.ts';
import { recordingEcho, turnWorld } from '../support/turn-world.ts';

/**
 * GET /prompt (`previewPrompt`) of the queued input the next claim takes up first: its turn's
 * prompt is built under its own request's `compaction` threshold (lib/turn/turn-prompt.ts), so a
 * compaction that turn makes is shown as made, as for the turn's own request.
 */

const LEASE_MS = 30_000;
const clock = { now: Date.parse('2026-01-01T00:00:00Z') };

it("shows the compaction the queued input's compaction threshold makes, as that turn makes it", async () => {
  const store: ObjectStore = new MemoryStore({ clock: () => new Date(clock.now) });
  const model = recordingEcho();
  const kept: Promise<unknown>[] = [];
  const { sessions, services } = turnWorld(store, model, { clock: () => new Date(clock.now), leaseMs: LEASE_MS, kept });
  await sessions.create({ id: 's' });
  for (let n = 0; n < 6; n++)
    await sessions.append('s', [{ type: 'message', role: 'user', content: `${n} ${'x'.repeat(1000)}` }]);
  // A turn whose process died as it wrote its completion: its lease runs out below.
  const left: Promise<unknown>[] = [];
  const dying = turnWorld(killedAtCompletion(store), model, { clock: () => new Date(clock.now), leaseMs: LEASE_MS });
  await runTurn({ ...dying.services, background: (task) => void left.push(task) }, 's', { input: [] }).catch(
    () => null,
  );
  await Promise.allSettled(left);
  await sessions.enqueue('s', {
    input: [{ type: 'message', role: 'user', content: 'queued' }],
    request: { compaction: { threshold: 500 } },
    key_sha256: sha256Hex('queued'),
  });
  clock.now += LEASE_MS + 1;

  const preview = await previewPrompt(services, 's', {});
  expect(preview.context.queued_turn).toBe(sha256Hex('queued'));
  await expect(runTurn(services, 's', { input: [] })).rejects.toMatchObject({ code: 'turn_in_progress' });
  for (let rounds = 0; rounds < 20 && kept.length > 0; rounds++) await Promise.all(kept.splice(0));
  const turns = await sessions.listTurns('s', { limit: 10 });
  const made = turns.turns.find((turn) => turn.turn === 2)?.context?.compaction;
  // The queued input's turn compacted: the preview showed that compaction, pending its summary.
  expect(made).toBeDefined();
  expect(preview.context.compaction).toMatchObject({ ...made!, pending: true });
});

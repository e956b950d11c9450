import { expect, it } from 'vitest';
import { sha256Hex } from '../../lib/hash.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { previewPrompt, runTurn } from '../../lib/turn/index.ts';
import { CountingStore } from '../support/counting-store.ts';
import { killedAtCompletion } from '../support/killed-at-completion.ts';
import { recordingEcho, turnWorld } from '../support/turn-world.ts';

/**
 * What GET /prompt costs when the next claim takes a queued input up first (docs/API.md, "Prompt
 * preview"): the session read again under the input's settings, a listing of the queue and a read
 * of the input shown, no more.
 */

const LEASE_MS = 30_000;
const clock = { now: Date.parse('2026-01-01T00:00:00Z') };

/** The preview's storage calls on a session whose turn died, its lease run out, with `queued` inputs waiting. */
async function previewCost(queued: number) {
  const store = new CountingStore(new MemoryStore({ clock: () => new Date(clock.now) }));
  const model = recordingEcho();
  const timing = { clock: () => new Date(clock.now), leaseMs: LEASE_MS };
  const { sessions, services } = turnWorld(store, model, { ...timing, kept: [] });
  await sessions.create({ id: 's' });
  await sessions.append('s', [{ type: 'message', role: 'user', content: 'hello' }]);
  const left: Promise<unknown>[] = [];
  const dying = turnWorld(killedAtCompletion(store), model, timing);
  await runTurn({ ...dying.services, background: (task) => void left.push(task) }, 's', { input: [] }).catch(
    () => null,
  );
  await Promise.allSettled(left);
  for (let n = 0; n < queued; n++)
    await sessions.enqueue('s', {
      input: [{ type: 'message', role: 'user', content: `queued ${n}` }],
      request: {},
      key_sha256: sha256Hex(`queued ${n}`),
    });
  clock.now += LEASE_MS + 1;
  store.reset();
  const preview = await previewPrompt(services, 's', {});
  return { preview, counts: store.counts };
}

it('reads the session twice, the queue with one listing and the input shown with one get', async () => {
  const plain = await previewCost(0);
  const behind = await previewCost(1);
  expect(behind.preview.context.queued_turn).toBe(sha256Hex('queued 0'));
  // At most twice a plain preview's reads (the first, under the session's settings, ends before
  // the inbox), and the queue's listing and the input's get.
  expect(behind.counts.list).toBeLessThanOrEqual(2 * plain.counts.list + 1);
  expect(behind.counts.get).toBeLessThanOrEqual(2 * plain.counts.get + 1);
  expect(behind.counts.head).toBe(2 * plain.counts.head);
  expect(behind.counts.list + behind.counts.get).toBeGreaterThan(plain.counts.list + plain.counts.get + 2);
  expect(behind.counts.put + behind.counts.delete).toBe(0);
});

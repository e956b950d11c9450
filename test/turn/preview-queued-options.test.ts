import { expect, it } from 'vitest';
import { sha256Hex } from '../../lib/hash.ts';
import type { PromptItem } from '../../lib/items.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { previewPrompt, runTurn } from '../../lib/turn/index.ts';
import { killedAtCompletion } from '../support/killed-at-completion.ts';
import { recordingEcho, turnWorld } from '../support/turn-world.ts';

/**
 * GET /prompt (`previewPrompt`) of the queued input the next claim takes up first: its turn's
 * prompt is fitted to the budget its own request leaves (`max_output_tokens` reserves room for
 * the answer, lib/tokens/model-limits.ts), as the pipeline fits it (lib/turn/pipeline.ts).
 */

const LEASE_MS = 30_000;
const clock = { now: Date.parse('2026-01-01T00:00:00Z') };

/** What the model reads of an item: no `pending` mark, no `created_at`. */
function seen(prompt: PromptItem[]): unknown[] {
  return prompt.map((item) => {
    const { pending: _pending, created_at: _createdAt, ...rest } = item as PromptItem & { created_at?: string };
    return rest;
  });
}

it("fits the queued input's turn to the room its max_output_tokens leaves, as that turn does", async () => {
  const store: ObjectStore = new MemoryStore({ clock: () => new Date(clock.now) });
  const model = recordingEcho();
  const kept: Promise<unknown>[] = [];
  const { sessions, services } = turnWorld(store, model, { clock: () => new Date(clock.now), leaseMs: LEASE_MS, kept });
  await sessions.create({ id: 's', strategy_config: { context_limit: 4000, response_reserve: 100 } });
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
    request: { max_output_tokens: 3000 },
    key_sha256: sha256Hex('queued'),
  });
  clock.now += LEASE_MS + 1;

  const preview = await previewPrompt(services, 's', {});
  expect(preview.context.queued_turn).toBe(sha256Hex('queued'));
  const before = model.prompts.length;
  await expect(runTurn(services, 's', { input: [] })).rejects.toMatchObject({ code: 'turn_in_progress' });
  for (let rounds = 0; rounds < 20 && kept.length > 0; rounds++) await Promise.all(kept.splice(0));
  const sent = model.prompts[before]!;
  // The turn had 900 tokens of room: it dropped the oldest items the preview shows.
  expect(sent.length).toBeLessThan(7);
  expect(preview.items.map((item) => item.seq)).toEqual(sent.map((item) => item.seq));
  expect(seen(sent)).toEqual(seen(preview.items));
});

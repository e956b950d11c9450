import { expect, it } from 'vitest';
import { sha256Hex } from '../../lib/hash.ts';
import type { PromptItem } from '../../lib/items.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { previewPrompt, runTurn, type TurnRequest } from '../../lib/turn/index.ts';
import { killedAtCompletion } from '../support/killed-at-completion.ts';
import { recordingEcho, turnWorld, seen } from '../support/turn-world.ts';

/**
 * GET /prompt (`previewPrompt`) of the queued input the next claim takes up first: its turn's
 * prompt is built under its own request's settings, as the pipeline builds it
 * (lib/turn/pipeline.ts): fitted to the room its `max_output_tokens` leaves the answer
 * (lib/tokens/model-limits.ts), compacted at its `compaction` threshold (lib/turn/turn-prompt.ts).
 */

const LEASE_MS = 30_000;
const clock = { now: Date.parse('2026-01-01T00:00:00Z') };

/**
 * Session `s` of 6 long messages (its config `config`), whose turn died as it wrote its
 * completion, its lease run out, with an input queued under `request` behind it: the preview,
 * then the next request's claim (refused as busy, the queued input's turn taken up and run).
 */
async function previewThenQueuedTurn(config: object, request: Partial<TurnRequest>) {
  const store: ObjectStore = new MemoryStore({ clock: () => new Date(clock.now) });
  const model = recordingEcho();
  const kept: Promise<unknown>[] = [];
  const { sessions, services } = turnWorld(store, model, { clock: () => new Date(clock.now), leaseMs: LEASE_MS, kept });
  await sessions.create({ id: 's', ...config });
  for (let n = 0; n < 6; n++)
    await sessions.append('s', [{ type: 'message', role: 'user', content: `${n} ${'x'.repeat(1000)}` }]);
  const left: Promise<unknown>[] = [];
  const dying = turnWorld(killedAtCompletion(store), model, { clock: () => new Date(clock.now), leaseMs: LEASE_MS });
  await runTurn({ ...dying.services, background: (task) => void left.push(task) }, 's', { input: [] }).catch(
    () => null,
  );
  await Promise.allSettled(left);
  await sessions.enqueue('s', {
    input: [{ type: 'message', role: 'user', content: 'queued' }],
    request,
    key_sha256: sha256Hex('queued'),
  });
  clock.now += LEASE_MS + 1;

  const preview = await previewPrompt(services, 's', {});
  expect(preview.context.queued_turn).toBe(sha256Hex('queued'));
  const before = model.prompts.length;
  await expect(runTurn(services, 's', { input: [] })).rejects.toMatchObject({ code: 'turn_in_progress' });
  for (let rounds = 0; rounds < 20 && kept.length > 0; rounds++) await Promise.all(kept.splice(0));
  return { preview, sent: model.prompts[before]!, turns: await sessions.listTurns('s', { limit: 10 }) };
}

it("fits the queued input's turn to the room its max_output_tokens leaves, as that turn does", async () => {
  const { preview, sent } = await previewThenQueuedTurn(
    { strategy_config: { context_limit: 4000, response_reserve: 100 } },
    { max_output_tokens: 3000 },
  );
  // The turn had 900 tokens of room: it dropped the oldest items the preview shows.
  expect(sent.length).toBeLessThan(7);
  expect(preview.items.map((item) => item.seq)).toEqual(sent.map((item) => item.seq));
  expect(seen(sent)).toEqual(seen(preview.items));
});

it("shows the compaction the queued input's compaction threshold makes, as that turn makes it", async () => {
  const { preview, turns } = await previewThenQueuedTurn({}, { compaction: { threshold: 500 } });
  const made = turns.turns.find((turn) => turn.turn === 2)?.context?.compaction;
  // The queued input's turn compacted: the preview showed that compaction, pending its summary.
  expect(made).toBeDefined();
  expect(preview.context.compaction).toMatchObject({ ...made!, pending: true });
});

it("gives the queued input's items the seq and created_at its turn stores them with, by the log's clock", async () => {
  const { preview, sent } = await previewThenQueuedTurn({}, {});
  const queued = (items: readonly PromptItem[]) =>
    items.find((item) => item.type === 'message' && item.content === 'queued');
  // The clock did not move between the preview and the turn: the turn stamped its input with that time.
  expect(queued(sent)).toMatchObject({ created_at: new Date(clock.now).toISOString() });
  expect(queued(preview.items)).toEqual(queued(sent));
});

import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { previewPrompt, runTurn, type TurnServices } from '../../lib/turn/index.ts';
import { CountingStore } from '../support/counting-store.ts';
import { HeldStore } from '../support/held-store.ts';
import { killedAtCompletion } from '../support/killed-at-completion.ts';
import { recordingEcho, turnWorld, seen } from '../support/turn-world.ts';

/**
 * GET /prompt (`previewPrompt`, lib/turn/preview.ts) after a give-back that stalled and posted a
 * notice a second time (docs/STORAGE.md, "Give-backs"): the next turn's consume drops that post,
 * its first post delivered already (or withdrawn), so the preview does not show it.
 */

/** The turns' lease (TURN_LEASE_MS), which the clock passes once a turn's process died. */
const LEASE_MS = 30_000;

/**
 * Turn 1 died holding notice `0001-n`, closed once its lease ran out; its give-back stalls before it
 * posts the notice back, turn 2 finishes that give-back (posts it), and turn 3 delivers that post (or
 * it is withdrawn); then the stalled give-back posts it again, under its name, free again.
 */
async function postedTwice(first: 'delivered' | 'withdrawn') {
  let now = Date.parse('2026-01-01T00:00:00Z');
  const clock = () => new Date(now);
  const store = new MemoryStore({ clock });
  const model = recordingEcho();
  const { sessions, inbox, services } = turnWorld(store, model, { clock, leaseMs: LEASE_MS });
  await sessions.create({ id: 's' });
  await inbox.post('s', { name: '0001-n', content: 'budget low' });
  await diesHolding(turnWorld(killedAtCompletion(store), model, { clock, leaseMs: LEASE_MS }).services);
  now += LEASE_MS + 1;
  expect(await sessions.closeIfExpired('s', 1)).toMatchObject({ error: { code: 'lease_expired' } });
  const held = new HeldStore(store);
  const post = held.hold(({ operation, keys }) => operation === 'put' && /\/inbox\/[^/]+$/.test(keys[0]!));
  const giving = turnWorld(held, model, { clock, leaseMs: LEASE_MS }).inbox.giveBack(
    's',
    [{ name: '0001-n', stored_as: '0001-n' }],
    1,
  );
  await post.reached;
  expect((await runTurn(services, 's', { input: [] })).context.notices_delivered).toEqual([]);
  expect((await inbox.listPending('s')).map((notice) => notice.name)).toEqual(['0001-n']);
  if (first === 'withdrawn') await inbox.withdraw('s', '0001-n');
  else expect((await runTurn(services, 's', { input: [] })).context.notices_delivered).toEqual(['0001-n']);
  post.release();
  await giving;
  expect((await inbox.listPending('s')).map((notice) => notice.name)).toEqual(['0001-n']);
  return { store, clock, model, inbox, services };
}

describe('previewPrompt after a give-back posted a notice twice', () => {
  it.each(['delivered', 'withdrawn'] as const)(
    'leaves out the second post, its first %s, as the next turn drops it, and writes nothing',
    async (first) => {
      const { store, clock, model, inbox, services } = await postedTwice(first);
      await inbox.post('s', { name: '0002-n', content: 'disk full' });
      const counting = new CountingStore(store);
      const world = turnWorld(counting, model, { clock, leaseMs: LEASE_MS });
      const preview = await previewPrompt(world.services, 's', {});
      expect(counting.counts).toMatchObject({ put: 0, delete: 0 });
      const turn = await runTurn(services, 's', { input: [] });
      expect(turn.context.notices_delivered).toEqual(['0002-n']);
      expect(preview.context.notices_pending).toEqual(turn.context.notices_delivered);
      expect(seen(model.prompts.at(-1)!)).toEqual(seen(preview.items));
      expect(await inbox.listPending('s')).toEqual([]);
    },
  );
});

/** A turn without input in a process that dies as it writes the turn's completion (`killedAtCompletion`). */
async function diesHolding(services: TurnServices): Promise<void> {
  const left: Promise<unknown>[] = [];
  await runTurn({ ...services, background: (task) => void left.push(task) }, 's', { input: [] }).catch(() => null);
  await Promise.allSettled(left);
}

import { describe, expect, it } from 'vitest';
import { inboxPrefix } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { previewPrompt, runTurn } from '../../lib/turn/index.ts';
import { CountingStore } from '../support/counting-store.ts';
import { recordingEcho, turnWorld, seen } from '../support/turn-world.ts';

/**
 * GET /prompt (`previewPrompt`, lib/turn/preview.ts) leaves out the notices in a session's inbox
 * that are not its own, as the next turn's consume removes them without delivering them
 * (docs/STORAGE.md, "Notices"): one uploaded before the session was created (left by an unfinished
 * delete of an earlier session of the id), and one posted to another incarnation of the id.
 */

/** A session `s` created 10 s after a notice `0000-old` was left in its inbox, and `n` notices posted since. */
async function world(n: number) {
  let now = Date.parse('2026-01-01T00:00:00Z');
  const clock = () => new Date(now);
  const store = new MemoryStore({ clock });
  const model = recordingEcho();
  const { sessions, inbox, services } = turnWorld(store, model, { clock });
  await store.put(`${inboxPrefix('', 's')}0000-old`, 'left by a delete that did not finish');
  now += 10_000;
  await sessions.create({ id: 's', strategies: ['inbox'] });
  for (let index = 0; index < n; index++) await inbox.post('s', { name: `n${index + 10}`, content: `${index}` });
  return { store, clock, model, inbox, services };
}

describe("previewPrompt over notices that are not the session's", () => {
  it('leaves out one uploaded before the session was created, as the next turn drops it, writing nothing', async () => {
    const { store, clock, model, services } = await world(1);
    const counting = new CountingStore(store);
    const preview = await previewPrompt(turnWorld(counting, model, { clock }).services, 's', {});
    expect(counting.counts).toMatchObject({ put: 0, delete: 0 });
    const turn = await runTurn(services, 's', { input: [] });
    expect(turn.context.notices_delivered).toEqual(['n10']);
    expect(preview.context.notices_pending).toEqual(turn.context.notices_delivered);
    expect(seen(model.prompts.at(-1)!)).toEqual(seen(preview.items));
  });

  it('shows the notices after it that the next turn takes, its listing of 32 holding the old one', async () => {
    const { services } = await world(33);
    const preview = await previewPrompt(services, 's', {});
    const turn = await runTurn(services, 's', { input: [] });
    const taken = Array.from({ length: 31 }, (_, index) => `n${index + 10}`);
    expect(turn.context.notices_delivered).toEqual(taken);
    expect(preview.context.notices_pending).toEqual(taken);
  });

  it('leaves out one posted to another incarnation of the id, as the next turn drops it', async () => {
    const { store, model, services } = await world(1);
    await store.put(`${inboxPrefix('', 's')}n05`, 'for the session deleted since', {
      metadata: { 'session-created': '2025-12-31T00:00:00.000Z' },
    });
    const preview = await previewPrompt(services, 's', {});
    const turn = await runTurn(services, 's', { input: [] });
    expect(turn.context.notices_delivered).toEqual(['n10']);
    expect(preview.context.notices_pending).toEqual(turn.context.notices_delivered);
    expect(seen(model.prompts.at(-1)!)).toEqual(seen(preview.items));
  });
});

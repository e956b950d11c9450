import { describe, expect, it } from 'vitest';
import type { PromptItem } from '../../lib/items.ts';
import { ModelError } from '../../lib/models/errors.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { claimBackgroundTurn, runBackgroundTurn, runTurn } from '../../lib/turn/index.ts';
import { hookedEcho, turnWorld } from '../support/turn-world.ts';

// An empty input takes a failed newest turn again: the model answers the history as it stands,
// the failed turn's input being the newest turn's, kept whole by a compaction (and by the
// safety net) as a turn keeps its own input.

/** A session of three turns, then a fourth whose model call fails; every prompt sent is kept. */
async function failedFourth(input: string) {
  let failing = false;
  const prompts: PromptItem[][] = [];
  const model = hookedEcho('echo', async (request) => {
    if (failing) {
      failing = false;
      throw new ModelError('provider down');
    }
    prompts.push(request.prompt);
  });
  const world = turnWorld(new MemoryStore(), model);
  await world.sessions.create({ id: 's', model: 'echo' });
  for (const text of ['one', 'two', 'three']) await runTurn(world.services, 's', { input: text });
  const fail = () => {
    failing = true;
  };
  fail();
  await expect(runTurn(world.services, 's', { input })).rejects.toMatchObject({ code: 'model_error' });
  return { ...world, prompts, fail };
}

/** Compaction with a trigger and a kept share of a few tokens: it summarizes all but the newest turn's input. */
const COMPACTING = {
  strategies: ['compact'],
  strategy_config: { context_limit: 100_000, compact_trigger_ratio: 0.0001, compact_keep_ratio: 0.0001 },
};

const userTexts = (prompt: readonly PromptItem[]) =>
  prompt.flatMap((item) =>
    item.type === 'message' && item.role === 'user' && item.synthetic === undefined ? [item.content] : [],
  );

describe('a retake that compacts', () => {
  it('keeps the failed input whole, as the turn that failed would have', async () => {
    const text = `four ${'x'.repeat(400)}`;
    const { services, prompts } = await failedFourth(text);
    const retaken = await runTurn(services, 's', { input: [], ...COMPACTING }, { retake: true });
    expect(retaken.turn).toBe(5);
    // The summary's call first, then the turn's own: the failed input reaches it whole, once.
    expect(userTexts(prompts.at(-1)!)).toEqual([text]);
  });

  it('keeps it in the background, where the runner takes the claimed turn over', async () => {
    const text = `four ${'y'.repeat(400)}`;
    const { services, prompts } = await failedFourth(text);
    const claimed = await claimBackgroundTurn(services, 's', { input: [], ...COMPACTING }, { retake: true });
    expect(await runBackgroundTurn(services, claimed.run!)).toBe('done');
    expect(userTexts(prompts.at(-1)!)).toEqual([text]);
  });

  it('keeps it when a retake failed too and is taken again', async () => {
    const text = `four ${'z'.repeat(400)}`;
    const { services, prompts, fail } = await failedFourth(text);
    fail();
    await expect(runTurn(services, 's', { input: [] }, { retake: true })).rejects.toMatchObject({
      code: 'model_error',
    });
    await runTurn(services, 's', { input: [], ...COMPACTING }, { retake: true });
    expect(userTexts(prompts.at(-1)!)).toEqual([text]);
  });
});

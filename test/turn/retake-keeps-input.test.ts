import { describe, expect, it } from 'vitest';
import type { PromptItem } from '../../lib/items.ts';
import { ModelError } from '../../lib/models/errors.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { claimBackgroundTurn, runBackgroundTurn, runTurn } from '../../lib/turn/index.ts';
import { COMPACTING, hookedEcho, turnWorld, userTexts } from '../support/turn-world.ts';

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
      throw new ModelError('provider down', { model: 'echo' });
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

// A fork's first record, and the one a delete of the newest turn starts its generation with,
// store no item: a failed turn before them is still the newest, with nothing stored after it,
// so an empty input takes it again there as in the session it failed in, its input kept whole.
describe('a retake after a fork', () => {
  it('takes again the failed turn a fork was made at', async () => {
    const { services, sessions } = await failedFourth('four');
    await sessions.fork('s', { at_turn: 4, fields: { id: 'f' } });
    const retaken = await runTurn(services, 'f', { input: [] }, { retake: true });
    expect(retaken.turn).toBe(5);
    expect(retaken.output).toMatchObject([{ role: 'assistant', content: 'echo: four' }]);
    expect((await sessions.getTurn('f', 5)).status).toBe('completed');
  });

  it('takes again a failed turn a delete of the newest turn went back to', async () => {
    const { services, sessions } = await failedFourth('four');
    await runTurn(services, 's', { input: 'five' });
    await sessions.deleteTurn('s', 5);
    const retaken = await runTurn(services, 's', { input: [] }, { retake: true });
    expect(retaken.turn).toBe(5);
    expect(retaken.output).toMatchObject([{ role: 'assistant', content: 'echo: four' }]);
  });

  it('takes again, at a fork made at a failed retake, the input that retake took', async () => {
    const text = `four ${'w'.repeat(400)}`;
    const { services, sessions, prompts, fail } = await failedFourth(text);
    fail();
    await expect(runTurn(services, 's', { input: [] }, { retake: true })).rejects.toMatchObject({
      code: 'model_error',
    });
    await sessions.fork('s', { at_turn: 5, fields: { id: 'f' } });
    const retaken = await runTurn(services, 'f', { input: [], ...COMPACTING }, { retake: true });
    expect(retaken.turn).toBe(6);
    expect(userTexts(prompts.at(-1)!)).toEqual([text]);
  });

  it('is refused at a fork of a completed turn', async () => {
    const { services, sessions } = await failedFourth('four');
    await sessions.fork('s', { at_turn: 3, fields: { id: 'f' } });
    await expect(runTurn(services, 'f', { input: [] }, { retake: true })).rejects.toThrow(/turn 3 completed/);
  });

  it('keeps the failed input whole when the retake compacts', async () => {
    const text = `four ${'x'.repeat(400)}`;
    const { services, sessions, prompts } = await failedFourth(text);
    await sessions.fork('s', { at_turn: 4, fields: { id: 'f' } });
    await runTurn(services, 'f', { input: [], ...COMPACTING }, { retake: true });
    expect(userTexts(prompts.at(-1)!)).toEqual([text]);
  });

  it('keeps it in the background, where the runner takes the claimed turn over', async () => {
    const text = `four ${'y'.repeat(400)}`;
    const { services, sessions, prompts } = await failedFourth(text);
    await sessions.fork('s', { at_turn: 4, fields: { id: 'f' } });
    const claimed = await claimBackgroundTurn(services, 'f', { input: [], ...COMPACTING }, { retake: true });
    expect(await runBackgroundTurn(services, claimed.run!)).toBe('done');
    expect(userTexts(prompts.at(-1)!)).toEqual([text]);
  });
});

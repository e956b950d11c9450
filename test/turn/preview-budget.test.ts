import { expect, it } from 'vitest';
import { TailgateError } from '../../lib/errors.ts';
import { clientError } from '../../lib/error-codes.ts';
import { echoModel } from '../../lib/models/echo.ts';
import type { Model } from '../../lib/models/model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { previewPrompt, runTurn } from '../../lib/turn/index.ts';
import { recordingEcho, turnWorld } from '../support/turn-world.ts';

/**
 * GET /prompt (`previewPrompt`, lib/turn/preview.ts) of a session whose `budget` is spent: the
 * preview still shows the prompt, and `refused` says what the next turn request is refused with
 * (402 `budget_exhausted`, as its claim's check refuses it: lib/ledger/budget.ts); null while the
 * budget leaves room.
 */

/** What a turn request was refused with, as its answer's body has it (functions/error-handler.ts); null: it ran. */
async function refusal(call: Promise<unknown>): Promise<unknown> {
  try {
    await call;
  } catch (error) {
    if (error instanceof TailgateError) return clientError(error);
    throw error;
  }
  return null;
}

it.each([
  ['max_turns', { max_turns: 1 }],
  ['max_total_tokens', { max_total_tokens: 1 }],
] as const)('names the refusal of the next turn once %s is reached, as the turn answers it', async (_, budget) => {
  const { sessions, services } = turnWorld(new MemoryStore(), recordingEcho());
  await sessions.create({ id: 's', budget });
  await sessions.append('s', [{ type: 'message', role: 'user', content: 'hello' }]);
  // The budget leaves room: the next turn runs.
  expect((await previewPrompt(services, 's', {})).refused).toBeNull();
  await runTurn(services, 's', { input: [] });

  const preview = await previewPrompt(services, 's', {});
  // The prompt is still shown, as it would be sent once the budget is raised.
  expect(preview.items.length).toBeGreaterThan(0);
  const refused = await refusal(runTurn(services, 's', { input: 'next' }));
  expect(refused).toMatchObject({ code: 'budget_exhausted', details: { budget: 'session' } });
  expect(preview.refused).toEqual(refused);

  // A PATCH raising the budget: the next turn runs, and the preview says so.
  await sessions.update('s', { budget: null });
  expect((await previewPrompt(services, 's', {})).refused).toBeNull();
  expect(await refusal(runTurn(services, 's', { input: 'next' }))).toBeNull();
});

it("judges the session's budget alone: a session busy with a running turn shows null, its turn 409", async () => {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let reached!: () => void;
  const calling = new Promise<void>((resolve) => (reached = resolve));
  // The running turn's model call is held until the preview and the second request were answered.
  const model: Model = {
    ...echoModel,
    generate: async (request) => {
      reached();
      await held;
      return echoModel.generate(request);
    },
  };
  const { sessions, services } = turnWorld(new MemoryStore(), model);
  await sessions.create({ id: 's', on_busy: 'reject' });
  const running = runTurn(services, 's', { input: 'hello' });
  await calling;
  expect((await previewPrompt(services, 's', {})).refused).toBeNull();
  expect(await refusal(runTurn(services, 's', { input: 'again' }))).toMatchObject({ code: 'turn_in_progress' });
  release();
  await running;
});

import { describe, expect, it } from 'vitest';
import { ModelError } from '../../lib/models/errors.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { compactSession } from '../../lib/turn/compact-session.ts';
import { runTurn } from '../../lib/turn/index.ts';
import { hookedEcho, turnWorld } from '../support/turn-world.ts';

// A compaction stores no item and answers no call: after a failed turn (a context too large for
// the window, say), compacting and then taking the failed turn again with an empty input is the
// way back, and the retake answers the history as the compaction left it.

async function failedThenCompacted() {
  const failing = { next: false };
  const model = hookedEcho('echo', async () => {
    if (failing.next) {
      failing.next = false;
      throw new ModelError('provider down', { model: 'echo' });
    }
  });
  const world = turnWorld(new MemoryStore(), model);
  await world.sessions.create({ id: 's', model: 'echo' });
  for (const text of ['one', 'two', 'three']) await runTurn(world.services, 's', { input: text });
  failing.next = true;
  await expect(runTurn(world.services, 's', { input: 'four' })).rejects.toMatchObject({ code: 'model_error' });
  const compacted = await compactSession({ ...world.services, sessions: world.sessions }, 's', { keep_tokens: 5 });
  expect(compacted.compacted).toBe(true);
  return { ...world, failing };
}

describe('a retake after a compaction', () => {
  it('takes the failed turn before the compaction again', async () => {
    const { services, sessions } = await failedThenCompacted();
    const retaken = await runTurn(services, 's', { input: [] }, { retake: true });
    expect(retaken.turn).toBe(5);
    expect((await sessions.getTurn('s', 5)).status).toBe('completed');
  });

  it('takes a retake that failed in its turn again after another compaction', async () => {
    const { services, sessions, failing } = await failedThenCompacted();
    failing.next = true;
    await expect(runTurn(services, 's', { input: [] }, { retake: true })).rejects.toMatchObject({
      code: 'model_error',
    });
    const again = await compactSession({ ...services, sessions }, 's', { keep_tokens: 1 });
    expect(again.compacted).toBe(true);
    const retaken = await runTurn(services, 's', { input: [] }, { retake: true });
    expect(retaken.turn).toBe(6);
    expect((await sessions.getTurn('s', 6)).status).toBe('completed');
  });

  it('is refused once the retake completed, compaction or not', async () => {
    const { services, sessions } = await failedThenCompacted();
    await runTurn(services, 's', { input: [] }, { retake: true });
    await compactSession({ ...services, sessions }, 's', { keep_tokens: 5 });
    await expect(runTurn(services, 's', { input: [] }, { retake: true })).rejects.toMatchObject({
      code: 'invalid_request',
      details: { field: 'input' },
    });
  });

  it('is refused when the compaction came with items of its own', async () => {
    const { services, sessions } = await failedThenCompacted();
    const message = { type: 'message' as const, role: 'user' as const, content: 'five' };
    await compactSession({ ...services, sessions }, 's', { keep_tokens: 5 }, [message]);
    await expect(runTurn(services, 's', { input: [] }, { retake: true })).rejects.toThrow(
      /items stored after its turn 4/,
    );
  });
});

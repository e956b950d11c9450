import { describe, expect, it } from 'vitest';
import { DEFAULT_SUMMARY_PROMPT } from '../../lib/compaction/summary-transcript.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { SessionLog } from '../support/session-log.ts';
import { runTurn, type TurnResponse } from '../../lib/turn/index.ts';
import { hookedEcho, turnWorld } from '../support/turn-world.ts';

/**
 * The claim is a read-only snapshot: what a turn moves (the context start its compaction
 * stored, the overflow boundary its fitted prompt moved) reaches the close only through the
 * turn's outcome (lib/turn/close-turn.ts). A turn that fails after the move still stores it.
 * What the claim's put could not do (index its key, run `onClaimed`) reaches the completion
 * through the snapshot's `landing`.
 */

/** A tiny window, so a few turns of echo overflow it: prompt limit 1000 - 200 = 800 tokens. */
const BUDGET = { context_limit: 1000, response_reserve: 200 };
const input = (index: number) => `turn ${index} ${'w'.repeat(600)}`;

/**
 * Finds, on a first session, the turn whose prompt moves something (`moved`), then runs the
 * same turns on `s1` with that one failing at its model call (a summary call still answers).
 * Returns what the moving turn answered on the first session and the failed turn's completion.
 */
async function failTheMovingTurn(strategies: string, moved: (response: TurnResponse) => boolean) {
  let failing = false;
  const model = hookedEcho('echo', async (request) => {
    const first = request.prompt[0];
    const summary = first?.type === 'message' && first.content === DEFAULT_SUMMARY_PROMPT;
    if (failing && !summary) throw new Error('the model is down');
  });
  const store = new MemoryStore();
  const { sessions, services } = turnWorld(store, model);
  const create = (id: string) => sessions.create({ id, model: 'echo', strategies, strategy_config: BUDGET });
  await create('probe');
  let moving: { turn: number; response: TurnResponse } | undefined;
  for (let turn = 1; !moving; turn++) {
    if (turn > 40) throw new Error('no turn moved anything');
    const response = await runTurn(services, 'probe', { input: input(turn) });
    if (moved(response)) moving = { turn, response };
  }
  await create('s1');
  for (let turn = 1; turn < moving.turn; turn++) await runTurn(services, 's1', { input: input(turn) });
  failing = true;
  await expect(runTurn(services, 's1', { input: input(moving.turn) })).rejects.toThrow('the model is down');
  failing = false;
  const keys = (await store.list('sessions/s1/turn/')).objects.map((object) => object.key);
  const dones = await Promise.all(
    keys
      .filter((key) => key.endsWith('.done'))
      .map(
        async (key) => JSON.parse(new TextDecoder().decode((await store.get(key))!.body)) as Record<string, unknown>,
      ),
  );
  const failed = dones.filter((done) => done.status === 'failed');
  expect(failed).toHaveLength(1);
  return { moving, failed: failed[0]!, sessions, services };
}

describe("a failed turn's close", () => {
  it('commits the context start its compaction stored', async () => {
    const { moving, failed, sessions, services } = await failTheMovingTurn(
      'compact,inbox',
      (response) => response.context.compaction !== undefined,
    );
    const { start_seq } = moving.response.context.compaction!;
    expect(failed.context).toMatchObject({ start_seq });
    expect(await sessions.currentContext('s1')).toMatchObject({ start_seq });
    const next = await runTurn(services, 's1', { input: 'after the failure' });
    expect(next.context.context_start_seq).toBe(start_seq);
  });

  it('stores the overflow boundary its fitted prompt moved', async () => {
    const { moving, failed } = await failTheMovingTurn(
      'inbox',
      (response) => response.context.overflow_dropped?.moved === true,
    );
    const { tool_start_seq, message_start_seq } = moving.response.context.overflow_dropped!;
    expect(failed.overflow).toEqual({ tool_start_seq, message_start_seq, turn: moving.turn });
  });
});

describe("what the claim's put could not do, the completion does", () => {
  it("indexes the key when the claim's `idem/` put failed: the key is replayed after later records", async () => {
    const faulty = new FaultyStore(new MemoryStore()).failWhen(
      ({ operation, key }) => operation === 'put' && key.includes('/idem/'),
      { times: 1 },
    );
    const log = new SessionLog(faulty);
    await log.create({ id: 's1' });
    const input = [{ type: 'message' as const, role: 'user' as const, content: 'once' }];
    const begun = await log.beginTurn('s1', { input, idempotencyKey: 'k1' });
    if (begun.kind !== 'claimed') throw new Error('not claimed');
    expect(faulty.injected).toBe(1);
    await log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {}, response: { answer: 1 } });
    await log.append('s1', [{ type: 'message', role: 'user', content: 'later' }]);
    expect(await log.beginTurn('s1', { input, idempotencyKey: 'k1' })).toMatchObject({
      kind: 'replay',
      turn: 1,
      response: { answer: 1 },
    });
  });

  it('runs `onClaimed` again, before the completion, only when it failed at the claim', async () => {
    for (const fails of [true, false]) {
      const store = new MemoryStore();
      // For each call: whether the turn's completion was there already.
      const calls: boolean[] = [];
      const log = new SessionLog(store, {
        onClaimed: async () => {
          calls.push((await store.list('sessions/s1/turn/')).objects.some((object) => object.key.endsWith('.done')));
          if (fails && calls.length === 1) throw new Error('the outbox is down');
        },
      });
      await log.create({ id: 's1' });
      const begun = await log.beginTurn('s1', { input: [] });
      if (begun.kind !== 'claimed') throw new Error('not claimed');
      await log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {} });
      expect(calls).toEqual(fails ? [false, false] : [false]);
    }
  });
});

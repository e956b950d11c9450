import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import type { Model, ModelRequest } from '../../lib/models/model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { packOptions, runTurn, sessionStrategyPlan, type TurnRequest } from '../../lib/turn/index.ts';
import { parseView } from '../support/stored-view.ts';
import { CountingStore } from '../support/counting-store.ts';
import { servicesFor } from '../support/recording-model.ts';
import { SessionLog } from '../support/session-log.ts';
import { answeringModel, CODE, WholeHistoryLog } from '../support/overflow-session.ts';

/**
 * The overflow safety net on a long session (lib/compaction/fit-prompt.ts): once its boundary
 * is stored, a turn reads the history from the boundary on (lib/session/log/views.ts
 * `fromBoundary`), so what it reads and builds is bounded by the window, not the history.
 * The history is an agent's: user and assistant messages around tool calls, messages most of
 * what the strategies keep.
 */

const LIMIT = 12_000;

function services(store: CountingStore, model: Model, whole: boolean) {
  // One instant for every item, so the two ways of reading give the same bytes.
  const options = { clock: () => new Date('2026-01-01T00:00:00Z') };
  return servicesFor(new (whole ? WholeHistoryLog : SessionLog)(store, options), store, model);
}

/**
 * `rounds` rounds of an agent's work: a user message, ten calls with their outputs (every
 * third call repeats an earlier one), an assistant message.
 */
function agentHistory(from: number, rounds: number): Item[] {
  const text = (round: number, who: string) => `${who} ${round}: ${'the build step and its logs '.repeat(14)}`;
  return Array.from({ length: rounds }, (_, index): Item[] => {
    const round = from + index;
    const calls = Array.from({ length: 10 }, (_, call): Item[] => {
      const n = round * 10 + call;
      const file = n % 3 === 0 ? n % 40 : n;
      return [
        { type: 'function_call', call_id: `c${n}`, name: 'read_file', arguments: `{"path":"f${file}.ts"}` },
        { type: 'function_call_output', call_id: `c${n}`, output: `f${file}.ts at ${n}\n${CODE}` },
      ];
    });
    return [
      { type: 'message', role: 'user', content: text(round, 'user') },
      ...calls.flat(),
      { type: 'message', role: 'assistant', content: text(round, 'assistant') },
    ];
  }).flat();
}

/** Session `s1` with a window of LIMIT tokens, its services, and the prompts its model gets. */
async function newSession(whole: boolean) {
  const store = new CountingStore(new MemoryStore());
  const prompts: ModelRequest[] = [];
  const service = services(store, answeringModel(prompts), whole);
  const session = await service.sessions.create({
    id: 's1',
    instructions: 'You are a coding agent.',
    strategy_config: { context_limit: LIMIT },
  });
  return { store, prompts, service, session };
}

/**
 * A session of `rounds` rounds (appended in bulk and packed), then `turns` turns: each turn's
 * cost, and the prompts the model got. `whole`: every turn reads the whole history.
 */
async function longSession(rounds: number, turns: number, whole = false) {
  const { store, prompts, service, session } = await newSession(whole);
  for (let round = 0; round < rounds; round += 200)
    await service.sessions.append('s1', agentHistory(round, Math.min(200, rounds - round)));
  await service.sessions.pack('s1', { ...packOptions(sessionStrategyPlan({}, session)), refresh: true });
  const costs: { bytesRead: number; promptBytes: number; tokensBefore: number | undefined; moved: boolean }[] = [];
  let lastToolStart: number | undefined;
  for (let turn = 0; turn < turns; turn++) {
    store.reset();
    const response = await runTurn(service, 's1', {
      input: [{ type: 'message', role: 'user', content: `next step ${turn}` }],
    });
    const { bytesRead } = store.counts;
    const dropped = response.context.overflow_dropped;
    lastToolStart = dropped?.tool_start_seq;
    costs.push({
      bytesRead,
      promptBytes: JSON.stringify(prompts.at(-1)!.prompt).length,
      tokensBefore: dropped?.prompt_tokens_before,
      moved: dropped?.moved ?? false,
    });
    // Packing (and a fresh view after the boundary moved) runs after each turn, as waitUntil would.
    await service.settle();
  }
  // A fresh view, written under the boundary the last turn left.
  await service.sessions.pack('s1', { ...packOptions(sessionStrategyPlan({}, session)), refresh: true });
  return Object.assign(costs, { prompts, store, toolStart: lastToolStart });
}

/** The newest view of session `s1` (packed after the last turn). */
async function newestView(store: CountingStore) {
  const listed = await store.list('sessions/s1/turn/');
  const key = listed.objects.map((object) => object.key).find((name) => name.endsWith('.view'))!;
  return parseView(key, (await store.get(key))!.body);
}

describe('the overflow safety net on a long session', () => {
  it('reads and builds only the window once the boundary is stored, however long the history', async () => {
    const [short, long] = [await longSession(100, 4), await longSession(1_000, 4)];
    for (const costs of [short, long]) {
      // The first turn finds no boundary: it builds the whole prompt and moves one.
      expect(costs[0]!.moved).toBe(true);
      for (const cost of costs.slice(2)) {
        expect(cost.moved).toBe(false);
        // The window's messages and the tool calls the strategies need (those the safety net
        // drops read compacted), not the history the first turn read.
        expect(cost.bytesRead).toBeLessThan(costs[0]!.bytesRead / 3);
      }
    }
    // Ten times the history: the first turn builds a larger prompt; the later ones read
    // what the shorter session's do.
    expect(long[0]!.tokensBefore).toBeGreaterThan(2 * short[0]!.tokensBefore!);
    // The filters of the repeat index's shards, which grow with the distinct calls of the history.
    const filters = JSON.stringify((await newestView(long.store)).keys.filters ?? {}).length;
    for (let turn = 2; turn < 4; turn++) {
      // What the prompt before the drop counts is the window from the boundary (and the tool
      // calls the strategies need), not the history.
      expect(long[turn]!.tokensBefore).toBeLessThan(1.2 * short[turn]!.tokensBefore!);
      // (The bytes' slack: what the longer history's view holds more beside its tail, 26 KB, and
      // its shards' filters.)
      expect(long[turn]!.bytesRead).toBeLessThan(1.2 * short[turn]!.bytesRead + 16 * 1024 + filters);
    }
  }, 120_000);

  it('keeps in a view only the place of the tool items behind the boundary', async () => {
    const session = await longSession(200, 3);
    const toolStart = session.toolStart!;
    const items = (await newestView(session.store)).tail!.items;
    // Calls older than the boundary and answered before it, with their outputs (the safety
    // net keeps a call whose output comes in the newest turn).
    const answeredLate = new Set(
      items.flatMap((item) => (item.type === 'function_call_output' && item.seq >= toolStart ? [item.call_id] : [])),
    );
    const behind = items.filter(
      (item) => item.type !== 'message' && item.seq < toolStart && !answeredLate.has(item.call_id),
    );
    expect(behind.length).toBeGreaterThan(100);
    for (const item of behind)
      expect(item).toMatchObject(
        item.type === 'function_call' ? { arguments: '', behind: true } : { output: '', behind: true },
      );
    // The window's tool items are as the strategies need them.
    expect(items.filter((item) => !behind.includes(item) && 'behind' in item)).toEqual([]);
  }, 120_000);

  it('sends the prompts a read of the whole history gives, byte for byte', async () => {
    const [window, whole] = [await longSession(200, 5), await longSession(200, 5, true)];
    expect(window.prompts.map((prompt) => JSON.stringify(prompt))).toEqual(
      whole.prompts.map((prompt) => JSON.stringify(prompt)),
    );
    // Only what the report counts before the drop differs: the window, not the history.
    expect(window[0]).toEqual(whole[0]);
    for (let turn = 2; turn < 5; turn++) expect(window[turn]!.tokensBefore).toBeLessThan(whole[turn]!.tokensBefore!);
  }, 120_000);
});

describe('an open call older than the overflow boundary', () => {
  const BUILD = { name: 'run_build', arguments: JSON.stringify({ target: 'all', flags: CODE }) };

  /**
   * The prompts of a session whose call `build` (seq 2, or 4 after an earlier instance of the
   * same call) stays open while the boundary moves past it, until its output comes as a turn's
   * input: the safety net keeps a call whose output is in the newest turn. The repeated call
   * is older than the tail the strategies need (300 calls after it): only its protection
   * keeps it, and a read from the boundary does not pin it.
   */
  async function answeredLate(whole: boolean, repeat: boolean) {
    const { prompts, service, session } = await newSession(whole);
    const earlier: Item[] = repeat
      ? [
          { type: 'function_call', call_id: 'first', ...BUILD },
          { type: 'function_call_output', call_id: 'first', output: 'build failed' },
        ]
      : [];
    await service.sessions.append('s1', [
      { type: 'message', role: 'user', content: 'Start the long build, then read the sources.' },
      ...earlier,
      { type: 'function_call', call_id: 'build', ...BUILD },
      ...agentHistory(0, repeat ? 30 : 3),
    ]);
    const plan = packOptions(sessionStrategyPlan({}, session));
    await service.sessions.pack('s1', { ...plan, refresh: true });
    const boundaries: (number | undefined)[] = [];
    const turn = async (input: TurnRequest['input']) => {
      const response = await runTurn(service, 's1', { input });
      boundaries.push(response.context.overflow_dropped?.tool_start_seq);
      await service.settle();
    };
    await turn([{ type: 'message', role: 'user', content: 'next step' }]);
    await turn([{ type: 'message', role: 'user', content: 'and the one after' }]);
    // The view the last turn reads is written under the boundary: it holds the call compacted.
    await service.sessions.pack('s1', { ...plan, refresh: true });
    await turn([{ type: 'function_call_output', call_id: 'build', output: `build finished\n${CODE}` }]);
    const build = prompts.at(-1)!.prompt.find((item) => item.type === 'function_call' && item.call_id === 'build');
    return { prompts: prompts.map((prompt) => JSON.stringify(prompt)), boundaries, build };
  }

  it.each([
    ['a call the strategies keep whole', false],
    ['the newest instance of a repeated call', true],
  ])(
    'reaches the prompt whole with its output when it is %s, as from the whole history',
    async (_, repeat) => {
      const [window, whole] = [await answeredLate(false, repeat), await answeredLate(true, repeat)];
      // The call is behind the boundary when its output comes.
      expect(window.boundaries[2]).toBeGreaterThan(4);
      expect(window.boundaries).toEqual(whole.boundaries);
      expect(window.build).toMatchObject(BUILD);
      expect(window.build).not.toHaveProperty('compacted');
      expect(window.prompts).toEqual(whole.prompts);
    },
    120_000,
  );
});

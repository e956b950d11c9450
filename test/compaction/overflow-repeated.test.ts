import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import type { ModelRequest } from '../../lib/models/model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { compactSession } from '../../lib/turn/compact-session.ts';
import { computeAggregates, type SequencedItem } from '../../lib/strategies/aggregates.ts';
import { packOptions, previewPrompt, runTurn, sessionStrategyPlan, type TurnRequest } from '../../lib/turn/index.ts';
import { parseView } from '../support/stored-view.ts';
import { CountingStore } from '../support/counting-store.ts';
import { servicesFor } from '../support/recording-model.ts';
import { SessionLog } from '../support/session-log.ts';
import { answeringModel, CODE, WholeHistoryLog } from '../support/overflow-session.ts';

/**
 * A view written under an overflow boundary keeps of its aggregates' `repeated` only the
 * entries a read from the boundary can meet, and names an object holding the older ones
 * (lib/session/log/older-repeated.ts): a turn under the boundary reads and parses only those,
 * and a read that meets older seqs (`truncation`, a preview, an output answering a call the
 * window lacks) reads the object too, or the log when it is gone. Every prompt is the one a
 * read of the whole history gives.
 */

const LIMIT = 12_000;

/**
 * `rounds` rounds of an agent's work: a user message, ten calls with their outputs (five read a
 * file for the first time, five read again one the round before read: every call key repeats
 * once, so `repeated` grows with the history), an assistant message.
 */
function agentHistory(rounds: number): Item[] {
  const text = (round: number, who: string) => `${who} ${round}: ${'the build step and its logs '.repeat(14)}`;
  return Array.from({ length: rounds }, (_, round): Item[] => {
    const calls = Array.from({ length: 10 }, (_, call): Item[] => {
      const file = call < 5 ? round * 5 + call : Math.max(0, round - 1) * 5 + call - 5;
      const id = `c${round * 10 + call}`;
      return [
        { type: 'function_call', call_id: id, name: 'read_file', arguments: `{"path":"f${file}.ts"}` },
        { type: 'function_call_output', call_id: id, output: `f${file}.ts at ${round}\n${CODE}` },
      ];
    });
    return [
      { type: 'message', role: 'user', content: text(round, 'user') },
      ...calls.flat(),
      { type: 'message', role: 'assistant', content: text(round, 'assistant') },
    ];
  }).flat();
}

const ROUNDS = 150;
const PROTECTED_CALL = { name: 'run_build', arguments: JSON.stringify({ target: 'all' }) };

/**
 * Session `s1` of ROUNDS rounds under a window of LIMIT tokens, its first instance of the call
 * `build` answered, its newest (seq 4) still open behind the boundary; then `steps` of turns.
 * `whole`: every turn reads the whole history.
 */
async function session(whole: boolean) {
  const store = new CountingStore(new MemoryStore());
  const prompts: ModelRequest[] = [];
  const options = { clock: () => new Date('2026-01-01T00:00:00Z') };
  const service = servicesFor(
    new (whole ? WholeHistoryLog : SessionLog)(store, options),
    store,
    answeringModel(prompts),
  );
  const created = await service.sessions.create({
    id: 's1',
    instructions: 'You are a coding agent.',
    strategy_config: { context_limit: LIMIT },
  });
  const history: Item[] = [
    { type: 'function_call', call_id: 'first', ...PROTECTED_CALL },
    { type: 'function_call_output', call_id: 'first', output: 'build failed' },
    { type: 'function_call', call_id: 'build', ...PROTECTED_CALL },
    ...agentHistory(ROUNDS),
  ];
  for (let at = 0; at < history.length; at += 500) await service.sessions.append('s1', history.slice(at, at + 500));
  const plan = packOptions(sessionStrategyPlan({}, created));
  await service.sessions.pack('s1', { ...plan, refresh: true });
  const costs: { bytesRead: number; toolStart: number | undefined }[] = [];
  const turn = async (request: TurnRequest) => {
    store.reset();
    const response = await runTurn(service, 's1', request);
    costs.push({ bytesRead: store.counts.bytesRead, toolStart: response.context.overflow_dropped?.tool_start_seq });
    await service.settle();
    await service.sessions.pack('s1', { ...plan, refresh: true });
  };
  return { store, prompts, service, history, costs, turn };
}

async function newestView(store: CountingStore) {
  const listed = await store.list('sessions/s1/turn/');
  const key = listed.objects.map((object) => object.key).find((name) => name.endsWith('.view'))!;
  return parseView(key, (await store.get(key))!.body);
}

async function olderKeys(store: CountingStore): Promise<string[]> {
  return (await store.list('sessions/s1/keys/')).objects
    .map((object) => object.key)
    .filter((key) => key.includes('-repeated-'));
}

const next = (step: number): TurnRequest => ({ input: [{ type: 'message', role: 'user', content: `next ${step}` }] });

describe('the repeated calls of a long session under the overflow boundary', () => {
  it('are read from the boundary on by a turn, and whole by a read that meets older calls', async () => {
    const window = await session(false);
    await window.turn(next(0));
    await window.turn(next(1));
    const view = await newestView(window.store);
    const toolStart = window.costs.at(-1)!.toolStart!;
    const split = view.aggregates.repeated_older!;
    // Split at or before the boundary's tool start and the tail's start, and only the entries
    // from there on kept: a few of the 750 keys.
    expect(split.before_seq).toBeLessThanOrEqual(Math.min(toolStart, view.tail!.from_seq));
    const kept = [...view.aggregates.repeated.entries()].map(([, seq]) => seq);
    expect(kept.every((seq) => seq >= split.before_seq)).toBe(true);
    expect(kept.length).toBeLessThan(150);
    expect(await olderKeys(window.store)).toHaveLength(1);
    // The next turn reads the view and not the older entries.
    await window.turn(next(2));
    const reads = window.costs.at(-1)!.bytesRead;
    // With them: the preview (GET /prompt) of the next turn shows the prompt it sends.
    const preview = await previewPrompt(window.service, 's1', {});
    await window.turn({ input: [] });
    expect(JSON.stringify(window.prompts.at(-1)!.prompt)).toEqual(JSON.stringify(preview.items));
    // A turn without the boundary, and one whose output answers the call behind it.
    await window.turn({ ...next(3), truncation: 'auto' });
    await window.turn({ input: [{ type: 'function_call_output', call_id: 'build', output: 'build finished' }] });
    const whole = await session(true);
    for (const request of [next(0), next(1), next(2), { input: [] }, { ...next(3), truncation: 'auto' as const }])
      await whole.turn(request);
    await whole.turn({ input: [{ type: 'function_call_output', call_id: 'build', output: 'build finished' }] });
    expect(window.prompts.map((prompt) => JSON.stringify(prompt))).toEqual(
      whole.prompts.map((prompt) => JSON.stringify(prompt)),
    );
    expect(reads).toBeLessThan(whole.costs[2]!.bytesRead);
    // The view's aggregates with the older entries are those of the whole history.
    const items = window.history.map((item, index) => ({ ...item, seq: index + 1 }) as SequencedItem);
    const reference = computeAggregates(items);
    expect(reference.repeated.size).toBeGreaterThan(700);
    expect(reference.repeated.toJSON()).toMatchObject(view.aggregates.repeated.toJSON());
  }, 120_000);

  it('are whole again in the view after a compaction, their object deleted once that view is stored', async () => {
    const window = await session(false);
    await window.turn(next(0));
    await window.turn(next(1));
    expect(await olderKeys(window.store)).toHaveLength(1);
    await compactSession(window.service, 's1', { keep_tokens: 0 });
    await window.turn(next(2));
    const view = await newestView(window.store);
    expect(view.aggregates.repeated_older).toBeUndefined();
    expect(await olderKeys(window.store)).toEqual([]);
    const items = window.history.map((item, index) => ({ ...item, seq: index + 1 }) as SequencedItem);
    expect(view.aggregates.repeated).toEqual(computeAggregates(items).repeated);
  }, 120_000);

  it('are read from the log up to the view when their object is gone and a segment reaches past the view', async () => {
    const window = await session(false);
    await window.turn(next(0));
    await window.turn(next(1));
    const view = await newestView(window.store);
    expect(view.aggregates.repeated_older).toBeDefined();
    // Appends after the view calling files read long ago, packed into a segment that reaches past
    // the view's record (as packs leave it between two views), no view due.
    const writer = new SessionLog(window.store, { packMinRecords: 1, viewEveryRecords: 8 });
    for (let n = 0; n < 4; n++)
      await writer.append('s1', [
        { type: 'function_call', call_id: `x${n}`, name: 'read_file', arguments: `{"path":"f${n}.ts"}` },
        { type: 'function_call_output', call_id: `x${n}`, output: `again ${n}` },
      ]);
    expect((await writer.pack('s1', {})).through).toBeGreaterThan(view.record);
    const requirement = () => ({ toolCalls: 3, seqs: [], wholeCalls: 2 });
    const aggregates = async () => (await new SessionLog(window.store).previewContext('s1', requirement)).aggregates;
    const withObject = await aggregates();
    // Every call the log holds, counted once.
    let calls = 0;
    for (let before: number | undefined, more = true; more; ) {
      const page = await writer.listItems('s1', { limit: 1000, ...(before ? { before } : {}) });
      calls += page.items.filter((item) => item.type === 'function_call').length;
      [before, more] = [page.next_before ?? undefined, page.has_more];
    }
    expect(withObject.tool_calls).toBe(calls);
    await window.store.delete(await olderKeys(window.store));
    expect(await aggregates()).toEqual(withObject);
  }, 120_000);

  it('are read from the log when their object is gone, giving the same prompts', async () => {
    const prompts: string[][] = [];
    for (const drop of [false, true]) {
      const window = await session(false);
      await window.turn(next(0));
      await window.turn(next(1));
      const keys = await olderKeys(window.store);
      expect(keys).toHaveLength(1);
      if (drop) await window.store.delete(keys);
      await window.turn({ ...next(2), truncation: 'auto' });
      prompts.push(window.prompts.map((prompt) => JSON.stringify(prompt)));
    }
    expect(prompts[1]).toEqual(prompts[0]);
  }, 120_000);
});

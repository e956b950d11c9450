import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { truncatePrompt } from '../../lib/compaction/index.ts';
import { TailgateError } from '../../lib/errors.ts';
import type { ClientItem, PromptItem } from '../../lib/items.ts';
import type { Model, ModelRequest, ModelResult } from '../../lib/models/model.ts';
import { recordSchema } from '../../lib/session/records.ts';
import { recordingModel, servicesFor } from '../support/recording-model.ts';
import { SessionLog } from '../support/session-log.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { approximateTokenCounter, countPromptTokens, promptItemTokens } from '../../lib/tokens/token-counter.ts';
import { runTurn, type TurnResponse } from '../../lib/turn/index.ts';

/**
 * The overflow safety net (lib/compaction/fit-prompt.ts) in a long tool loop: a model no
 * family matches gets the fallback window (32,768 tokens, 4,096 kept for the answer), every
 * turn answers a call with a 2 KB output, the default strategies run.
 */

/** An agent that calls a tool on every turn, each call new; it records every prompt it gets. */
function toolLoopModel(prompts: ModelRequest[]): Model {
  let calls = 0;
  const result = (): ModelResult => {
    calls += 1;
    return {
      output: [
        {
          type: 'function_call',
          call_id: `call_${calls}`,
          name: 'read_file',
          arguments: `{"path":"src/f${calls}.ts"}`,
        },
      ],
      usage: { input_tokens: 0, output_tokens: 0 },
    };
  };
  return recordingModel(prompts, result);
}

function services(store: ObjectStore, model: Model) {
  return servicesFor(new SessionLog(store), store, model);
}

/** ~2 KB of tool output, different for each call. */
function output(call: number): string {
  return Array.from({ length: 64 }, (_, line) => `f${call}.ts:${line} const v${line} = ${call * line};`)
    .join('\n')
    .padEnd(2048, '.')
    .slice(0, 2048);
}

function promptText(items: readonly PromptItem[]): string[] {
  return items.map((item) => JSON.stringify(item));
}

interface LoopResult {
  responses: TurnResponse[];
  refused: { turn: number; code: string }[];
  prompts: ModelRequest[];
}

/** Drives `turns` turns of the tool loop; a refused turn's call is answered again by the next. */
async function toolLoop(
  turns: number,
  options: {
    store?: ObjectStore;
    truncation?: 'auto' | 'disabled';
    stopAtRefusal?: boolean;
    /** Continue the session: the call to answer first (else a new session starts). */
    answer?: string;
  } = {},
): Promise<LoopResult> {
  const prompts: ModelRequest[] = [];
  const service = services(options.store ?? new MemoryStore(), toolLoopModel(prompts));
  const id = 's1';
  if (!options.answer) await service.sessions.create({ id, instructions: 'You are a coding agent. Fix the build.' });
  const responses: TurnResponse[] = [];
  const refused: LoopResult['refused'] = [];
  let input: ClientItem[] = options.answer
    ? [{ type: 'function_call_output', call_id: options.answer, output: output(0) }]
    : [{ type: 'message', role: 'user', content: 'The build fails; find out why and fix it.' }];
  for (let turn = 1; turn <= turns; turn++) {
    try {
      const response = await runTurn(service, id, {
        input,
        ...(options.truncation ? { truncation: options.truncation } : {}),
      });
      responses.push(response);
      const call = response.output[0]!;
      if (call.type !== 'function_call') throw new Error('the agent stopped calling tools');
      input = [{ type: 'function_call_output', call_id: call.call_id, output: output(responses.length) }];
    } catch (error) {
      if (!(error instanceof TailgateError)) throw error;
      refused.push({ turn, code: error.code });
      if (options.stopAtRefusal) break;
      // The refused input is stored; the agent goes on with a plain message.
      input = [{ type: 'message', role: 'user', content: `continue (${turn})` }];
    }
    await service.settle();
  }
  return { responses, refused, prompts };
}

/**
 * The share of a prompt's characters that repeat the previous prompt from its start, in whole
 * items (both as promptText serializes them).
 */
function reusedShare(before: readonly string[], after: readonly string[]): number {
  let reused = 0;
  for (let index = 0; index < Math.min(before.length, after.length) && before[index] === after[index]; index++)
    reused += after[index]!.length;
  return reused / after.join('').length;
}

describe('the overflow safety net', () => {
  // The 1,000-turn loop runs once; its store is the one the restart test continues. About 20 s
  // of work alone; the bound only catches a hang, with room for a full suite on two cores.
  const store = new MemoryStore();
  let loop: LoopResult;
  beforeAll(async () => {
    loop = await toolLoop(1000, { store });
  }, 600_000);

  it(
    'runs a 1,000-turn tool loop at a 32k window with no 413, ' +
      'moving its boundary rarely and keeping the prefix between moves',
    () => {
      const { responses, refused, prompts } = loop;
      expect(refused).toEqual([]);
      expect(responses).toHaveLength(1000);

      const reports = responses.map((response) => response.context.overflow_dropped);
      const moves = reports.filter((report) => report?.moved).length;
      const firstDrop = reports.findIndex((report) => report !== undefined);
      // Nothing is dropped while the prompt fits; once it does not, every turn reports what it left out.
      expect(firstDrop).toBeGreaterThan(50);
      expect(reports.slice(0, firstDrop).every((report) => report === undefined)).toBe(true);
      expect(reports[firstDrop]).toMatchObject({ moved: true, messages: 0 });
      expect(reports[firstDrop]!.tool_pairs).toBeGreaterThan(0);
      expect(reports[firstDrop]!.prompt_tokens_before).toBeGreaterThan(28_672);
      expect(reports.slice(firstDrop).every((report) => report !== undefined && report.tool_pairs > 0)).toBe(true);
      for (const response of responses) expect(response.context.truncation).toBeUndefined();

      // Every prompt fits the window; the boundary only moves forward.
      const sizes = responses.map((response) => response.context.overflow_dropped?.prompt_tokens ?? 0);
      expect(Math.max(...sizes)).toBeLessThanOrEqual(28_672);
      const starts = reports.flatMap((report) => (report ? [report.tool_start_seq] : []));
      expect(starts).toEqual([...starts].sort((a, b) => a - b));

      // Between moves of either boundary (ours, or the epoch strategy's, seen as a change in
      // what it compacts or drops), each prompt starts with the whole previous one, byte for byte.
      let reused = 0;
      let unmoved = 0;
      // Each prompt is serialized once and compared with the next.
      let before = promptText(prompts[firstDrop]!.prompt);
      for (let turn = firstDrop + 1; turn < responses.length; turn++) {
        const after = promptText(prompts[turn]!.prompt);
        reused += reusedShare(before, after);
        const [previous, current] = [responses[turn - 1]!.context, responses[turn]!.context];
        if (!reports[turn]!.moved && previous.compacted === current.compacted && previous.dropped === current.dropped) {
          unmoved += 1;
          expect(after.slice(0, before.length)).toEqual(before);
        }
        before = after;
      }
      const share = reused / (responses.length - firstDrop - 1);
      expect(moves).toBeLessThan(responses.length / 10);
      // Most turns after the first drop keep the boundary, and their prompt extends the previous one.
      expect(unmoved).toBeGreaterThan((responses.length - firstDrop) * 0.8);
      expect(share).toBeGreaterThan(0.8);
    },
  );

  it('leaves the refusal to truncation "disabled": the same loop ' +
    'is stuck at 413 context_too_large from the turn the window fills', async () => {
    const { responses, refused } = await toolLoop(115, { truncation: 'disabled' });
    // The first refused turn, then every later one: the window never empties by itself.
    expect(refused.length).toBeGreaterThan(0);
    expect(refused[0]!.turn).toBeGreaterThan(100);
    expect(refused.every((refusal) => refusal.code === 'context_too_large')).toBe(true);
    expect(refused.map((refusal) => refusal.turn)).toEqual(
      Array.from({ length: 116 - refused[0]!.turn }, (_, index) => refused[0]!.turn + index),
    );
    expect(responses.every((response) => response.context.overflow_dropped === undefined)).toBe(true);
  }, 60_000);

  it(
    'stores the boundary with the turn that moves it; after a restart ' +
      'the next turn reads it back and keeps the prompt start',
    async () => {
      const first = loop;
      const last = first.responses.at(-1)!;
      const boundary = first.responses.findLast((response) => response.context.overflow_dropped?.moved)!;
      expect(boundary).toBeDefined();
      const { tool_start_seq, message_start_seq } = boundary.context.overflow_dropped!;

      // The newest record carries it, validated as it is read back.
      const keys = (await store.list('sessions/s1/turn/')).objects.map((object) => object.key);
      const newestRecord = keys.find((key) => /\/\d{12}$/.test(key))!;
      const record = recordSchema.parse(JSON.parse(new TextDecoder().decode((await store.get(newestRecord))!.body)));
      expect(record.overflow).toEqual({ tool_start_seq, message_start_seq, turn: boundary.turn });

      // A new process on the same store: the same boundary, not moved, the same prompt start.
      const call = last.output[0]!;
      const next = await toolLoop(1, { store, answer: call.type === 'function_call' ? call.call_id : '' });
      const report = next.responses[0]!.context.overflow_dropped!;
      expect(report).toMatchObject({ tool_start_seq, message_start_seq, moved: false });
      const before = promptText(first.prompts.at(-1)!.prompt);
      const after = promptText(next.prompts[0]!.prompt);
      const stable = first.prompts.at(-1)!.cacheBreakpoint ?? 0;
      expect(after.slice(0, stable + 1)).toEqual(before.slice(0, stable + 1));

      // The inspector shows what the boundary left out as dropped; it stays stored.
      const sessions = new SessionLog(store);
      const seen = (await sessions.getTurn('s1', next.responses[0]!.turn)).receipt!.seen;
      const droppedSeq = report.dropped_seqs[0]!;
      expect(droppedSeq).toBeLessThan(tool_start_seq);
      const run = seen.find((candidate) => candidate.first_seq <= droppedSeq && droppedSeq <= candidate.last_seq);
      expect(run?.treatment).toBe('dropped');
      const items = await sessions.listItems('s1', { before: droppedSeq + 1, limit: 1 });
      expect(items.items[0]!.seq).toBe(droppedSeq);
    },
  );

  it('answers corrupt_object for a stored boundary that fails its schema', async () => {
    const store = new MemoryStore();
    await toolLoop(3, { store });
    const keys = (await store.list('sessions/s1/turn/')).objects.map((object) => object.key);
    const newest = keys.find((key) => /\/\d{12}$/.test(key))!;
    const record = JSON.parse(new TextDecoder().decode((await store.get(newest))!.body));
    // The message boundary past the tool boundary cannot have been written.
    await store.put(
      newest,
      JSON.stringify({ ...record, overflow: { tool_start_seq: 2, message_start_seq: 5, turn: 1 } }),
    );
    const service = services(store, toolLoopModel([]));
    const refused = await runTurn(service, 's1', { input: 'go on' }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(TailgateError);
    expect((refused as TailgateError).code).toBe('corrupt_object');
  });

  it('still refuses with 413 a newest user turn that does not fit alone, whatever it could drop', async () => {
    const store = new MemoryStore();
    const { responses } = await toolLoop(20, { store });
    const prompts: ModelRequest[] = [];
    const service = services(store, toolLoopModel(prompts));
    const call = responses.at(-1)!.output[0]!;
    const huge = await runTurn(service, 's1', {
      input: [
        { type: 'function_call_output', call_id: call.type === 'function_call' ? call.call_id : '', output: 'done' },
        { type: 'message', role: 'user', content: 'x'.repeat(4 * 30_000) },
      ],
    }).catch((error: unknown) => error);
    expect(huge).toBeInstanceOf(TailgateError);
    expect(huge).toMatchObject({ code: 'context_too_large' });
    // The next turn goes on: the refused input, stored but no longer the newest turn, is dropped.
    const next = await runTurn(service, 's1', { input: 'smaller, then' });
    expect(next.context.overflow_dropped).toMatchObject({ moved: true });
    expect(next.context.overflow_dropped!.messages).toBeGreaterThan(0);
    // The instructions stay first; the newest turn is whole.
    expect(prompts[0]!.prompt[0]).toMatchObject({ role: 'system', content: 'You are a coding agent. Fix the build.' });
    expect(prompts[0]!.prompt.at(-1)).toMatchObject({ role: 'user', content: 'smaller, then' });
  });

  describe('truncatePrompt with a boundary', () => {
    const text = (letter: string) => letter.repeat(400);
    const prompt: PromptItem[] = [
      { type: 'message', role: 'system', content: 'instructions' },
      { type: 'message', role: 'user', content: text('a'), seq: 1 },
      { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}', seq: 2 },
      { type: 'function_call_output', call_id: 'c1', output: text('b'), seq: 3 },
      { type: 'message', role: 'assistant', content: text('c'), seq: 4 },
      { type: 'function_call', call_id: 'c2', name: 'f', arguments: '{}', seq: 5 },
      { type: 'function_call_output', call_id: 'c2', output: text('d'), seq: 6 },
      { type: 'message', role: 'user', content: 'next', seq: 7 },
    ];
    const tokens = countPromptTokens(prompt, [], approximateTokenCounter);
    const budget = (promptLimit: number) => ({
      contextLimit: promptLimit,
      responseReserve: 0,
      promptLimit,
      counter: approximateTokenCounter,
    });
    const seqs = (items: PromptItem[]) => items.map((item) => item.seq ?? 0);

    it('drops past the limit down to the target, pairs first, and says where the prompt now starts', () => {
      const pairs = truncatePrompt(prompt, [], budget(tokens - 50), undefined, {
        target: tokens - 150,
        boundary: null,
      });
      expect(seqs(pairs.prompt)).toEqual([0, 1, 4, 7]);
      expect(pairs.boundary).toEqual({ tool_start_seq: 6, message_start_seq: 1 });
      const messages = truncatePrompt(prompt, [], budget(tokens - 50), undefined, { target: 50, boundary: null });
      // The instructions and the newest user turn stay; the message boundary never passes the tool boundary.
      expect(seqs(messages.prompt)).toEqual([0, 7]);
      expect(messages.boundary).toEqual({ tool_start_seq: 6, message_start_seq: 5 });
      expect(messages.truncation).toMatchObject({ tool_pairs: 2, messages: 2, dropped_seqs: [1, 2, 3, 4, 5, 6] });
    });

    it('applies a stored boundary to a prompt that fits, and leaves it where it is', () => {
      const kept = truncatePrompt(prompt, [], budget(tokens), undefined, {
        target: 1,
        boundary: { tool_start_seq: 3, message_start_seq: 1 },
      });
      expect(seqs(kept.prompt)).toEqual([0, 1, 4, 5, 6, 7]);
      expect(kept.boundary).toEqual({ tool_start_seq: 3, message_start_seq: 1 });
      expect(kept.truncation).toMatchObject({ tool_pairs: 1, messages: 0, prompt_tokens_before: tokens });
    });

    it("counts the result's tokens as countPromptTokens does, or refuses it; a call goes with its outputs", () => {
      const tool = { type: 'function' as const, name: 'f', description: 'd', parameters: { type: 'object' } };
      // Messages and tool calls with zero to two outputs, in seq order, the instructions first.
      const step = fc.oneof(
        fc
          .tuple(fc.constantFrom('user', 'assistant'), fc.string({ maxLength: 80 }))
          .map(([role, content]) => [{ type: 'message', role, content } as PromptItem]),
        fc
          .tuple(fc.string({ maxLength: 40 }), fc.array(fc.string({ maxLength: 200 }), { maxLength: 2 }))
          .map(([args, outputs]) => [
            { type: 'function_call', call_id: 'c', name: 'f', arguments: args } as PromptItem,
            ...outputs.map((output) => ({ type: 'function_call_output', call_id: 'c', output }) as PromptItem),
          ]),
      );
      fc.assert(
        fc.property(
          fc.array(step, { size: 'max', maxLength: 30 }),
          fc.boolean(),
          fc.double({ min: 0.05, max: 1.2, noNaN: true }),
          fc.double({ min: 0, max: 1, noNaN: true }),
          fc.option(fc.tuple(fc.nat(40), fc.nat(40)), { nil: undefined }),
          (steps, withTools, limitShare, targetShare, stored) => {
            // Call ids come again (a session may use one again once its call is answered).
            let call = 0;
            const items = steps.flatMap((group) => {
              call += 1;
              return group.map((item) => ('call_id' in item ? { ...item, call_id: `c${call % 3}` } : item));
            });
            const all = [prompt[0]!, ...items].map((item, index) => ({ ...item, seq: index }) as PromptItem);
            const tools = withTools ? [tool] : [];
            const total = countPromptTokens(all, tools, approximateTokenCounter);
            const limit = Math.max(1, Math.floor(total * limitShare));
            const options = {
              target: Math.floor(limit * targetShare),
              ...(stored ? { boundary: { tool_start_seq: stored[0], message_start_seq: stored[1] } } : {}),
            };
            let cut: ReturnType<typeof truncatePrompt>;
            try {
              cut = truncatePrompt(all, tools, budget(limit), undefined, options);
            } catch (error) {
              expect(error).toMatchObject({ code: 'context_too_large' });
              return;
            }
            const counted = countPromptTokens(cut.prompt, tools, approximateTokenCounter);
            expect(cut.promptTokens).toBe(counted);
            // An output answers the latest call before it with its id: both stay or both go.
            const kept = new Set(cut.prompt);
            const latest = new Map<string, PromptItem>();
            for (const item of all) {
              if (item.type === 'function_call') latest.set(item.call_id, item);
              else if (item.type === 'function_call_output' && latest.has(item.call_id))
                expect(kept.has(item)).toBe(kept.has(latest.get(item.call_id)!));
            }
            expect(counted).toBeLessThanOrEqual(limit);
            // The messages older than a stored boundary's message start go uncounted, nor their tokens.
            const itemTokens = promptItemTokens(all, approximateTokenCounter);
            const unread = all.flatMap((item, index) =>
              index > 0 && stored && item.type === 'message' && item.seq! < stored[1] ? [index] : [],
            );
            const uncounted = unread.reduce((sum, index) => sum + itemTokens[index]!, 0);
            if (cut.truncation) {
              expect(cut.truncation.prompt_tokens).toBe(counted);
              expect(cut.truncation.prompt_tokens_before).toBe(total - uncounted);
            } else expect(cut.prompt).toEqual(all.filter((_, index) => !unread.includes(index)));
          },
        ),
        { numRuns: 400 },
      );
    });

    it('drops a call with the outputs that answer it, when a call_id comes again', () => {
      const reused: PromptItem[] = [
        prompt[0]!,
        { type: 'message', role: 'user', content: 'a'.repeat(400), seq: 1 },
        { type: 'function_call', call_id: 'c', name: 'f', arguments: '{}', seq: 2 },
        { type: 'function_call_output', call_id: 'c', output: 'b'.repeat(400), seq: 3 },
        { type: 'function_call', call_id: 'c', name: 'f', arguments: '{}', seq: 4 },
        { type: 'function_call_output', call_id: 'c', output: 'd'.repeat(400), seq: 5 },
        { type: 'message', role: 'user', content: 'e'.repeat(400), seq: 6 },
      ];
      const total = countPromptTokens(reused, [], approximateTokenCounter);
      // Only the first pair goes: the second call keeps its output.
      const one = truncatePrompt(reused, [], budget(total - 50), undefined, { target: total - 50, boundary: null });
      expect(seqs(one.prompt)).toEqual([0, 1, 4, 5, 6]);
      expect(one.promptTokens).toBe(countPromptTokens(one.prompt, [], approximateTokenCounter));
      // Everything that may go gone, the prompt still does not fit: refused, not sent.
      expect(() => truncatePrompt(reused, [], budget(100), undefined, { target: 60, boundary: null })).toThrow(
        expect.objectContaining({ code: 'context_too_large' }),
      );
    });

    it('keeps the newest turn from keepFromSeq on, even when its last user message is older', () => {
      const loop = prompt.slice(0, 7);
      const loopTokens = countPromptTokens(loop, [], approximateTokenCounter);
      // Without it, everything after the only user message is the newest turn: nothing can go.
      expect(() => truncatePrompt(loop, [], budget(loopTokens - 50), undefined, { boundary: null })).toThrow(
        expect.objectContaining({ code: 'context_too_large' }),
      );
      const cut = truncatePrompt(loop, [], budget(loopTokens - 50), undefined, { boundary: null, keepFromSeq: 6 });
      // The call answered by the newest turn stays with its output.
      expect(seqs(cut.prompt)).toEqual([0, 1, 4, 5, 6]);
      expect(cut.boundary).toEqual({ tool_start_seq: 3, message_start_seq: 1 });
    });
  });
});

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TailgateError } from '../../lib/errors.ts';
import type { Item, PromptItem } from '../../lib/items.ts';
import { sha256Hex } from '../../lib/hash.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import {
  countNextPrompt,
  previewPrompt,
  runTurn,
  takeUnderPolicy,
  type TurnResponse,
  type TurnServices,
} from '../../lib/turn/index.ts';
import { approximateTokenCounter, countPromptTokens } from '../../lib/tokens/token-counter.ts';
import { CountingStore } from '../support/counting-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { killedAtCompletion } from '../support/killed-at-completion.ts';
import { recordingEcho, turnWorld, userTexts } from '../support/turn-world.ts';

/**
 * GET /prompt (`previewPrompt`, lib/turn/preview.ts) shows the prompt the next turn sends:
 * over random sessions (messages, tool calls and outputs, calls left open and outputs answering
 * them after other items, earlier turns, notices), strategy
 * lists (the default, with and without `compact`) and windows small enough to overflow, the
 * preview and then a turn (without input) send the model the same items, the preview's
 * `pending` marks aside. A compaction the turn makes shows in the preview as made, with its
 * summary, which only the model writes, pending.
 */

type Step =
  | { kind: 'message'; role: 'user' | 'assistant'; text: string }
  | { kind: 'tool'; output: string }
  /** A call left open (answered by a later `late` step, or never). */
  | { kind: 'open' }
  /** The output of the newest call left open, after other items. */
  | { kind: 'late'; output: string }
  | { kind: 'turn' }
  /**
   * A turn whose process dies as it writes its completion, holding the notices it took, its lease
   * run out: `closed` by a read, or left open for whatever comes next to close (the next turn's
   * claim, when it is the last step: it then dies after the newest user message, which would close it).
   */
  | { kind: 'dead'; closed: boolean }
  | { kind: 'notice'; text: string };

/** The turns' lease (TURN_LEASE_MS), which the clock passes once a turn's process died. */
const LEASE_MS = 30_000;

/** A text of up to `maxLength` characters, long ones included (a short piece repeated). */
const text = (maxLength: number) =>
  fc
    .tuple(fc.string({ minLength: 1, maxLength: 12 }), fc.nat({ max: maxLength }))
    .map(([piece, length]) => piece.repeat(Math.ceil(length / piece.length) || 1).slice(0, Math.max(1, length)));

const stepArbitrary: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('message' as const),
      role: fc.constantFrom('user' as const, 'assistant' as const),
      text: text(2000),
    }),
  },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('tool' as const), output: text(2500) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'open' as const }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('late' as const), output: text(2500) }) },
  { weight: 3, arbitrary: fc.constant({ kind: 'turn' as const }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('dead' as const), closed: fc.boolean() }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('notice' as const), text: text(200) }),
  },
);

const caseArbitrary = fc.record({
  steps: fc.array(stepArbitrary, { size: 'max', minLength: 1, maxLength: 50 }),
  strategies: fc.constantFrom<string[] | null>(
    null,
    ['shorten_tools_epoch_increment', 'compact', 'inbox'],
    ['compact', 'inbox'],
    ['shorten_tools', 'inbox'],
    ['none'],
  ),
  // The window as a share of the history's size (0: the echo model's, which has no limit).
  windowShare: fc.constantFrom(0, 0.2, 0.4, 0.7, 1.1),
  /** The newest user message, as the next turn's input would be; a turn before it, often. */
  last: text(300),
  turnBeforeLast: fc.boolean(),
  instructions: fc.option(text(200), { nil: null }),
  notices: fc.array(text(300), { maxLength: 3 }),
  /**
   * Inputs queued (`on_busy: enqueue`) behind the turn left open by a last `dead` step, while its
   * lease ran: the next claim closes that turn and takes the oldest up first, as its own turn.
   */
  queued: fc.array(text(300), { maxLength: 2 }),
  /**
   * The session's busy policy is `interrupt`: the next turn runs before the queued inputs, and
   * cancels the turn left open when its lease still runs (`live`).
   */
  interrupt: fc.boolean(),
  live: fc.boolean(),
  /** The session's `max_turns` set just before the preview (null: no budget); a spent one refuses the next turn. */
  maxTurns: fc.constantFrom<number | null>(null, null, null, 0, 2, 8),
});

/** What the model reads of an item: no `pending` mark, a pending summary's text unknown. */
function seen(prompt: PromptItem[], pendingSummary: boolean): unknown[] {
  return prompt.map((item) => {
    const { pending: _pending, ...rest } = item;
    return pendingSummary && rest.type === 'message' && rest.synthetic === 'summary' ? { ...rest, content: '' } : rest;
  });
}

/** The error code a call failed with (a turn's failure is the same TailgateError the preview throws). */
async function outcome<T>(call: Promise<T>): Promise<T | { code: string }> {
  try {
    return await call;
  } catch (error) {
    if (error instanceof TailgateError) return { code: error.code };
    throw error;
  }
}

describe('previewPrompt', () => {
  it('shows exactly the prompt the next turn sends: overflow drop, compaction and notices', async () => {
    // Outputs sent whose call a compaction summarized: some runs have them.
    let lateSent = 0;
    // Turns that died holding notices, which a later turn took over: some runs have them, closed
    // before the preview, and left open for the next turn's claim to close.
    let deadHeld = 0;
    let openHeld = 0;
    let queuedFirst = 0;
    // Turns left open whose lease still ran, which the next turn interrupted: some runs have them.
    let interrupted = 0;
    // Next turns a spent budget refused: some runs have them.
    let budgetRefused = 0;
    await fc.assert(
      fc.asyncProperty(
        caseArbitrary,
        async ({
          steps,
          strategies,
          windowShare,
          last,
          turnBeforeLast,
          instructions,
          notices,
          queued,
          interrupt,
          live,
          maxTurns,
        }) => {
          const model = recordingEcho();
          let now = Date.parse('2026-01-01T00:00:00Z');
          const clock = () => new Date(now);
          const store = new MemoryStore({ clock });
          // Queued inputs are taken up as the service takes them; their turns run in `kept`.
          const kept: Promise<unknown>[] = [];
          const settle = async () => {
            for (let rounds = 0; rounds < 20 && kept.length > 0; rounds++) await Promise.all(kept.splice(0));
          };
          const { sessions, inbox, services } = turnWorld(store, model, { clock, leaseMs: LEASE_MS, kept });
          const contextLimit = Math.max(300, Math.floor((windowShare * JSON.stringify(steps).length) / 4));
          await sessions.create({
            id: 's',
            instructions,
            strategies,
            strategy_config: windowShare > 0 ? { context_limit: contextLimit } : {},
            ...(interrupt ? { on_busy: 'interrupt' as const } : {}),
          });
          let posted = 0;
          const post = (content: string) => inbox.post('s', { name: `${posted++}.md`, content });
          // Earlier turns move the overflow boundary, compact, and deliver (or, failing, carry) notices.
          const open: Item[] = [];
          const dies = () =>
            diesHolding(turnWorld(killedAtCompletion(store), model, { clock, leaseMs: LEASE_MS }).services);
          const leftOpen = steps.at(-1)?.kind === 'dead' && !(steps.at(-1) as { closed: boolean }).closed;
          for (const [index, step] of (leftOpen ? steps.slice(0, -1) : steps).entries()) {
            if (step.kind === 'message')
              await sessions.append('s', [{ type: 'message', role: step.role, content: step.text }]);
            if (step.kind === 'tool') await sessions.append('s', toolPair(index, step.output));
            if (step.kind === 'open') {
              open.push(toolPair(index, '')[0]!);
              await sessions.append('s', [open.at(-1)!]);
            }
            const answered = step.kind === 'late' ? open.pop() : undefined;
            if (step.kind === 'late' && answered?.type === 'function_call')
              await sessions.append('s', [
                { type: 'function_call_output', call_id: answered.call_id, output: step.output },
              ]);
            if (step.kind === 'notice') await post(step.text);
            if (step.kind === 'turn') await outcome(runTurn(services, 's', { input: [] }));
            if (step.kind === 'dead') {
              await dies();
              now += LEASE_MS + 1;
              // Closed by a read (GET .../turns/{turn}), as the next turn's claim would (or by the next step).
              const { turns } = (await sessions.get('s')).counts;
              if (step.closed) await sessions.closeIfExpired('s', turns).catch(() => null);
              if ((await inbox.listDelivered('s')).some((record) => record.turn === turns)) deadHeld += 1;
            }
          }
          if (turnBeforeLast) await outcome(runTurn(services, 's', { input: [] }));
          await sessions.append('s', [{ type: 'message', role: 'user', content: last }]);
          if (leftOpen) {
            // Its lease runs out with nothing closing it: the next turn's claim does.
            await dies();
            for (const [index, content] of queued.entries()) {
              const input: Item[] = [{ type: 'message', role: 'user', content }];
              await sessions.enqueue('s', { input, request: {}, key_sha256: sha256Hex(`${index}`) });
              now += 1000;
            }
            // Under `interrupt` its lease may still run: the next turn cancels it.
            if (!(interrupt && live)) now += LEASE_MS + 1;
            const { turns } = (await sessions.get('s')).counts;
            if ((await inbox.listDelivered('s')).some((record) => record.turn === turns)) openHeld += 1;
            if (interrupt && live) interrupted += 1;
          }
          for (const content of notices) await post(content);
          if (maxTurns !== null) await sessions.update('s', { budget: { max_turns: maxTurns } });

          const preview = await outcome(previewPrompt(services, 's', {}));
          const before = model.prompts.length;
          const { turns } = (await sessions.get('s')).counts;
          // A turn request as the route takes it, under the session's busy policy.
          let turn = await outcome(
            takeUnderPolicy(services, 's', { input: [] }, {}, (busy) => runTurn(busy, 's', { input: [] })).then(
              (taken) => (taken as { value: TurnResponse }).value,
            ),
          );
          // A spent budget refuses the next turn request (its claim's check), as the preview says.
          const refused = 'code' in preview ? null : preview.refused;
          if (refused || ('code' in turn && turn.code === 'budget_exhausted')) {
            // (Unless the preview answered its own refusal: a prompt over the window, which the turn checks after.)
            expect(turn).toEqual({ code: refused ? refused.code : 'budget_exhausted' });
            if (!refused) expect(preview).toEqual({ code: 'context_too_large' });
            expect(model.prompts.length).toBe(before);
            budgetRefused += 1;
            return;
          }
          if (leftOpen && queued.length > 0 && !interrupt) {
            // The next claim took the oldest queued input up first, its own request refused as busy.
            expect(turn).toEqual({ code: 'turn_in_progress' });
            await settle();
            const first = await sessions.getTurn('s', turns + 1);
            turn = first.error ? { code: first.error.code } : ({ context: first.context } as unknown as TurnResponse);
            if (!('code' in preview)) expect(preview.context.queued_turn).toBe(sha256Hex('0'));
            queuedFirst += 1;
          } else if (!('code' in preview)) expect(preview.context.queued_turn).toBeUndefined();
          if (!('code' in preview) && preview.context.compaction?.pending && 'code' in turn) {
            // Only the summary, which the preview cannot know, can make the compacted prompt too
            // large: the turn stored it, and the preview now shows it and answers as the turn did.
            expect(turn).toEqual({ code: 'context_too_large' });
            expect(await outcome(previewPrompt(services, 's', {}))).toEqual(turn);
            return;
          }
          if ('code' in preview || 'code' in turn) {
            expect(turn).toEqual(preview);
            return;
          }
          const pendingSummary = preview.context.compaction?.pending === true;
          // The turn's own call, after its summary's (a queued input's turn may have others after it).
          const sent = model.prompts[before + (pendingSummary ? 1 : 0)]!;
          expect(model.prompts.length).toBeGreaterThan(before);
          expect(seen(sent, pendingSummary)).toEqual(seen(preview.items, pendingSummary));
          const { context } = turn as TurnResponse;
          expect(preview.context.overflow_dropped).toEqual(context.overflow_dropped);
          expect(preview.context.notices_pending).toEqual(context.notices_delivered);
          expect(preview.items.filter((item) => item.pending && item.synthetic === 'inbox')).toHaveLength(
            context.notices_delivered.length,
          );
          const { pending: _pending, ...compaction } = preview.context.compaction ?? {};
          expect(preview.context.compaction ? compaction : undefined).toEqual(context.compaction);
          // An output whose call a compaction summarized (left open at the cut, answered late) is sent.
          const start = preview.context.context_start_seq;
          if (start !== undefined) {
            const { items } = await sessions.listItems('s', { limit: 1000 });
            const before = new Set(items.filter((item) => item.seq < start && item.type === 'function_call'));
            const summarized = new Set([...before].map((item) => item.type === 'function_call' && item.call_id));
            const late = items.filter(
              (item) => item.seq >= start && item.type === 'function_call_output' && summarized.has(item.call_id),
            );
            for (const item of late) expect(preview.items.map((sent) => sent.seq)).toContain(item.seq);
            lateSent += late.length;
          }
        },
      ),
      {
        numRuns: 80,
        // Found by a run: a boundary stored by an earlier turn, which the turn reads from (and
        // counts what it dropped from there) where the preview had read the whole history.
        examples: [
          [
            {
              steps: [
                { kind: 'message', role: 'user', text: ' ' },
                { kind: 'tool', output: ' '.repeat(185) },
                { kind: 'message', role: 'user', text: ' '.repeat(413) },
              ],
              strategies: null,
              windowShare: 0.4,
              last: ' ',
              turnBeforeLast: true,
              instructions: ' '.repeat(193),
              notices: [],
              queued: [],
              interrupt: false,
              live: false,
              maxTurns: null,
            },
          ],
          // Found by a run: a turn without input (not a retake) kept the newest items whole
          // through its compaction, where the preview did not.
          [
            {
              steps: [{ kind: 'message', role: 'user', text: ' ' }],
              strategies: ['shorten_tools_epoch_increment', 'compact', 'inbox'],
              windowShare: 0.2,
              last: ' '.repeat(253),
              turnBeforeLast: false,
              instructions: ' ',
              notices: [' '.repeat(205), ' '.repeat(169)],
              queued: [],
              interrupt: false,
              live: false,
              maxTurns: null,
            },
          ],
          // A turn that died holding a notice, which the next turn takes over, and one pending after it.
          [
            {
              steps: [
                { kind: 'message', role: 'user', text: 'a' },
                { kind: 'notice', text: 'taken by the dead turn' },
                { kind: 'dead', closed: true },
              ],
              strategies: null,
              windowShare: 0,
              last: 'b',
              turnBeforeLast: false,
              instructions: null,
              notices: ['still in the inbox'],
              queued: [],
              interrupt: false,
              live: false,
              maxTurns: null,
            },
          ],
          // The same, the dead turn left open (its lease run out) for the next turn's claim to close.
          [
            {
              steps: [
                { kind: 'message', role: 'user', text: 'a' },
                { kind: 'notice', text: 'taken by the dead turn' },
                { kind: 'dead', closed: false },
              ],
              strategies: null,
              windowShare: 0,
              last: 'b',
              turnBeforeLast: false,
              instructions: null,
              notices: ['still in the inbox'],
              queued: [],
              interrupt: false,
              live: false,
              maxTurns: null,
            },
          ],
          // Inputs queued behind the dead turn left open: the next claim takes the oldest up first.
          [
            {
              steps: [
                { kind: 'message', role: 'user', text: 'a' },
                { kind: 'notice', text: 'taken by the dead turn' },
                { kind: 'dead', closed: false },
              ],
              strategies: null,
              windowShare: 0,
              last: 'b',
              turnBeforeLast: false,
              instructions: null,
              notices: ['still in the inbox'],
              queued: ['queued first', 'queued second'],
              interrupt: false,
              live: false,
              maxTurns: null,
            },
          ],
          // The same under `interrupt`, the dead turn's lease still running: the next turn cancels it,
          // takes over the notice it took, and runs before the queued inputs.
          [
            {
              steps: [
                { kind: 'message', role: 'user', text: 'a' },
                { kind: 'notice', text: 'taken by the dead turn' },
                { kind: 'dead', closed: false },
              ],
              strategies: null,
              windowShare: 0,
              last: 'b',
              turnBeforeLast: false,
              instructions: null,
              notices: ['still in the inbox'],
              queued: ['queued first'],
              interrupt: true,
              live: true,
              maxTurns: null,
            },
          ],
          // Found by a run: an input queued behind a dead turn left open, with a compaction pending
          // and a notice posted after: the queued input's turn sent it, where the preview left it out.
          [
            {
              steps: [
                { kind: 'tool', output: ' '.repeat(129) },
                { kind: 'dead', closed: false },
              ],
              strategies: ['shorten_tools_epoch_increment', 'compact', 'inbox'],
              windowShare: 0.7,
              last: ' '.repeat(81),
              turnBeforeLast: false,
              instructions: ' '.repeat(141),
              notices: [' '.repeat(157)],
              queued: [' '.repeat(89)],
              interrupt: false,
              live: false,
              maxTurns: null,
            },
          ],
          // A call left open, summarized by the compaction of a turn, then answered.
          [
            {
              steps: [
                { kind: 'message', role: 'user', text: 'a' },
                { kind: 'open' },
                { kind: 'message', role: 'user', text: 'b'.repeat(2000) },
                { kind: 'message', role: 'assistant', text: 'c'.repeat(2000) },
                { kind: 'turn' },
                { kind: 'late', output: 'the late result' },
              ],
              strategies: ['shorten_tools_epoch_increment', 'compact', 'inbox'],
              windowShare: 0.2,
              last: 'd',
              turnBeforeLast: false,
              instructions: null,
              notices: [],
              queued: [],
              interrupt: false,
              live: false,
              maxTurns: null,
            },
          ],
        ],
      },
    );
    expect(lateSent).toBeGreaterThan(0);
    expect(deadHeld).toBeGreaterThan(0);
    expect(openHeld).toBeGreaterThan(0);
    expect(queuedFirst).toBeGreaterThan(0);
    expect(interrupted).toBeGreaterThan(0);
    expect(budgetRefused).toBeGreaterThan(0);
    // 80 runs of up to a dozen turns each: a ceiling for a loaded machine, not a measure.
  }, 90_000);
});

describe('previewPrompt, case by case', () => {
  /** A session of `pairs` tool pairs of 2 KB outputs and a user message after them, in a 1,000-token window. */
  async function world(strategies: string[] | null, pairs: number) {
    const store = new CountingStore(new MemoryStore());
    const model = recordingEcho();
    const { sessions, inbox, services } = turnWorld(store, model);
    await sessions.create({
      id: 's',
      strategies,
      strategy_config: { context_limit: 1000, response_reserve: 200 },
    });
    const history = Array.from({ length: pairs }, (_, index) => toolPair(index, 'x'.repeat(2000)));
    await sessions.append('s', [{ type: 'message', role: 'user', content: 'go' }, ...history.flat()]);
    await sessions.append('s', [{ type: 'message', role: 'user', content: 'next' }]);
    return { store, model, inbox, services, sessions };
  }

  it('drops what the turn drops from the boundary a turn stored, and moves it no further', async () => {
    const { model, services } = await world(['none'], 3);
    // The first turn moves the boundary; the preview after it starts there, as the next turn does.
    const first = await runTurn(services, 's', { input: [] });
    expect(first.context.overflow_dropped?.moved).toBe(true);
    const preview = await previewPrompt(services, 's', {});
    expect(preview.context.overflow_dropped).toMatchObject({
      moved: false,
      tool_start_seq: first.context.overflow_dropped!.tool_start_seq,
    });
    const next = await runTurn(services, 's', { input: [] });
    expect(seen(model.prompts.at(-1)!, false)).toEqual(seen(preview.items, false));
    expect(next.context.overflow_dropped).toEqual(preview.context.overflow_dropped);
  });

  it('drops what the stored boundary names in a tool loop, whose last user message is older than it', async () => {
    // One user message, then calls only (a computer-use loop): the next turn's input goes after
    // every item the boundary names, so none of them reaches its prompt, nor the preview's.
    const { model, services, sessions } = await world(['none'], 0);
    for (let index = 0; index < 6; index++) {
      await sessions.append('s', [{ type: 'function_call', call_id: `call_${index}`, name: 'read', arguments: '{}' }]);
      const output = { type: 'function_call_output' as const, call_id: `call_${index}`, output: 'x'.repeat(2000) };
      await runTurn(services, 's', { input: [output] });
    }
    const preview = await previewPrompt(services, 's', {});
    expect(preview.context.overflow_dropped?.moved).toBe(false);
    await sessions.append('s', [{ type: 'function_call', call_id: 'call_next', name: 'read', arguments: '{}' }]);
    const output = { type: 'function_call_output' as const, call_id: 'call_next', output: 'y' };
    const next = await runTurn(services, 's', { input: [output] });
    expect(next.context.overflow_dropped?.moved).toBe(false);
    const sent = model.prompts.at(-1)!.map((item) => item.seq);
    expect(preview.items.map((item) => item.seq)).toEqual(sent.slice(0, preview.items.length));
    expect(preview.items.some((item) => 'behind' in item)).toBe(false);
  });

  it("counts in a tool loop what the next turn, answering the model's call, counts", async () => {
    // The strategies keep few calls, so a prompt is built from where its newest calls and outputs
    // start when that is before the boundary's message start: the turn's from later than the
    // preview's, the call's output (its input) among them. Messages behind the boundary in between
    // were counted by the preview alone.
    const model = recordingEcho();
    const { sessions, services } = turnWorld(new MemoryStore(), model);
    const config = { epoch_tool_call_threshold: 4, epoch_size: 2, epoch_full_tool_calls: 1 };
    let messagesDropped = 0;
    for (const steps of [6, 9, 12, 14, 16, 18, 20]) {
      const id = `loop_${steps}`;
      await sessions.create({
        id,
        tools: [{ type: 'function', name: 'read' }],
        strategy_config: { ...config, epoch_compacted_tool_calls: 2, context_limit: 1500, response_reserve: 200 },
      });
      // Each step answers the model's call, every other one with a user message asking for the next.
      let turn = await runTurn(services, id, { input: 'call read {"n":0}' });
      for (let step = 1; step <= steps; step++) {
        const call = turn.output.find((item) => item.type === 'function_call')!;
        const output = { type: 'function_call_output' as const, call_id: call.call_id, output: `${step} `.repeat(40) };
        const said = { type: 'message' as const, role: 'user' as const, content: 'm'.repeat(step % 2 === 0 ? 900 : 1) };
        const ask = { type: 'message' as const, role: 'user' as const, content: `call read {"n":${step}}` };
        turn = await runTurn(services, id, { input: [output, said, ask] });
      }
      const call = turn.output.find((item) => item.type === 'function_call')!;
      const preview = await previewPrompt(services, id, {});
      const output = { type: 'function_call_output' as const, call_id: call.call_id, output: 'y' };
      const next = await runTurn(services, id, { input: [output] });
      // The prompt is the preview's, then the input; so are the counts, the input's tokens aside (at
      // these lengths the input does not tip the prompt over the window, which no preview can tell).
      expect(seen(model.prompts.at(-1)!.slice(0, preview.items.length), false)).toEqual(seen(preview.items, false));
      const { overflow_dropped: counted } = next.context;
      expect(counted?.moved).not.toBe(true);
      expect(overflowCounts(counted)).toEqual(overflowCounts(preview.context.overflow_dropped));
      messagesDropped += (counted?.message_start_seq ?? 1) > 1 ? 1 : 0;
    }
    expect(messagesDropped).toBeGreaterThan(0);
  });

  it('shows after a failed tool loop turn the prompt its retake (an empty input) sends', async () => {
    // The turn answering a call failed as its prompt was over the window (`truncation: "disabled"`);
    // its retake is the safety net's turn, its newest turn that output: the older calls may go.
    const { model, services, sessions } = await world(['none'], 0);
    await sessions.append(
      's',
      [0, 1].flatMap((index) => toolPair(index, 'x'.repeat(2000))),
    );
    await sessions.append('s', [{ type: 'function_call', call_id: 'call_open', name: 'read', arguments: '{}' }]);
    const output = { type: 'function_call_output' as const, call_id: 'call_open', output: 'y' };
    const failed = await outcome(runTurn(services, 's', { input: [output], truncation: 'disabled' }));
    expect(failed).toEqual({ code: 'context_too_large' });
    const preview = await outcome(previewPrompt(services, 's', {}));
    const retaken = await outcome(runTurn(services, 's', { input: [] }, { retake: true }));
    expect('code' in retaken).toBe(false);
    expect(preview).not.toHaveProperty('code');
    expect(seen((preview as { items: PromptItem[] }).items, false)).toEqual(seen(model.prompts.at(-1)!, false));
  });

  it('shows the compaction of the next turn as made, its summary pending, with no model call or write', async () => {
    const { store, model, services } = await world(['compact', 'inbox'], 2);
    store.reset();
    const preview = await previewPrompt(services, 's', {});
    expect(model.prompts).toHaveLength(0);
    expect(store.counts).toMatchObject({ put: 0, delete: 0 });
    const compaction = preview.context.compaction!;
    expect(compaction).toMatchObject({ pending: true, summarized: { first_seq: 1 } });
    expect(preview.context.context_start_seq).toBe(compaction.start_seq);
    expect(preview.items[0]).toMatchObject({ synthetic: 'summary', pending: true });
    expect(preview.items.slice(1).every((item) => item.seq! >= compaction.start_seq)).toBe(true);

    const turn = await runTurn(services, 's', { input: [] });
    const { pending: _pending, ...made } = compaction;
    expect(turn.context.compaction).toEqual(made);
    expect(seen(model.prompts.at(-1)!, true)).toEqual(seen(preview.items, true));
  });

  it("counts a request's input in the prompt its turn's compaction leaves, which reads the context again", async () => {
    const { model, services } = await world(['compact', 'inbox'], 2);
    const message = (content: string) => ({ type: 'message' as const, role: 'user' as const, content });
    const [long, short] = [message('q'.repeat(600)), message('q')];
    const counted = await countNextPrompt(services, 's', { input: [long] });
    // The compaction keeps the same items for either input: the counts differ by the inputs' own tokens.
    expect(counted - (await countNextPrompt(services, 's', { input: [short] }))).toBe(
      countPromptTokens([long], [], approximateTokenCounter) - countPromptTokens([short], [], approximateTokenCounter),
    );
    const turn = await runTurn(services, 's', { input: [long] });
    expect(turn.context.compaction).toBeDefined();
    expect(userTexts(model.prompts.at(-1)!)).toContain('q'.repeat(600));
  });

  it('shows first the notices a failed turn took, as the next turn delivers them', async () => {
    const { inbox, services } = await world(null, 0);
    await inbox.post('s', { name: 'a.md', content: 'taken by a failed turn' });
    const failing = {
      ...services,
      model: () => ({ ...recordingEcho(), generate: () => Promise.reject(new Error('down')) }),
    };
    await expect(runTurn(failing, 's', { input: [] })).rejects.toThrow();
    await inbox.post('s', { name: 'b.md', content: 'still in the inbox' });
    const preview = await previewPrompt(services, 's', {});
    expect(preview.context.notices_pending).toEqual(['a.md', 'b.md']);
    const turn = await runTurn(services, 's', { input: [] });
    expect(turn.context.notices_delivered).toEqual(['a.md', 'b.md']);
  });
});

describe('previewPrompt after a turn whose process died holding notices', () => {
  it('shows first the notices that turn took, closed by its lease, as the next turn delivers them', async () => {
    let now = Date.parse('2026-01-01T00:00:00Z');
    const clock = () => new Date(now);
    const store = new MemoryStore({ clock });
    const model = recordingEcho();
    const { sessions, inbox, services } = turnWorld(store, model, { clock, leaseMs: LEASE_MS });
    await sessions.create({ id: 's' });
    await inbox.post('s', { name: '0001-n', content: 'budget low' });
    // Turn 1 moves the notice, then its process dies as it writes its completion.
    await diesHolding(turnWorld(killedAtCompletion(store), model, { clock, leaseMs: LEASE_MS }).services);
    now += LEASE_MS + 1;
    // A read closes it (GET .../turns/1): `lease_expired`; the next turn takes its notice over.
    expect(await sessions.closeIfExpired('s', 1)).toMatchObject({ status: 'failed', error: { code: 'lease_expired' } });
    expect(await inbox.listPending('s')).toEqual([]);

    const preview = await previewPrompt(services, 's', {});
    expect(preview.context.notices_pending).toEqual(['0001-n']);
    const turn = await runTurn(services, 's', { input: [] });
    expect(turn.context.notices_delivered).toEqual(['0001-n']);
    expect(seen(model.prompts.at(-1)!, false)).toEqual(seen(preview.items, false));
  });

  it('shows them too when nothing closed that turn, its lease run out, and writes nothing', async () => {
    let now = Date.parse('2026-01-01T00:00:00Z');
    const clock = () => new Date(now);
    const store = new CountingStore(new MemoryStore({ clock }));
    const model = recordingEcho();
    const { sessions, inbox, services } = turnWorld(store, model, { clock, leaseMs: LEASE_MS });
    await sessions.create({ id: 's' });
    await sessions.append('s', [{ type: 'message', role: 'user', content: 'hello' }]);
    await inbox.post('s', { name: '0001-n', content: 'budget low' });
    await diesHolding(turnWorld(killedAtCompletion(store), model, { clock, leaseMs: LEASE_MS }).services);
    await inbox.post('s', { name: '0002-n', content: 'posted after' });
    // While its lease runs the turn is not dead: the next turn's claim would wait (409), not take it over.
    expect((await previewPrompt(services, 's', {})).context.notices_pending).toEqual(['0002-n']);
    now += LEASE_MS + 1;
    expect((await sessions.getWithNewestTurn('s')).newestTurn).toMatchObject({ turn: 1, status: null });

    store.reset();
    const preview = await previewPrompt(services, 's', {});
    expect(store.counts).toMatchObject({ put: 0, delete: 0 });
    expect((await sessions.getWithNewestTurn('s')).newestTurn).toMatchObject({ turn: 1, status: null });
    expect(preview.context.notices_pending).toEqual(['0001-n', '0002-n']);
    const turn = await runTurn(services, 's', { input: [] });
    expect(turn.turn).toBe(2);
    expect(turn.context.notices_delivered).toEqual(['0001-n', '0002-n']);
    expect(seen(model.prompts.at(-1)!, false)).toEqual(seen(preview.items, false));
  });
});

describe("previewPrompt at the very ms a dead turn's lease runs out", () => {
  it('reads the turn closed, as the claim closes a lease that ends now, and one ms before reads it open', async () => {
    let now = Date.parse('2026-01-01T00:00:00Z');
    const clock = () => new Date(now);
    const store = new MemoryStore({ clock });
    const model = recordingEcho();
    const { sessions, inbox, services } = turnWorld(store, model, { clock, leaseMs: LEASE_MS });
    await sessions.create({ id: 's' });
    await inbox.post('s', { name: '0001-n', content: 'budget low' });
    await diesHolding(turnWorld(killedAtCompletion(store), model, { clock, leaseMs: LEASE_MS }).services);
    const { newestTurn } = await sessions.getWithNewestTurn('s');
    const expires = Date.parse(newestTurn!.lease_expires_at!);
    now = expires - 1;
    expect((await previewPrompt(services, 's', {})).context.notices_pending).toEqual([]);
    await expect(runTurn(services, 's', { input: [] })).rejects.toMatchObject({ code: 'turn_in_progress' });
    now = expires;
    const preview = await previewPrompt(services, 's', {});
    expect(preview.context.notices_pending).toEqual(['0001-n']);
    const turn = await runTurn(services, 's', { input: [] });
    expect(turn.context.notices_delivered).toEqual(['0001-n']);
    expect(seen(model.prompts.at(-1)!, false)).toEqual(seen(preview.items, false));
  });
});

/** A session whose turn 1 died holding notices `0001-n` and `0002-n` and was closed once its lease ran out. */
async function closedHoldingTwo() {
  let now = Date.parse('2026-01-01T00:00:00Z');
  const clock = () => new Date(now);
  const store = new MemoryStore({ clock });
  const model = recordingEcho();
  const { sessions, inbox, services } = turnWorld(store, model, { clock, leaseMs: LEASE_MS });
  await sessions.create({ id: 's' });
  await inbox.post('s', { name: '0001-n', content: 'budget low' });
  await inbox.post('s', { name: '0002-n', content: 'disk full' });
  await diesHolding(turnWorld(killedAtCompletion(store), model, { clock, leaseMs: LEASE_MS }).services);
  now += LEASE_MS + 1;
  expect(await sessions.closeIfExpired('s', 1)).toMatchObject({ error: { code: 'lease_expired' } });
  return { store, clock, model, inbox, services };
}

/**
 * Where turn 1's give-back of `0001-n` stands when the next turn starts: none ran (its record names
 * turn 1, its chain open); it decided the notice goes back, then died before it posted it back (or
 * once it posted it, before it deleted the record); or it finished (the record gone). The next turn
 * lists the inbox alongside its claim, then takes over the closed turn's notices, finishing a
 * give-back it finds on a record's chain: a notice that give-back had not posted back yet waits in
 * the inbox for the turn after.
 */
const giveBackStates = [
  { state: 'none', gives: false, dies: null, next: ['0001-n', '0002-n'], after: [] },
  { state: 'decided', gives: true, dies: 'put', next: ['0002-n'], after: ['0001-n'] },
  { state: 'posted', gives: true, dies: 'delete', next: ['0002-n', '0001-n'], after: [] },
  { state: 'finished', gives: true, dies: null, next: ['0002-n', '0001-n'], after: [] },
] as const;

describe('previewPrompt after a dead turn, wherever its give-back of a notice stands', () => {
  it.each(giveBackStates)('give-back $state: shows what the next turn and the turn after deliver', async (world) => {
    const { store, clock, model, inbox, services } = await closedHoldingTwo();
    if (world.gives) {
      // The give-back dies at the first call `dies` names: its post back, or the delete of the record.
      const dying = turnWorld(
        new FaultyStore(store).failWhen(({ operation, key }) =>
          world.dies === 'put' ? operation === 'put' && key.includes('/inbox/') : operation === world.dies,
        ),
        model,
        { clock, leaseMs: LEASE_MS },
      );
      await dying.inbox.giveBack('s', [{ name: '0001-n', stored_as: '0001-n' }], 1);
    }
    const posted = world.gives && world.dies !== 'put' ? ['0001-n'] : [];
    expect((await inbox.listPending('s')).map((notice) => notice.name)).toEqual(posted);
    for (const delivers of [world.next, world.after]) {
      // Read only: the preview walks the decision keys beside the records, creating none.
      const counting = new CountingStore(store);
      const preview = await previewPrompt(turnWorld(counting, model, { clock, leaseMs: LEASE_MS }).services, 's', {});
      expect(counting.counts).toMatchObject({ put: 0, delete: 0 });
      const prompts = model.prompts.length;
      const turn = await runTurn(services, 's', { input: [] });
      expect(turn.context.notices_delivered).toEqual(delivers);
      expect(preview.context.notices_pending).toEqual(turn.context.notices_delivered);
      expect(model.prompts).toHaveLength(prompts + 1);
      expect(seen(model.prompts.at(-1)!, false)).toEqual(seen(preview.items, false));
    }
    expect(await inbox.listPending('s')).toEqual([]);
  });
});

describe('previewPrompt over an inbox holding more than a turn takes', () => {
  /** The 32 names a turn takes of `n10`, `n11`, ... from `from` on. */
  const taken = (from: number, count = 32) => Array.from({ length: count }, (_, index) => `n${from + index}`);

  async function world(count: number) {
    const model = recordingEcho();
    const { sessions, inbox, services } = turnWorld(new MemoryStore(), model);
    await sessions.create({ id: 's', strategies: ['inbox'] });
    for (let index = 0; index < count; index++) await inbox.post('s', { name: `n${index + 10}`, content: `${index}` });
    return { model, inbox, services };
  }

  it('shows the 32 notices the next turn takes, and the turn takes those', async () => {
    const { services } = await world(34);
    expect((await previewPrompt(services, 's', {})).context.notices_pending).toEqual(taken(10));
    expect((await runTurn(services, 's', { input: 'hi' })).context.notices_delivered).toEqual(taken(10));
    expect((await previewPrompt(services, 's', {})).context.notices_pending).toEqual(['n42', 'n43']);
    expect((await runTurn(services, 's', { input: 'hi' })).context.notices_delivered).toEqual(['n42', 'n43']);
  });

  it('counts the notices a failed turn took in the 32 the next turn delivers', async () => {
    const { inbox, services } = await world(34);
    const failing = {
      ...services,
      model: () => ({ ...recordingEcho(), generate: () => Promise.reject(new Error('down')) }),
    };
    await expect(runTurn(failing, 's', { input: 'hi' })).rejects.toThrow();
    await expect(runTurn(failing, 's', { input: 'hi' })).rejects.toThrow();
    expect((await previewPrompt(services, 's', {})).context.notices_pending).toEqual(taken(10));
    expect((await runTurn(services, 's', { input: 'hi' })).context.notices_delivered).toEqual(taken(10));
    expect((await inbox.listPending('s')).map((notice) => notice.name)).toEqual(['n42', 'n43']);
  });

  it('aborts the next turn on an `abort` past the first 32, which takes the 32 before it', async () => {
    const { inbox, services } = await world(0);
    // Generated names (the clock's digits) sort before `abort`.
    for (let index = 0; index < 40; index++) await inbox.post('s', { content: `${index}` });
    const names = (await inbox.listPending('s')).map((notice) => notice.name);
    await inbox.post('s', { name: 'abort', content: 'stop' });
    expect((await previewPrompt(services, 's', {})).context.notices_pending).toEqual(names.slice(0, 32));
    await expect(runTurn(services, 's', { input: 'hi' })).rejects.toMatchObject({ code: 'aborted' });
    expect((await inbox.listPending('s')).map((notice) => notice.name)).toEqual(names.slice(32));
    expect((await previewPrompt(services, 's', {})).context.notices_pending).toEqual(names.slice(0, 32));
  });
});

/** What the safety net's report counts, and the tokens it dropped: the input's tokens aside. */
function overflowCounts(dropped: TurnResponse['context']['overflow_dropped']) {
  if (!dropped) return dropped;
  const { prompt_tokens: after, prompt_tokens_before: before, ...counts } = dropped;
  return { ...counts, tokens_dropped: before - after };
}

function toolPair(index: number, output: string): Item[] {
  return [
    { type: 'function_call', call_id: `call_${index}`, name: 'read', arguments: `{"n":${index}}` },
    { type: 'function_call_output', call_id: `call_${index}`, output },
  ];
}

/** A turn without input in a process that dies as it writes the turn's completion (`killedAtCompletion`). */
async function diesHolding(services: TurnServices): Promise<void> {
  const left: Promise<unknown>[] = [];
  await runTurn({ ...services, background: (task) => void left.push(task) }, 's', { input: [] }).catch(() => null);
  await Promise.allSettled(left);
}

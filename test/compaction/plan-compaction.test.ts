import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { planCompaction, renderTranscript, summarizeContext } from '../../lib/compaction/index.ts';
import type { PromptItem } from '../../lib/items.ts';
import { echoModel } from '../../lib/models/echo.ts';
import { approximateTokenCounter } from '../../lib/tokens/index.ts';

const counter = approximateTokenCounter;

function numbered(items: PromptItem[]): PromptItem[] {
  return items.map((item, index) => ({ ...item, seq: index + 1 }));
}

const user = (content: string): PromptItem => ({ type: 'message', role: 'user', content });
const assistant = (content: string): PromptItem => ({ type: 'message', role: 'assistant', content });
const call = (id: string): PromptItem => ({
  type: 'function_call',
  call_id: id,
  name: 'lookup',
  arguments: `{"id":"${id}"}`,
});
const output = (id: string, text = 'x'.repeat(200)): PromptItem => ({
  type: 'function_call_output',
  call_id: id,
  output: text,
});

/** A generated history: messages and call/output pairs, some outputs late, some missing. */
const historyArbitrary = fc
  .array(
    fc.oneof(
      fc.string({ maxLength: 120 }).map((text) => [user(text)]),
      fc.string({ maxLength: 120 }).map((text) => [assistant(text)]),
      fc.tuple(fc.nat(1000), fc.nat(3), fc.boolean()).map(([id, gap, answered]) => {
        const callId = `c${id}`;
        const filler = Array.from({ length: gap }, () => assistant('thinking'));
        return answered ? [call(callId), ...filler, output(callId)] : [call(callId), ...filler];
      }),
    ),
    { maxLength: 30 },
  )
  .map((groups) => {
    // Distinct call ids, so a pair is identified by its id.
    let next = 0;
    return numbered(
      groups
        .flat()
        .map((item) =>
          item.type === 'message'
            ? item
            : { ...item, call_id: `${item.call_id}-${item.type === 'function_call' ? ++next : next}` },
        ),
    );
  });

describe('planCompaction', () => {
  it(
    'never splits a call from its output, keeps the protected input, and lists calls without output as ' +
      'interrupted',
    () => {
      fc.assert(
        fc.property(historyArbitrary, fc.nat(400), (items, keepTokens) => {
          const keepFromSeq = items.length > 0 ? items[items.length - 1]!.seq! : undefined;
          const plan = planCompaction(items, {
            keepTokens,
            counter,
            ...(keepFromSeq !== undefined ? { keepFromSeq } : {}),
          });
          if (!plan) return;
          const summarizedIds = new Set(
            plan.summarized.flatMap((item) => (item.type === 'function_call' ? [item.call_id] : [])),
          );
          const kept = items.filter((item) => item.seq! >= plan.startSeq);
          for (const item of kept)
            if (item.type === 'function_call_output') expect(summarizedIds.has(item.call_id)).toBe(false);
          expect(plan.summarized.length + kept.length).toBe(items.length);
          if (keepFromSeq !== undefined) expect(plan.startSeq).toBeLessThanOrEqual(keepFromSeq);
          const answered = new Set(
            items.flatMap((item) => (item.type === 'function_call_output' ? [item.call_id] : [])),
          );
          expect(plan.interrupted.map((item) => item.call_id)).toEqual(
            [...summarizedIds].filter((id) => !answered.has(id)),
          );
        }),
        { numRuns: 200 },
      );
    },
  );

  it('pairs an output with the latest call before it when a call_id comes again', () => {
    // The same histories with ids from a pool of two: a session may use an id again once its call is answered.
    const reused = historyArbitrary.map((items) =>
      items.map((item) => (item.type === 'message' ? item : { ...item, call_id: `c${item.call_id.length % 2}` })),
    );
    fc.assert(
      fc.property(reused, fc.nat(400), fc.option(fc.nat(40), { nil: undefined }), (items, keepTokens, earliest) => {
        const plan = planCompaction(items, {
          keepTokens,
          counter,
          ...(earliest !== undefined ? { earliestStartSeq: earliest } : {}),
        });
        if (!plan) return;
        const latest = new Map<string, PromptItem>();
        const answered = new Set<PromptItem>();
        for (const item of items) {
          if (item.type === 'function_call') latest.set(item.call_id, item);
          else if (item.type === 'function_call_output' && latest.has(item.call_id)) {
            const answeredCall = latest.get(item.call_id)!;
            answered.add(answeredCall);
            // The cut never parts an output from the call it answers.
            expect(answeredCall.seq! < plan.startSeq).toBe(item.seq! < plan.startSeq);
          }
        }
        expect(plan.interrupted).toEqual(
          plan.summarized.filter((item) => item.type === 'function_call' && !answered.has(item)),
        );
      }),
      { numRuns: 300 },
    );
    const items = numbered([
      call('c'),
      output('c'),
      user('a'.repeat(400)),
      call('c'),
      assistant('b'.repeat(400)),
      output('c', 'short'),
      user('now'),
    ]);
    // Keeping the last two would part the second output c from its call: the cut moves back to it.
    expect(planCompaction(items, { keepTokens: 15, counter })).toMatchObject({ startSeq: 4, interrupted: [] });
  });

  it('starts no earlier than earliestStartSeq, moving forward past a pair rather than splitting it', () => {
    fc.assert(
      fc.property(historyArbitrary, fc.nat(400), fc.nat(40), (items, keepTokens, earliest) => {
        const plan = planCompaction(items, { keepTokens, counter, earliestStartSeq: earliest });
        if (!plan) return;
        const summarizedIds = new Set(
          plan.summarized.flatMap((item) => (item.type === 'function_call' ? [item.call_id] : [])),
        );
        for (const item of items)
          if (item.seq! >= plan.startSeq && item.type === 'function_call_output')
            expect(summarizedIds.has(item.call_id)).toBe(false);
        expect(plan.startSeq).toBeGreaterThanOrEqual(Math.min(earliest, items.length + 1));
      }),
      { numRuns: 200 },
    );
    const items = numbered([user('a'), call('c1'), user('b'), output('c1'), user('now')]);
    expect(planCompaction(items, { keepTokens: 1000, counter, earliestStartSeq: 3 })).toMatchObject({ startSeq: 5 });
  });

  it('moves the cut back to a call whose output is on the kept side', () => {
    const items = numbered([
      user('a'.repeat(400)),
      call('c1'),
      assistant('b'.repeat(400)),
      output('c1', 'short'),
      user('now'),
    ]);
    // Keeping only the last two items would put output c1 after the cut and its call before it.
    const plan = planCompaction(items, { keepTokens: 15, counter })!;
    expect(plan.startSeq).toBe(2);
    expect(plan.summarized.map((item) => item.seq)).toEqual([1]);
  });

  it('returns null when everything fits the kept part, and cuts everything with keepTokens 0', () => {
    const items = numbered([user('hello'), assistant('hi')]);
    expect(planCompaction(items, { keepTokens: 1000, counter })).toBeNull();
    expect(planCompaction(items, { keepTokens: 0, counter })).toMatchObject({ startSeq: 3, firstSeq: 1, lastSeq: 2 });
  });
});

describe('the summary', () => {
  /** A parallel step whose first output is larger than the window, its second small, then a question. */
  const oversizedStep = () =>
    numbered([
      user('hello'),
      call('a'),
      call('b'),
      output('a', 'w'.repeat(20_000)),
      output('b', 'sunny'),
      user('what now?'),
    ]);

  it('moves forward past a parallel step whose kept pairs alone would pass maxKeptTokens', () => {
    // A step's first output is larger than the window, its second small: moving the cut back to the
    // step's calls would keep the large output, and every later prompt would still not fit.
    const items = oversizedStep();
    const keepFromSeq = 6;
    expect(planCompaction(items, { keepTokens: 1000, counter, keepFromSeq })).toMatchObject({ startSeq: 2 });
    expect(planCompaction(items, { keepTokens: 1000, counter, keepFromSeq, maxKeptTokens: 3500 })).toMatchObject({
      startSeq: 6,
      interrupted: [],
    });
    // A kept side within maxKeptTokens still moves back to the call, as without it.
    expect(planCompaction(items, { keepTokens: 1000, counter, keepFromSeq, maxKeptTokens: 10_000 })).toMatchObject({
      startSeq: 2,
    });
  });

  it('counts each item once when it weighs the kept side against maxKeptTokens', () => {
    const items = oversizedStep();
    const counted: string[] = [];
    const tally = {
      name: 'tally',
      count: (text: string) => {
        counted.push(text);
        return approximateTokenCounter.count(text);
      },
    };
    const plan = planCompaction(items, { keepTokens: 1000, counter: tally, keepFromSeq: 6, maxKeptTokens: 3500 });
    expect(plan).toMatchObject({ startSeq: 6 });
    expect(counted.length).toBeLessThanOrEqual(items.length);
  });

  it('notes as interrupted only the call without an output, when its call_id comes again', () => {
    const items = numbered([call('c'), user('retry'), call('c'), output('c', 'done'), user('go on')]);
    const plan = planCompaction(items, { keepTokens: 5, counter, keepFromSeq: 5 })!;
    expect(plan.interrupted.map((item) => item.seq)).toEqual([1]);
    const transcript = renderTranscript(null, plan.summarized, new Set(plan.interrupted));
    expect(transcript.match(/was interrupted/g)).toHaveLength(1);
    expect(transcript).toContain('#1 tool call lookup({"id":"c"}) was interrupted');
    // Its call_id names its output, should one come later (as user text, "Output of tool call c").
    expect(transcript).toContain('it was not run again (call_id c)\n');
    expect(transcript).toContain('#3 tool call lookup({"id":"c"})\n#4 tool result of lookup: done');
  });

  it('is deterministic with echo: the transcript echoed, interrupted calls noted, never replayed', async () => {
    const items = numbered([user('plan the trip'), call('c1'), output('c1', 'Paris 18C'), call('c2'), user('go on')]);
    const plan = planCompaction(items, { keepTokens: 5, counter, keepFromSeq: 5 })!;
    expect(plan.interrupted.map((item) => item.call_id)).toEqual(['c2']);
    const next = (await summarizeContext(echoModel, null, plan, { maxSummaryTokens: 1000 })).context;
    const transcript = renderTranscript(null, plan.summarized, new Set(plan.interrupted));
    expect(next.summary).toBe(`echo: ${transcript}`);
    expect(next.summary).toContain('#4 tool call lookup({"id":"c2"}) was interrupted');
    expect(next).toMatchObject({
      start_seq: 5,
      summarized: { first_seq: 1, last_seq: 4 },
      interrupted: ['c2'],
      model: 'echo',
    });
    // Same input, same summary.
    expect((await summarizeContext(echoModel, null, plan, { maxSummaryTokens: 1000 })).context.summary).toBe(
      next.summary,
    );
  });

  it('leaves out a message the model was never sent: the empty one holding the reasoning an answer ended with', () => {
    const thought = { type: 'reasoning' as const, summary: [{ type: 'summary_text' as const, text: 'which tool' }] };
    const ended: PromptItem = { type: 'message', role: 'assistant', content: '', reasoning: [thought] };
    const items = numbered([user('weather?'), ended, assistant(' \n'), user('go on'), assistant('sunny')]);
    expect(renderTranscript(null, items, new Set())).toBe('#1 user: weather?\n#4 user: go on\n#5 assistant: sunny');
  });

  it('folds the previous summary in and stays within its token cap', async () => {
    const items = numbered([user('y'.repeat(5000)), user('z'.repeat(5000)), user('now')]);
    const plan = planCompaction(items, { keepTokens: 0, counter, keepFromSeq: 3 })!;
    const previous = {
      base_record: 1,
      start_seq: 1,
      summary: 'earlier facts',
      summarized: { first_seq: 1, last_seq: 1 },
      interrupted: [],
      model: 'echo',
      created_at: '',
    };
    const next = (await summarizeContext(echoModel, previous, plan, { maxSummaryTokens: 50 })).context;
    expect(next.summary).toContain('earlier facts');
    expect(next.summary.length).toBeLessThanOrEqual(200);
  });
});

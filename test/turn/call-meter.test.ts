import { describe, expect, it } from 'vitest';
import { ModelTimeoutError } from '../../lib/models/errors.ts';
import { markReach } from '../../lib/models/provider-reach.ts';
import { approximateTokenCounter } from '../../lib/tokens/token-counter.ts';
import { CallMeter } from '../../lib/turn/stopped-spend.ts';

// What a turn's model calls spent when it was stopped or failed (lib/turn/stopped-spend.ts): a call
// its model marked as never reaching its provider (refused, or stopped waiting to retry a
// refusal: lib/models/provider-reach.ts) counts nothing, also when it was aborted and made again
// and its failure came after the next call started; an unmarked failure counts as before.

const aborted = (mayHaveRun: boolean) => markReach(new ModelTimeoutError('aborted'), mayHaveRun);
const prompt = (tokens: number) => () => tokens;

describe('CallMeter', () => {
  it('a stopped call its provider never got: nothing', () => {
    const meter = new CallMeter();
    meter.calling(prompt(10), approximateTokenCounter);
    meter.failing()(aborted(false));
    expect(meter.spent(undefined)).toBeNull();
  });

  it('a stopped call in flight, or failed unmarked: its estimate', () => {
    for (const error of [aborted(true), new ModelTimeoutError('aborted'), new Error('gone')]) {
      const meter = new CallMeter();
      meter.calling(prompt(10), approximateTokenCounter);
      meter.failing()(error);
      expect(meter.spent(undefined)).toMatchObject({ usage: { input_tokens: 10, output_tokens: 0 }, estimated: true });
    }
  });

  it('an aborted call made again: counted unless its provider never got it, its mark coming late', () => {
    const meter = new CallMeter();
    meter.calling(prompt(10), approximateTokenCounter);
    const first = meter.failing();
    meter.calling(prompt(20), approximateTokenCounter);
    const second = meter.failing();
    meter.calling(prompt(40), approximateTokenCounter);
    first(aborted(false));
    second(aborted(true));
    meter.answered({ input_tokens: 41, output_tokens: 5 });
    expect(meter.spent(undefined)).toMatchObject({ usage: { input_tokens: 61, output_tokens: 5 }, estimated: true });
  });

  it("a lost claim's aborted call, carried to the next attempt, marked after", () => {
    const meter = new CallMeter();
    meter.calling(prompt(10), approximateTokenCounter);
    const first = meter.failing();
    const next = meter.next();
    first(aborted(false));
    next.calling(prompt(20), approximateTokenCounter);
    next.answered({ input_tokens: 21, output_tokens: 3 });
    expect(next.spent(undefined)).toMatchObject({ usage: { input_tokens: 21, output_tokens: 3 }, estimated: false });
  });

  it('a failed call refused (not run) after an aborted one that ran: only the aborted one', () => {
    const meter = new CallMeter();
    meter.calling(prompt(10), approximateTokenCounter);
    meter.failing()(aborted(true));
    meter.calling(prompt(20), approximateTokenCounter);
    expect(meter.failed(undefined, false)).toMatchObject({
      usage: { input_tokens: 10, output_tokens: 0 },
      estimated: true,
    });
  });

  it("a lost claim's aborted call, carried to an attempt stopped before its own call: its estimate", () => {
    const meter = new CallMeter();
    meter.calling(prompt(10), approximateTokenCounter);
    meter.failing()(aborted(true));
    const next = meter.next();
    expect(next.spent(undefined)).toMatchObject({ usage: { input_tokens: 10, output_tokens: 0 }, estimated: true });
  });

  it("a lost claim's aborted call that answered first: what its provider reported, not its estimate", async () => {
    const meter = new CallMeter();
    meter.calling(prompt(10), approximateTokenCounter);
    meter.track(Promise.resolve({ usage: { input_tokens: 500, output_tokens: 30, cached_input_tokens: 100 } }));
    await meter.settled();
    const next = meter.next();
    expect(next.spent(undefined)).toMatchObject({
      usage: { input_tokens: 500, output_tokens: 30, cached_input_tokens: 100 },
      estimated: false,
    });
    next.calling(prompt(20), approximateTokenCounter);
    next.answered({ input_tokens: 21, output_tokens: 3 });
    expect(next.spent(undefined)).toMatchObject({
      usage: { input_tokens: 521, output_tokens: 33, cached_input_tokens: 100 },
      estimated: false,
    });
  });

  it('a call aborted by a notice after it answered, made again: both as reported, its answer coming late', async () => {
    const meter = new CallMeter();
    meter.calling(prompt(10), approximateTokenCounter);
    let answer!: (value: { usage: { input_tokens: number; output_tokens: number } }) => void;
    meter.track(new Promise((resolve) => (answer = resolve)));
    meter.calling(prompt(20), approximateTokenCounter);
    answer({ usage: { input_tokens: 500, output_tokens: 30 } });
    meter.track(Promise.resolve({ usage: { input_tokens: 21, output_tokens: 3 } }));
    await meter.settled();
    expect(meter.spent(undefined)).toMatchObject({ usage: { input_tokens: 521, output_tokens: 33 }, estimated: false });
    // One aborted before it answered counts its estimate, and makes the sum an estimate.
    meter.calling(prompt(40), approximateTokenCounter);
    meter.calling(prompt(80), approximateTokenCounter);
    meter.answered({ input_tokens: 81, output_tokens: 1 });
    expect(meter.spent(undefined)).toMatchObject({ usage: { input_tokens: 642, output_tokens: 34 }, estimated: true });
  });

  it('a call that failed or was aborted after its provider reported its input: that input, its output streamed', () => {
    const input = { input_tokens: 900, output_tokens: 0, cached_input_tokens: 800, cache_write_tokens: 60 };
    const delta = 'The weather in Paris';
    const streamed = approximateTokenCounter.count(delta);
    const meter = new CallMeter();
    meter.calling(prompt(10), approximateTokenCounter);
    meter.saw({ type: 'input_reported', usage: input });
    meter.saw({ type: 'text_delta', delta });
    meter.failing()(aborted(true));
    const usage = { ...input, output_tokens: streamed, reasoning_tokens: 0 };
    expect(meter.failed(undefined, false)).toEqual({ usage: { ...usage, cost_usd: null }, estimated: true });
    // Aborted and made again: the aborted call counts its reported input too.
    meter.calling(prompt(20), approximateTokenCounter);
    meter.answered({ input_tokens: 21, output_tokens: 3 });
    expect(meter.spent(undefined)).toMatchObject({
      usage: { input_tokens: 921, cached_input_tokens: 800, cache_write_tokens: 60, output_tokens: streamed + 3 },
      estimated: true,
    });
  });

  it('an answer that reports 0 input tokens is taken at its word, not estimated', () => {
    const meter = new CallMeter();
    meter.calling(prompt(10), approximateTokenCounter);
    meter.answered({ input_tokens: 0, output_tokens: 7 });
    expect(meter.spent(undefined)).toMatchObject({ usage: { input_tokens: 0, output_tokens: 7 } });
    expect(meter.spent(undefined)?.estimated).toBeFalsy();
  });

  it('an answer that reports no usage: its output counted as the same answer streamed counts it', () => {
    const text = 'Hello! How can I help you today? The weather in Paris is sunny.';
    const args = '{"city":"Paris","unit":"celsius"}';
    const streamed = new CallMeter();
    streamed.calling(prompt(10), approximateTokenCounter);
    streamed.saw({ type: 'text_delta', delta: text });
    streamed.saw({ type: 'arguments_delta', call_id: 'call_1', delta: args });
    const generated = new CallMeter();
    generated.calling(prompt(10), approximateTokenCounter);
    generated.answered({ input_tokens: 0, output_tokens: 0, unreported: true }, [
      { type: 'message', role: 'assistant', content: text },
      { type: 'function_call', call_id: 'call_1', name: 'weather', arguments: args },
    ]);
    streamed.answered({ input_tokens: 0, output_tokens: 0, unreported: true });
    expect(generated.spent(undefined)).toEqual(streamed.spent(undefined));
    expect(generated.spent(undefined)?.estimated).toBe(true);
  });
});

describe('CallMeter, an aborted call whose answer reported no usage', () => {
  it('counts its output as the same answer streamed counts it', async () => {
    const text = 'Hello! How can I help you today? The weather in Paris is sunny.';
    const unreported = { input_tokens: 0, output_tokens: 0, unreported: true as const };
    const streamed = new CallMeter();
    streamed.calling(prompt(10), approximateTokenCounter);
    streamed.saw({ type: 'text_delta', delta: text });
    streamed.track(Promise.resolve({ usage: unreported, output: [] }));
    await streamed.settled();
    const generated = new CallMeter();
    generated.calling(prompt(10), approximateTokenCounter);
    generated.track(
      Promise.resolve({ usage: unreported, output: [{ type: 'message', role: 'assistant', content: text }] }),
    );
    await generated.settled();
    // Its answer dropped (a notice it showed did not move), the call is made again.
    for (const meter of [streamed, generated]) {
      meter.calling(prompt(20), approximateTokenCounter);
      meter.answered({ input_tokens: 21, output_tokens: 3 });
    }
    expect(generated.spent(undefined)).toEqual(streamed.spent(undefined));
    expect(generated.spent(undefined)?.usage.output_tokens).toBe(approximateTokenCounter.count(text) + 3);
  });
});

describe('CallMeter, a call that answered without usage and then failed', () => {
  it('is charged its estimate, an empty answer too (its completion failed to store)', () => {
    const unreported = { input_tokens: 0, output_tokens: 0, unreported: true as const };
    for (const output of [[], [{ type: 'message' as const, role: 'assistant' as const, content: '' }]]) {
      const meter = new CallMeter();
      meter.calling(prompt(10), approximateTokenCounter);
      meter.answered(unreported, output);
      expect(meter.failed(undefined, false)).toMatchObject({
        usage: { input_tokens: 10, output_tokens: 0 },
        estimated: true,
      });
    }
  });
});

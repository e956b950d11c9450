import { afterEach, describe, expect, it, vi } from 'vitest';
import { planCompaction, SummaryTimeoutError, summarizeContext } from '../../lib/compaction/index.ts';
import type { PromptItem } from '../../lib/items.ts';
import { ModelError, ModelTimeoutError } from '../../lib/models/errors.ts';
import type { ModelUsage } from '../../lib/models/model.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { renderTranscript } from '../../lib/compaction/summary-transcript.ts';
import { approximateTokenCounter, countPromptTokens, resolveTokenBudget } from '../../lib/tokens/index.ts';
import { type Answer, jsonAnswer, scriptedFetch, unanswered } from '../support/fake-providers/scripted-fetch.ts';

// A summary call that failed is charged its estimate (SummaryTimeoutError's `spent`, `onAborted`)
// only when its provider may have run the model (lib/models/provider-reach.ts), as a turn's call
// is: a request in flight when it timed out or was stopped, yes; one refused and waiting to retry
// (`retry-after-ms` far past the test), or refused with no retry, no. On an OpenAI-compatible
// model whose provider's answers are made up by its fetch; the deadline is a fake timer, fired
// once the refusal was seen.

const refusal = { error: { message: 'Rate limit reached', type: 'requests' } };
const refused = (headers: Record<string, string> = {}): Answer => jsonAnswer(429, refusal, headers);
/** Refused, to be retried once the test is long over. */
const refusedForLater = refused({ 'retry-after-ms': '30000' });
const user = (content: string): PromptItem => ({ type: 'message', role: 'user', content });
const items: PromptItem[] = ['plan the trip', 'to Paris', 'in May'].map((text, index) => ({
  ...user(text),
  seq: index + 1,
}));
const plan = planCompaction(items, { keepTokens: 0, counter: approximateTokenCounter })!;

function summaryModel(fetch: typeof globalThis.fetch, settings: Record<string, string>) {
  return resolveModel('openai-compatible:m', {
    OPENAI_COMPATIBLE_BASE_URL: 'http://provider.test/v1',
    fetch,
    ...settings,
  });
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => expect.fail('the summary was made'),
    (error: unknown) => error,
  );
}

afterEach(() => {
  vi.useRealTimers();
});

describe('a summary call that timed out', () => {
  // Its own deadline (`timeoutMs`, a manual compaction's), or its model's (MODEL_TIMEOUT_MS, a turn's).
  describe.each([
    ['its own deadline', { timeoutMs: 1000 }, '600000'],
    ["its model's deadline", {}, '1000'],
  ])('at %s', (_name, deadline, modelTimeout) => {
    it('while it waits to retry a 429: no estimate', async () => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      const script = scriptedFetch([refusedForLater]);
      const model = summaryModel(script.fetch, { MODEL_MAX_RETRIES: '1', MODEL_TIMEOUT_MS: modelTimeout });
      const failed = failure(summarizeContext(model, null, plan, { maxSummaryTokens: 100, ...deadline }));
      await script.answered();
      await vi.advanceTimersByTimeAsync(1000);
      const error = await failed;
      expect(error).toBeInstanceOf(ModelTimeoutError);
      expect(error).not.toBeInstanceOf(SummaryTimeoutError);
      expect(script.requests()).toBe(1);
    });

    it('with its request unanswered: its estimate', async () => {
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      const script = scriptedFetch([unanswered]);
      const model = summaryModel(script.fetch, { MODEL_MAX_RETRIES: '0', MODEL_TIMEOUT_MS: modelTimeout });
      const failed = failure(summarizeContext(model, null, plan, { maxSummaryTokens: 100, ...deadline }));
      await vi.waitFor(() => expect(script.requests()).toBe(1));
      await vi.advanceTimersByTimeAsync(1000);
      const error = await failed;
      expect(error).toBeInstanceOf(SummaryTimeoutError);
      expect((error as SummaryTimeoutError).spent.input_tokens).toBeGreaterThan(0);
      expect((error as SummaryTimeoutError).spent.output_tokens).toBe(0);
    });
  });
});

describe('a summary call stopped by its caller', () => {
  // With a deadline of its own too, or not (a turn's summary).
  describe.each([
    ['with a deadline', { timeoutMs: 600000 }],
    ['without', {}],
  ])('%s', (_name, deadline) => {
    async function stopped(answer: Answer, retries: string) {
      const script = scriptedFetch([answer]);
      const model = summaryModel(script.fetch, { MODEL_MAX_RETRIES: retries, MODEL_TIMEOUT_MS: '600000' });
      const stop = new AbortController();
      const spent: ModelUsage[] = [];
      const failed = failure(
        summarizeContext(model, null, plan, {
          maxSummaryTokens: 100,
          signal: stop.signal,
          onAborted: (usage) => spent.push(usage),
          ...deadline,
        }),
      );
      if (answer === unanswered) await vi.waitFor(() => expect(script.requests()).toBe(1));
      else await script.answered();
      stop.abort(new Error('closed by someone else'));
      await failed;
      return spent;
    }

    it('while it waits to retry a 429: no estimate', async () => {
      expect(await stopped(refusedForLater, '1')).toEqual([]);
    });

    it('with its request unanswered: its estimate', async () => {
      const [spent, ...more] = await stopped(unanswered, '0');
      expect(more).toEqual([]);
      expect(spent!.input_tokens).toBeGreaterThan(0);
    });
  });
});

describe('a Claude summary call stopped with its request unanswered', () => {
  it("is estimated with its window's counter, Claude's 3 characters a token", async () => {
    const script = scriptedFetch([unanswered]);
    const model = resolveModel('anthropic:claude-sonnet-4-5', {
      ANTHROPIC_API_KEY: 'sk-ant-test',
      ANTHROPIC_BASE_URL: 'http://provider.test/v1',
      MODEL_MAX_RETRIES: '0',
      fetch: script.fetch,
    });
    const window = resolveTokenBudget(model.id, { context_limit: 0, response_reserve: 0 });
    const instructions = 'Summarize the conversation. '.repeat(100);
    const stop = new AbortController();
    const spent: ModelUsage[] = [];
    const failed = failure(
      summarizeContext(model, null, plan, {
        maxSummaryTokens: 100,
        window,
        prompt: instructions,
        signal: stop.signal,
        onAborted: (usage) => spent.push(usage),
      }),
    );
    await vi.waitFor(() => expect(script.requests()).toBe(1));
    stop.abort(new Error('closed by someone else'));
    await failed;
    const sent: PromptItem[] = [
      { type: 'message', role: 'system', content: instructions },
      user(renderTranscript(null, plan.summarized, new Set())),
    ];
    expect(spent).toEqual([{ input_tokens: countPromptTokens(sent, [], window.counter), output_tokens: 0 }]);
  });
});

describe('a summary call refused with no retry', () => {
  it.each([
    ['with a deadline', { timeoutMs: 600000 }],
    ['without', {}],
  ])('%s: its model error, no estimate', async (_name, deadline) => {
    const script = scriptedFetch([refused()]);
    const model = summaryModel(script.fetch, { MODEL_MAX_RETRIES: '0', MODEL_TIMEOUT_MS: '600000' });
    const spent: ModelUsage[] = [];
    const error = await failure(
      summarizeContext(model, null, plan, {
        maxSummaryTokens: 100,
        onAborted: (usage) => spent.push(usage),
        ...deadline,
      }),
    );
    expect(error).toBeInstanceOf(ModelError);
    expect(error).not.toBeInstanceOf(ModelTimeoutError);
    expect(spent).toEqual([]);
  });
});

describe('a summary model that throws before its call starts', () => {
  it('fails the summary and leaves no deadline timer behind', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const model = summaryModel(scriptedFetch([unanswered]).fetch, { MODEL_TIMEOUT_MS: '600000' });
    const throwing = {
      ...model,
      generate: () => {
        throw new ModelError('refused before the call', { model: model.id });
      },
    } as typeof model;
    const error = await failure(summarizeContext(throwing, null, plan, { maxSummaryTokens: 100, timeoutMs: 600000 }));
    expect(error).toBeInstanceOf(ModelError);
    expect(vi.getTimerCount()).toBe(0);
  });
});

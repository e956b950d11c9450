import { afterEach, describe, expect, it, vi } from 'vitest';
import { ModelError, ModelTimeoutError } from '../../lib/models/errors.ts';
import type { Model, ModelRequest } from '../../lib/models/model.ts';
import { providerMayHaveRun } from '../../lib/models/provider-reach.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { collectStream } from '../support/fake-providers/collect-stream.ts';
import { fixture } from '../support/fake-providers/fake-provider-server.ts';
import {
  type Answer,
  jsonAnswer as json,
  scriptedFetch as scripted,
  sseAnswer as sse,
  unanswered,
} from '../support/fake-providers/scripted-fetch.ts';

// Whether a failed call's provider may have run the model (lib/models/provider-reach.ts), as the
// OpenAI-compatible and Anthropic models mark their failures, their provider's answers made up
// by the fetch they are given: a 2xx on any attempt says yes, whatever failed after; a request
// still unanswered when the call ended says yes; refusals alone, or a call ended while it waits
// to retry one, say no. The deadline is a fake timer, fired once the refusal was seen.

const request: ModelRequest = {
  prompt: [{ type: 'message', role: 'user', content: 'Hello' }],
  tools: [],
  maxOutputTokens: 64,
};

/** The first `count` events of a recorded stream. */
const firstEvents = (name: string, count: number) => `${fixture(name).split('\n\n').slice(0, count).join('\n\n')}\n\n`;

const providers = [
  {
    name: 'openai-compatible',
    model: (fetch: typeof globalThis.fetch, settings: Record<string, string>) =>
      resolveModel('openai-compatible:m', {
        OPENAI_COMPATIBLE_BASE_URL: 'http://provider.test/v1',
        fetch,
        ...settings,
      }),
    refusal: { error: { message: 'Rate limit reached', type: 'requests' } },
    wrongShape: { id: 'chatcmpl-1', choices: 'not a list' },
    cutAfterOutput: `${firstEvents('openai-chat-text.sse', 2)}data: {"choices": [\n\n`,
  },
  {
    name: 'anthropic',
    model: (fetch: typeof globalThis.fetch, settings: Record<string, string>) =>
      resolveModel('anthropic:claude-sonnet-4-5', {
        ANTHROPIC_API_KEY: 'sk-ant',
        ANTHROPIC_BASE_URL: 'http://provider.test/v1',
        fetch,
        ...settings,
      }),
    refusal: { type: 'error', error: { type: 'rate_limit_error', message: 'Rate limited' } },
    wrongShape: { type: 'message', content: 'not a list of blocks' },
    cutAfterOutput: `${firstEvents('anthropic-message-text.sse', 4)}event: content_block_delta\ndata: {"type": \n\n`,
  },
];

const calls = {
  generate: (model: Model) => model.generate(request),
  stream: (model: Model) => collectStream(model.stream(request)),
};
const modes = ['generate', 'stream'] as const;

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => expect.fail('the call succeeded'),
    (error: unknown) => error,
  );
}

afterEach(() => {
  vi.useRealTimers();
});

describe.each(providers)('$name: whether a failed call may have run', (provider) => {
  it.each(modes)('a 429 waited on to retry at the deadline: no (%s)', async (mode) => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const script = scripted([json(429, provider.refusal, { 'retry-after-ms': '30000' })]);
    const model = provider.model(script.fetch, { MODEL_MAX_RETRIES: '1', MODEL_TIMEOUT_MS: '1000' });
    const failed = failure(calls[mode](model));
    await script.answered(1);
    await vi.advanceTimersByTimeAsync(1000);
    const error = await failed;
    expect(error).toBeInstanceOf(ModelTimeoutError);
    expect(providerMayHaveRun(error)).toBe(false);
    expect(script.requests()).toBe(1);
  });

  it.each(modes)('a request unanswered at the deadline: yes (%s)', async (mode) => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const script = scripted([unanswered]);
    const model = provider.model(script.fetch, { MODEL_MAX_RETRIES: '0', MODEL_TIMEOUT_MS: '1000' });
    const failed = failure(calls[mode](model));
    await vi.waitFor(() => expect(script.requests()).toBe(1));
    await vi.advanceTimersByTimeAsync(1000);
    const error = await failed;
    expect(error).toBeInstanceOf(ModelTimeoutError);
    expect(providerMayHaveRun(error)).toBe(true);
  });

  it.each(modes)('refused, then refused again on its retry: no (%s)', async (mode) => {
    const now = { 'retry-after-ms': '0' };
    const script = scripted([json(500, provider.refusal, now), json(429, provider.refusal, now)]);
    const model = provider.model(script.fetch, { MODEL_MAX_RETRIES: '1', MODEL_TIMEOUT_MS: '600000' });
    const error = await failure(calls[mode](model));
    expect(error).toBeInstanceOf(ModelError);
    expect(providerMayHaveRun(error)).toBe(false);
    expect(script.requests()).toBe(2);
  });

  it('refused, then accepted on its retry with an answer that fails: yes', async () => {
    const now = { 'retry-after-ms': '0' };
    const script = scripted([json(500, provider.refusal, now), json(200, provider.wrongShape)]);
    const model = provider.model(script.fetch, { MODEL_MAX_RETRIES: '1', MODEL_TIMEOUT_MS: '600000' });
    const error = await failure(calls.generate(model));
    expect(error).toBeInstanceOf(ModelError);
    expect(providerMayHaveRun(error)).toBe(true);
  });

  it('a stream accepted, broken after output: yes', async () => {
    const script = scripted([sse(provider.cutAfterOutput)]);
    const model = provider.model(script.fetch, { MODEL_MAX_RETRIES: '1', MODEL_TIMEOUT_MS: '600000' });
    const error = await failure(calls.stream(model));
    expect(error).toBeInstanceOf(ModelError);
    expect(providerMayHaveRun(error)).toBe(true);
    expect(script.requests()).toBe(1);
  });

  it.each(modes)('a connection never made: no (%s)', async (mode) => {
    const refused: Answer = async () => {
      throw new TypeError('fetch failed', {
        cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
      });
    };
    const script = scripted([refused]);
    const model = provider.model(script.fetch, { MODEL_MAX_RETRIES: '0', MODEL_TIMEOUT_MS: '600000' });
    const error = await failure(calls[mode](model));
    expect(error).toBeInstanceOf(ModelError);
    expect(providerMayHaveRun(error)).toBe(false);
  });
});

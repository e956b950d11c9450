import { afterEach, describe, expect, it } from 'vitest';
import { TailgateError } from '../../lib/errors.ts';
import { ModelError, ModelTimeoutError } from '../../lib/models/errors.ts';
import type { Model, ModelRequest } from '../../lib/models/model.ts';
import { resolveModel, type ModelEnvironment } from '../../lib/models/resolve-model.ts';
import { collectStream } from '../support/fake-providers/collect-stream.ts';
import {
  fixture,
  startFakeProvider,
  type FakeProvider,
  type FakeReply,
} from '../support/fake-providers/fake-provider-server.ts';

interface ProviderCase {
  name: string;
  model: (baseURL: string, settings: ModelEnvironment) => Model;
  /** A wrong-shaped (but valid JSON) answer. */
  wrongShape: unknown;
  /** A stream whose second event is not JSON. */
  brokenStream: string;
  /** The first event of a real stream, after which the fake server hangs. */
  firstEvents: string;
  errorBody: unknown;
}

const providers: ProviderCase[] = [
  {
    name: 'openai-compatible',
    model: (baseURL, settings) =>
      resolveModel('openai-compatible:test-model', { OPENAI_COMPATIBLE_BASE_URL: baseURL, ...settings }),
    wrongShape: { id: 'chatcmpl-1', choices: 'not a list' },
    brokenStream:
      fixture('openai-chat-text.sse').split('\n\n').slice(0, 2).join('\n\n') +
      '\n\ndata: {"choices": [{"delta": \n\ndata: [DONE]\n\n',
    firstEvents: `${fixture('openai-chat-text.sse').split('\n\n').slice(0, 2).join('\n\n')}\n\n`,
    errorBody: { error: { message: 'The server had an error while processing your request.', type: 'server_error' } },
  },
  {
    name: 'anthropic',
    model: (baseURL, settings) =>
      resolveModel('anthropic:claude-sonnet-4-5', {
        ANTHROPIC_API_KEY: 'sk-ant',
        ANTHROPIC_BASE_URL: baseURL,
        ...settings,
      }),
    wrongShape: { type: 'message', content: 'not a list of blocks' },
    brokenStream:
      fixture('anthropic-message-text.sse').split('\n\n').slice(0, 2).join('\n\n') +
      '\n\nevent: content_block_delta\ndata: {"type": "content_block_delta", "index": \n\n',
    firstEvents: `${fixture('anthropic-message-text.sse').split('\n\n').slice(0, 4).join('\n\n')}\n\n`,
    errorBody: { type: 'error', error: { type: 'api_error', message: 'Internal server error' } },
  },
];

const request: ModelRequest = {
  prompt: [{ type: 'message', role: 'user', content: 'Hello' }],
  tools: [],
  maxOutputTokens: 256,
};

let provider: FakeProvider | undefined;
afterEach(async () => {
  await provider?.close();
  provider = undefined;
});

async function start(providerCase: ProviderCase, reply: FakeReply, settings: ModelEnvironment = {}) {
  provider = await startFakeProvider(() => reply);
  return providerCase.model(provider.baseURL, { MODEL_MAX_RETRIES: 0, ...settings });
}

async function failure(promise: Promise<unknown>): Promise<TailgateError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(TailgateError);
  return error as TailgateError;
}

const calls = {
  generate: (model: Model, options: Partial<ModelRequest> = {}) => model.generate({ ...request, ...options }),
  stream: (model: Model, options: Partial<ModelRequest> = {}) =>
    collectStream(model.stream({ ...request, ...options })),
};
const modes = ['generate', 'stream'] as const;

describe.each(providers)('$name adapter failures', (providerCase) => {
  it.each(modes)('a 500 becomes ModelError (%s), retried MODEL_MAX_RETRIES times', async (mode) => {
    const model = await start(
      providerCase,
      { status: 500, headers: { 'retry-after-ms': '1' }, json: providerCase.errorBody },
      { MODEL_MAX_RETRIES: '1' },
    );
    const error = await failure(calls[mode](model));
    expect(error).toBeInstanceOf(ModelError);
    expect(error.code).toBe('model_error');
    expect(error.details).toMatchObject({ status: 500 });
    expect(provider!.requests).toHaveLength(2);
  });

  it.each(modes)('a 400 becomes ModelError without a retry (%s)', async (mode) => {
    const model = await start(providerCase, { status: 400, json: providerCase.errorBody }, { MODEL_MAX_RETRIES: '3' });
    const error = await failure(calls[mode](model));
    expect(error).toBeInstanceOf(ModelError);
    expect(error.details).toMatchObject({ status: 400 });
    expect(provider!.requests).toHaveLength(1);
  });

  it('a body that is not JSON becomes ModelError', async () => {
    const model = await start(providerCase, { text: '<html>upstream gateway error</html>' });
    expect(await failure(calls.generate(model))).toBeInstanceOf(ModelError);
  });

  it('a JSON body of the wrong shape becomes ModelError', async () => {
    const model = await start(providerCase, { json: providerCase.wrongShape });
    expect(await failure(calls.generate(model))).toBeInstanceOf(ModelError);
  });

  it('a stream with a malformed event becomes ModelError', async () => {
    const model = await start(providerCase, { sse: providerCase.brokenStream });
    expect(await failure(calls.stream(model))).toBeInstanceOf(ModelError);
  });

  it('a stream cut off before its final event becomes ModelError', async () => {
    const model = await start(providerCase, { sse: providerCase.firstEvents });
    const events: string[] = [];
    const error = await failure(
      (async () => {
        for await (const event of model.stream(request)) events.push(event.type);
      })(),
    );
    expect(error).toBeInstanceOf(ModelError);
    // The stream's 200 says nothing of the failure: no status.
    expect(error.details).not.toHaveProperty('status');
    // Anthropic's message_start reported the input before the text.
    expect(events).toEqual(providerCase.name === 'anthropic' ? ['input_reported', 'text_delta'] : ['text_delta']);
  });

  it.each(modes)('a server that never answers gives ModelTimeoutError after MODEL_TIMEOUT_MS (%s)', async (mode) => {
    const model = await start(providerCase, { hang: true }, { MODEL_TIMEOUT_MS: '150' });
    // The server never answers: only the timeout can end the call (else the test's own timeout would).
    const error = await failure(calls[mode](model));
    expect(error).toBeInstanceOf(ModelTimeoutError);
    expect(error.code).toBe('model_timeout');
    expect(error.details).toMatchObject({ timeout_ms: 150 });
  });

  it('a stream that stops in the middle gives ModelTimeoutError', async () => {
    const model = await start(providerCase, { sse: providerCase.firstEvents, hang: true }, { MODEL_TIMEOUT_MS: '200' });
    expect(await failure(calls.stream(model))).toBeInstanceOf(ModelTimeoutError);
  });

  it.each(modes)("the caller's abort signal gives ModelTimeoutError (%s)", async (mode) => {
    const model = await start(providerCase, { hang: true });
    const controller = new AbortController();
    const failed = failure(calls[mode](model, { signal: controller.signal }));
    // Aborted once the provider holds the call: in the middle of it, however long it took to get there.
    await expect.poll(() => provider!.requests.length).toBe(1);
    controller.abort(new Error('client went away'));
    expect(await failed).toBeInstanceOf(ModelTimeoutError);
  });

  it.each(modes)(
    'a signal aborted before the call gives ModelTimeoutError and leaves no rejection unhandled (%s)',
    async (mode) => {
      // A turn stopped (cancelled, interrupted, its session deleted) between its claim and its
      // model call: an unhandled rejection ends a Deno or Node server.
      const unhandled: unknown[] = [];
      const onUnhandled = (reason: unknown) => void unhandled.push(reason);
      process.on('unhandledRejection', onUnhandled);
      try {
        const model = await start(providerCase, { hang: true });
        const controller = new AbortController();
        controller.abort();
        expect(await failure(calls[mode](model, { signal: controller.signal }))).toBeInstanceOf(ModelTimeoutError);
        // The abandoned provider call settles within a few turns of the event loop.
        for (let turn = 0; turn < 20; turn++) await new Promise((resolve) => setImmediate(resolve));
        expect(unhandled).toEqual([]);
      } finally {
        process.off('unhandledRejection', onUnhandled);
      }
    },
  );

  it('a consumer that stops reading the stream closes the provider connection', async () => {
    const model = await start(providerCase, { sse: providerCase.firstEvents, hang: true });
    for await (const event of model.stream(request)) {
      // Anthropic's reported input comes first: the consumer stops at the first output.
      if (event.type === 'input_reported') continue;
      expect(event.type).toBe('text_delta');
      break;
    }
    await provider!.requests[0]!.closed;
  });
});

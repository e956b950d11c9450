import { readFileSync } from 'node:fs';
import { createAnthropic } from '@ai-sdk/anthropic';
import { afterEach, describe, expect, it } from 'vitest';
import { ANTHROPIC_SDK_VERSION, anthropicMessagesModel } from '../../lib/models/anthropic-messages.ts';
import { recordingFetch } from '../support/fake-providers/recording-fetch.ts';

type MessagesModel = ReturnType<typeof anthropicMessagesModel>;
type CallOptions = Parameters<MessagesModel['doGenerate']>[0];

const recording = () => recordingFetch('anthropic-message-text');

const call: CallOptions = {
  prompt: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: [{ type: 'text', text: 'What is the weather in Paris?' }] },
  ],
  maxOutputTokens: 256,
  tools: [
    {
      type: 'function',
      name: 'weather',
      description: 'The weather in a city',
      inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  ],
  providerOptions: { anthropic: { disableParallelToolUse: true, metadata: { userId: 'user-1' } } },
};

/**
 * A call with what tailgate sends beyond text (lib/models/anthropic-model.ts): a PDF, an image
 * by URL, a prompt-cache breakpoint and thinking, each of which may add to the request's headers.
 */
const richCall: CallOptions = {
  ...call,
  prompt: [
    { role: 'system', content: 'Be brief.' },
    {
      role: 'user',
      content: [
        {
          type: 'file',
          mediaType: 'application/pdf',
          data: { type: 'data', data: new Uint8Array([37, 80, 68, 70]) },
          filename: 'a.pdf',
        },
        { type: 'file', mediaType: 'image/png', data: { type: 'url', url: new URL('https://example.com/a.png') } },
        {
          type: 'text',
          text: 'What does it say?',
          providerOptions: { anthropic: { cacheControl: { type: 'ephemeral' } } },
        },
      ],
    },
  ],
  reasoning: 'high',
};

/** What the model sends and answers for `call`, generated and streamed. */
async function exchange(make: (fetch: typeof globalThis.fetch) => MessagesModel, asked: CallOptions = call) {
  const { fetch, sent } = recording();
  const model = make(fetch);
  const generated = await model.doGenerate(asked);
  const streamed = await model.doStream(asked);
  const parts: unknown[] = [];
  for await (const part of streamed.stream) parts.push(part);
  return {
    model: { provider: model.provider, modelId: model.modelId, supportedUrls: await model.supportedUrls },
    sent,
    generated: { content: generated.content, finishReason: generated.finishReason, usage: generated.usage },
    parts,
  };
}

const sdk = (settings: { apiKey: string; baseURL?: string }) => (fetch: typeof globalThis.fetch) =>
  createAnthropic({ ...settings, fetch }).messages('claude-sonnet-4-5') as unknown as MessagesModel;
const ours = (settings: { apiKey: string; baseURL?: string }) => (fetch: typeof globalThis.fetch) =>
  anthropicMessagesModel({ modelName: 'claude-sonnet-4-5', ...settings, fetch });

const savedBaseURL = process.env.ANTHROPIC_BASE_URL;
afterEach(() => {
  if (savedBaseURL === undefined) delete process.env.ANTHROPIC_BASE_URL;
  else process.env.ANTHROPIC_BASE_URL = savedBaseURL;
});

describe('anthropicMessagesModel', () => {
  it('names the installed @ai-sdk/anthropic version in its user agent', () => {
    const installed = JSON.parse(
      readFileSync(new URL('../../node_modules/@ai-sdk/anthropic/package.json', import.meta.url), 'utf8'),
    ) as { version: string };
    expect(ANTHROPIC_SDK_VERSION).toBe(installed.version);
  });

  it.each([
    ['no base URL', undefined],
    ["Anthropic's host without the version", 'https://api.anthropic.com'],
    ["Anthropic's host with a trailing slash", 'https://api.anthropic.com/'],
    ['a proxy with a trailing slash', 'http://proxy.example/anthropic/v1/'],
  ])('sends and answers as createAnthropic(...).messages does, with %s', async (_, baseURL) => {
    delete process.env.ANTHROPIC_BASE_URL;
    const settings = { apiKey: 'sk-ant-test', ...(baseURL !== undefined ? { baseURL } : {}) };
    const expected = await exchange(sdk(settings));
    expect(await exchange(ours(settings))).toEqual(expected);
    expect(expected.sent.map((request) => request.headers['x-api-key'])).toEqual(['sk-ant-test', 'sk-ant-test']);
  });

  it('sends a PDF, an image URL, a cache breakpoint and thinking as createAnthropic(...).messages does', async () => {
    delete process.env.ANTHROPIC_BASE_URL;
    const settings = { apiKey: 'sk-ant-test' };
    const expected = await exchange(sdk(settings), richCall);
    expect(await exchange(ours(settings), richCall)).toEqual(expected);
    const body = JSON.stringify(expected.sent[0]!.body);
    expect(body).toContain('"thinking"');
    expect(body).toContain('"cache_control"');
    expect(body).toContain('"document"');
    const usage = expected.parts.find((part) => (part as { type?: string }).type === 'finish');
    expect(usage).toMatchObject({ usage: { outputTokens: { total: expect.any(Number) } } });
  });

  it('takes ANTHROPIC_BASE_URL from the environment without a base URL, as createAnthropic does', async () => {
    process.env.ANTHROPIC_BASE_URL = 'http://from-env.example/v1';
    const expected = await exchange(sdk({ apiKey: 'sk-ant-test' }));
    expect(expected.sent[0]!.url).toBe('http://from-env.example/v1/messages');
    expect(await exchange(ours({ apiKey: 'sk-ant-test' }))).toEqual(expected);
  });

  it('refuses a blank base URL, as createAnthropic does', () => {
    const { fetch } = recording();
    expect(() => sdk({ apiKey: 'sk-ant-test', baseURL: ' ' })(fetch)).toThrow('baseURL must be a non-empty string');
    expect(() => ours({ apiKey: 'sk-ant-test', baseURL: ' ' })(fetch)).toThrow('baseURL must be a non-empty string');
  });
});

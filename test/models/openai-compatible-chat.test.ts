import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { describe, expect, it } from 'vitest';
import { openaiCompatibleChatModel } from '../../lib/models/openai-compatible-chat.ts';
import { recordingFetch } from '../support/fake-providers/recording-fetch.ts';

type ChatModel = ReturnType<typeof openaiCompatibleChatModel>;
type CallOptions = Parameters<ChatModel['doGenerate']>[0];

const recording = () => recordingFetch('openai-chat-text');

const call: CallOptions = {
  prompt: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: [{ type: 'text', text: 'What is the weather in Paris?' }] },
  ],
  maxOutputTokens: 256,
  responseFormat: {
    type: 'json',
    name: 'weather',
    schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
  tools: [
    {
      type: 'function',
      name: 'weather',
      description: 'The weather in a city',
      inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  ],
};

/** What the model sends and answers for `call`, generated and streamed. */
async function exchange(make: (fetch: typeof globalThis.fetch) => ChatModel) {
  const { fetch, sent } = recording();
  const model = make(fetch);
  const generated = await model.doGenerate(call);
  const streamed = await model.doStream(call);
  const parts: unknown[] = [];
  for await (const part of streamed.stream) parts.push(part);
  return {
    model: { provider: model.provider, modelId: model.modelId, supportedUrls: await model.supportedUrls },
    sent,
    generated: { content: generated.content, finishReason: generated.finishReason, usage: generated.usage },
    parts,
  };
}

/** A body change of the kind createOpenAICompatibleModel makes (lib/models/openai-compatible-model.ts). */
const transformRequestBody = (body: Record<string, unknown>) => ({ ...body, transformed: true });

describe('openaiCompatibleChatModel', () => {
  it.each([
    ['OpenAI, with a key and structured outputs', 'openai', 'https://api.openai.com/v1', 'sk-test', true],
    [
      'a compatible server without a key, its URL with a trailing slash',
      'openai-compatible',
      'http://local/v1/',
      undefined,
      false,
    ],
    ['a compatible server with an empty key', 'openai-compatible', 'http://local/v1', '', false],
  ])(
    'sends and answers as createOpenAICompatible(...).chatModel does: %s',
    async (_, name, baseURL, apiKey, structured) => {
      const keyed = apiKey !== undefined ? { apiKey } : {};
      const sdk = (fetch: typeof globalThis.fetch) =>
        createOpenAICompatible({
          name,
          baseURL,
          ...keyed,
          fetch,
          includeUsage: true,
          ...(structured ? { supportsStructuredOutputs: true } : {}),
          transformRequestBody,
        }).chatModel('gpt-test') as ChatModel;
      const ours = (fetch: typeof globalThis.fetch) =>
        openaiCompatibleChatModel({
          providerName: name,
          modelName: 'gpt-test',
          baseURL,
          ...keyed,
          fetch,
          ...(structured ? { structuredOutputs: true } : {}),
          transformRequestBody,
        });
      const expected = await exchange(sdk);
      expect(await exchange(ours)).toEqual(expected);
      expect(expected.sent.map((request) => (request.body as { transformed?: boolean }).transformed)).toEqual([
        true,
        true,
      ]);
    },
  );
});

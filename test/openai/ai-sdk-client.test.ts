import { createOpenAI } from '@ai-sdk/openai';
import { APICallError, generateText, type ModelMessage, stepCountIs, streamText, tool } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startTailgate, TOKEN } from './server.ts';

// The AI SDK's OpenAI provider (Responses API) with its baseURL on tailgate (echo model).
let tailgate: Awaited<ReturnType<typeof startTailgate>>;

beforeAll(async () => {
  tailgate = await startTailgate({ MODEL_ALIASES: 'gpt-4.1-mini=echo' });
});
afterAll(() => tailgate.close());

describe('@ai-sdk/openai against tailgate', () => {
  it('generateText runs a tool and answers in a second step', async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL });
    const calls: unknown[] = [];
    const result = await generateText({
      model: openai('gpt-4.1-mini'),
      prompt: 'call get_weather {"city":"Paris"}',
      tools: {
        get_weather: tool({
          inputSchema: z.object({ city: z.string() }),
          execute: async (input) => {
            calls.push(input);
            return '18C, clear';
          },
        }),
      },
      stopWhen: stepCountIs(3),
    });
    expect(calls).toEqual([{ city: 'Paris' }]);
    expect(result.steps).toHaveLength(2);
    expect(result.text).toBe('echo: call get_weather {"city":"Paris"}');
    expect(result.steps[0]!.response.id).toMatch(/^resp_conv_/);
  });

  it('streamText streams the answer', async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL });
    const result = streamText({ model: openai('echo'), system: 'Be brief.', prompt: 'stream me' });
    const chunks: string[] = [];
    for await (const chunk of result.textStream) chunks.push(chunk);
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.join('')).toBe('echo: stream me');
    expect((await result.usage).inputTokens).toBeGreaterThan(0);
  });

  it('a chat that resends its messages goes on after a response compacted (contextManagement)', async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL });
    const long = (word: string) => Array.from({ length: 30 }, () => word).join(' ');
    const providerOptions = { openai: { contextManagement: [{ type: 'compaction' as const, compactThreshold: 100 }] } };
    const messages: ModelMessage[] = [{ role: 'user', content: long('alpha') }];
    const first = await generateText({ model: openai('gpt-4.1-mini'), messages, providerOptions });
    messages.push(...first.response.messages, { role: 'user', content: long('bravo') });
    const second = await generateText({ model: openai('gpt-4.1-mini'), messages, providerOptions });
    // The second response compacted: its output ends with the compaction item.
    expect(second.content.map((part) => part.type)).toEqual(['text', 'custom']);
    messages.push(...second.response.messages, { role: 'user', content: 'short' });
    // The AI SDK sends the compaction item back as {type: 'item_reference', id: 'cmp_...'}.
    const third = await generateText({ model: openai('gpt-4.1-mini'), messages, providerOptions });
    expect(third.text).toBe('echo: short');
    const conversation = /^resp_(conv_[0-9a-f]+)_/.exec(first.response.id)![1];
    expect(third.response.id.startsWith(`resp_${conversation}_3_`)).toBe(true);
  });

  it('takes a refusal marked x-should-retry: false for retryable all the same: it reads no such header', async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL });
    // A model whose provider key the deployment lacks: 503 not_configured, which a retry meets again.
    const refused = await generateText({ model: openai('openai:gpt-4.1-mini'), prompt: 'x', maxRetries: 0 }).catch(
      (error: unknown) => error,
    );
    expect(APICallError.isInstance(refused)).toBe(true);
    const { statusCode, responseHeaders, isRetryable } = refused as APICallError;
    expect({ statusCode, shouldRetry: responseHeaders?.['x-should-retry'], isRetryable }).toEqual({
      statusCode: 503,
      shouldRetry: 'false',
      isRetryable: true,
    });
  });
});

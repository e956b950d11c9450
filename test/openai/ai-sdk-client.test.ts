import { createOpenAI } from '@ai-sdk/openai';
import { generateText, stepCountIs, streamText, tool } from 'ai';
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
});

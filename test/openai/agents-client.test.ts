import { Agent, OpenAIProvider, Runner, tool } from '@openai/agents';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startTailgate, TOKEN } from './server.ts';
import { agentsTracingOff } from './agents-tracing.ts';

// One agent run of @openai/agents (Responses API) with one function tool, on tailgate's echo model.
let tailgate: Awaited<ReturnType<typeof startTailgate>>;

agentsTracingOff();
beforeAll(async () => {
  tailgate = await startTailgate();
});
afterAll(() => tailgate.close());

describe('@openai/agents against tailgate', () => {
  it('runs an agent whose model calls a function tool, then answers', async () => {
    const calls: unknown[] = [];
    const getWeather = tool({
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: z.object({ city: z.string() }),
      execute: async (input) => {
        calls.push(input);
        return '18C, clear';
      },
    });
    const agent = new Agent({ name: 'weather', instructions: 'Be brief.', model: 'echo', tools: [getWeather] });
    const provider = new OpenAIProvider({
      openAIClient: new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 }),
      useResponses: true,
    });
    const runner = new Runner({ modelProvider: provider, tracingDisabled: true });
    const result = await runner.run(agent, 'call get_weather {"city":"Paris"}');
    expect(calls).toEqual([{ city: 'Paris' }]);
    expect(result.finalOutput).toBe('echo: call get_weather {"city":"Paris"}');
  });
});

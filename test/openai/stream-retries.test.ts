import { createOpenAI } from '@ai-sdk/openai';
import { stepCountIs, streamText, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseResponseId } from '../../lib/openai/ids.ts';
import { fixture } from '../support/fake-providers/fake-provider-server.ts';
import { clientOnFakeOpenAI, tailgateGet, TOKEN } from './server.ts';

// The AI SDK's streamText with `streamRetries` takes a step again when its stream failed after
// it began (response.failed): the same request, whose failed attempt stayed in the conversation
// with its input (lib/openai/failed-steps.ts). The model calls get_weather, then its first answer
// to the call breaks off after its first words, and the next one is whole.
const firstWords = `${fixture('openai-chat-text.sse').split('\n\n').slice(0, 2).join('\n\n')}\n\n`;
let answers = 0;
const world = clientOnFakeOpenAI((request) => {
  if (!JSON.stringify(request.body?.messages).includes('"role":"tool"'))
    return { sse: fixture('openai-chat-tool-call.sse') };
  answers += 1;
  return { sse: answers === 1 ? firstWords : fixture('openai-chat-text.sse') };
});

describe("the AI SDK's streamText retrying a tool step whose stream failed", () => {
  it('goes on in its conversation, the outputs stored once', async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL });
    const errors: unknown[] = [];
    const result = streamText({
      model: openai('gpt-4o-mini'),
      prompt: 'Weather in Paris?',
      tools: { get_weather: tool({ inputSchema: z.object({ location: z.string() }), execute: async () => 'sunny' }) },
      stopWhen: stepCountIs(3),
      streamRetries: 1,
      onError: ({ error }) => {
        errors.push(error);
      },
    });
    expect(await result.text).toBe('Hello! How can I help you today?');
    // The failed attempt's error reached onError, and the step was sent again by itself.
    expect(errors).toHaveLength(1);
    expect(answers).toBe(2);
    const [first, second] = (await result.steps).map((step) => parseResponseId(step.response.id)!);
    expect(second!.sessionId).toBe(first!.sessionId);
    const listed = await tailgateGet(world.tailgate.baseURL, `/sessions/${first!.sessionId}/items?limit=100`);
    expect(listed.items.reverse().map((item: { type: string }) => item.type)).toEqual([
      'message',
      'function_call',
      'function_call_output',
      'message',
    ]);
  });
});

import { createOpenAI } from '@ai-sdk/openai';
import { jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { parseResponseId } from '../../lib/openai/ids.ts';
import { fixture } from '../support/fake-providers/fake-provider-server.ts';
import { clientOnFakeOpenAI, TOKEN } from './server.ts';

// The provider streams a call's arguments with a space after the colon (the recorded chat
// completions stream, one piece changed): `{"location": "Paris, France"}`. The call keeps that
// text; a client that resends it as its own JSON of the parsed arguments (the AI SDK) sends
// `{"location":"Paris, France"}`. A request after the call answers with text.
const spaced = fixture('openai-chat-tool-call.sse').replace('"arguments":"\\":\\""', '"arguments":"\\": \\""');
const world = clientOnFakeOpenAI((request) => {
  const answered = JSON.stringify(request.body?.messages).includes('"role":"tool"');
  if (answered) return { sse: fixture('openai-chat-text.sse') };
  return { sse: spaced };
});

describe('a tool call whose streamed arguments are not the JSON a client writes of them', () => {
  it('continues the conversation when the AI SDK resends the call as its JSON (no previous_response_id)', async () => {
    expect(spaced).not.toBe(fixture('openai-chat-tool-call.sse'));
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL });
    const inputs: unknown[] = [];
    const result = streamText({
      model: openai('gpt-4o-mini'),
      prompt: 'Weather in Paris?',
      tools: {
        get_weather: tool({
          inputSchema: jsonSchema<{ location: string }>({
            type: 'object',
            properties: { location: { type: 'string' } },
            required: ['location'],
          }),
          execute: async (input) => {
            inputs.push(input);
            return 'sunny';
          },
        }),
      },
      stopWhen: stepCountIs(2),
    });
    await result.consumeStream();
    const steps = await result.steps;
    expect(inputs).toEqual([{ location: 'Paris, France' }]);
    expect(steps).toHaveLength(2);
    const [first, second] = steps.map((step) => parseResponseId(step.response.id));
    // The second step is the same conversation's next turn, not a new conversation.
    expect(second?.sessionId).toBe(first?.sessionId);
    expect(second?.turn).toBe(first!.turn + 1);
  });
});

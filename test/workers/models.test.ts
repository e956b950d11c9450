import { describe, expect, it } from 'vitest';
import { UnknownModelError } from '../../lib/models/errors.ts';
import { echoModel } from '../../lib/models/echo.ts';
import type { ModelStreamEvent } from '../../lib/models/model.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { fakeAiBinding, sseStream } from '../support/fake-providers/fake-ai-binding.ts';

// Fixtures are inlined: workerd tests have no file system.
const chatCompletion = {
  id: 'chatcmpl-1',
  object: 'chat.completion',
  created: 1741569952,
  model: 'gpt-4.1-2025-04-14',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello from workerd' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 5, completion_tokens: 4, total_tokens: 9 },
};

async function collect(stream: AsyncIterable<ModelStreamEvent>) {
  const events: ModelStreamEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

const hello = { prompt: [{ type: 'message' as const, role: 'user' as const, content: 'Hello there' }], tools: [] };

describe('models inside workerd', () => {
  it('echo generates and streams', async () => {
    expect(resolveModel('echo', {})).toBe(echoModel);
    const result = await echoModel.generate(hello);
    expect(result.output).toEqual([{ type: 'message', role: 'assistant', content: 'echo: Hello there' }]);
    const events = await collect(echoModel.stream(hello));
    expect(events.at(-1)).toEqual({ type: 'done', result });
  });

  it('an unknown model is invalid_request', () => {
    expect(() => resolveModel('nope:x', {})).toThrow(UnknownModelError);
  });

  it('the openai-compatible adapter runs with an injected fetch', async () => {
    const bodies: unknown[] = [];
    const model = resolveModel('openai-compatible:m', {
      OPENAI_COMPATIBLE_BASE_URL: 'https://models.invalid/v1',
      fetch: async (_input, init) => {
        bodies.push(JSON.parse(String(init?.body)));
        return new Response(JSON.stringify(chatCompletion), { headers: { 'content-type': 'application/json' } });
      },
    });
    const result = await model.generate(hello);
    expect(result).toEqual({
      output: [{ type: 'message', role: 'assistant', content: 'Hello from workerd' }],
      usage: { input_tokens: 5, output_tokens: 4 },
    });
    expect(bodies).toEqual([expect.objectContaining({ model: 'm' })]);
  });

  it('the workers-ai adapter streams from a binding-shaped ReadableStream', async () => {
    const binding = fakeAiBinding((run) =>
      run.inputs.stream
        ? sseStream('data: {"response":"Hi"}\n\ndata: {"response":" there"}\n\ndata: [DONE]\n\n')
        : { response: 'Hi there' },
    );
    const model = resolveModel('workers-ai:@cf/meta/llama-3.1-8b-instruct', { AI: binding });
    const events = await collect(model.stream(hello));
    expect(events.filter((event) => event.type === 'text_delta')).toEqual([
      { type: 'text_delta', delta: 'Hi' },
      { type: 'text_delta', delta: ' there' },
    ]);
    expect((await model.generate(hello)).output).toEqual([{ type: 'message', role: 'assistant', content: 'Hi there' }]);
  });
});

import { describe, expect, it } from 'vitest';
import { ModelError, ModelTimeoutError } from '../../lib/models/errors.ts';
import type { PromptItem, Tool } from '../../lib/items.ts';
import type { ModelRequest } from '../../lib/models/model.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { collectStream, streamedText } from '../support/fake-providers/collect-stream.ts';
import { fakeAiBinding, sseStream, type RecordedRun } from '../support/fake-providers/fake-ai-binding.ts';
import { fixture } from '../support/fake-providers/fake-provider-server.ts';

const MODEL = '@cf/meta/llama-3.3-70b-instruct-fp8-fast';

const weatherTool: Tool = {
  type: 'function',
  name: 'getWeather',
  description: 'Current weather for a place',
  parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
};

const recorded = (json: string, sse: string) => (run: RecordedRun) =>
  run.inputs.stream ? sseStream(fixture(sse)) : JSON.parse(fixture(json));

function model(answer: (run: RecordedRun) => unknown, settings: Record<string, string> = {}) {
  const binding = fakeAiBinding(answer);
  return {
    model: resolveModel(`workers-ai:${MODEL}`, { AI: binding, MODEL_MAX_RETRIES: '0', ...settings }),
    runs: binding.runs,
  };
}

const request = (prompt: PromptItem[], tools: Tool[] = []): ModelRequest => ({ prompt, tools });
const hello: PromptItem[] = [{ type: 'message', role: 'user', content: 'Hello' }];

describe('workers-ai adapter against a fake AI binding', () => {
  it('generates text from a {response} answer and reports usage', async () => {
    const { model: workersAi, runs } = model(recorded('workers-ai-text.json', 'workers-ai-text.sse'));
    const result = await workersAi.generate(request(hello));
    expect(result).toEqual({
      output: [{ type: 'message', role: 'assistant', content: 'Hello! How can I help you today?' }],
      usage: { input_tokens: 35, output_tokens: 10 },
    });
    expect(runs).toHaveLength(1);
    expect(runs[0]!.model).toBe(MODEL);
    expect(runs[0]!.inputs.messages).toEqual([{ role: 'user', content: 'Hello' }]);
    expect(runs[0]!.inputs.stream).toBeUndefined();
  });

  it('streams text from SSE `data: {"response": ...}` lines', async () => {
    const { model: workersAi, runs } = model(recorded('workers-ai-text.json', 'workers-ai-text.sse'));
    const events = await collectStream(workersAi.stream(request(hello)));
    expect(events.filter((event) => event.type === 'text_delta')).toEqual([
      { type: 'text_delta', delta: 'Hello' },
      { type: 'text_delta', delta: '! How can' },
      { type: 'text_delta', delta: ' I help you today?' },
    ]);
    const message = { type: 'message', role: 'assistant', content: streamedText(events) };
    expect(events.slice(-2)).toEqual([
      { type: 'item_done', item: message },
      { type: 'done', result: { output: [message], usage: { input_tokens: 35, output_tokens: 10 } } },
    ]);
    expect(runs[0]!.inputs.stream).toBe(true);
  });

  it('returns {tool_calls: [{name, arguments}]} as a function_call item and offers the tools', async () => {
    const { model: workersAi, runs } = model(recorded('workers-ai-tool-call.json', 'workers-ai-tool-call.sse'));
    const result = await workersAi.generate(request(hello, [weatherTool]));
    expect(result.output).toHaveLength(1);
    expect(result.output[0]).toMatchObject({
      type: 'function_call',
      name: 'getWeather',
      arguments: JSON.stringify({ location: 'Austin, TX' }),
    });
    expect(result.output[0]!.type === 'function_call' && result.output[0]!.call_id.length).toBeGreaterThan(0);
    expect(runs[0]!.inputs.tools).toEqual([
      {
        type: 'function',
        function: {
          name: 'getWeather',
          description: 'Current weather for a place',
          parameters: weatherTool.parameters,
        },
      },
    ]);
  });

  it('assembles a streamed tool call from the argument pieces it passes on', async () => {
    const { model: workersAi } = model(recorded('workers-ai-tool-call.json', 'workers-ai-tool-call.sse'));
    const events = await collectStream(workersAi.stream(request(hello, [weatherTool])));
    const done = events.at(-1);
    expect(done?.type).toBe('done');
    if (done?.type !== 'done') return;
    const pieces = events.flatMap((event) => (event.type === 'arguments_delta' ? [event.delta] : []));
    // The recorded chunks split the arguments in two; the call keeps the model's text of them.
    expect(pieces).toEqual(['{"location": "Aus', 'tin, TX"}']);
    expect(done.result.output).toEqual([
      {
        type: 'function_call',
        call_id: expect.stringContaining('chatcmpl-tool-8e1b4b7a'),
        name: 'getWeather',
        arguments: '{"location": "Austin, TX"}',
      },
    ]);
    expect(done.result.usage).toEqual({ input_tokens: 289, output_tokens: 21 });
  });

  it('sends a function_call and its output as an assistant tool call and a tool message', async () => {
    const { model: workersAi, runs } = model(recorded('workers-ai-text.json', 'workers-ai-text.sse'));
    await workersAi.generate(
      request(
        [
          { type: 'message', role: 'system', content: 'Be brief.' },
          { type: 'message', role: 'user', content: 'Weather in Austin?' },
          { type: 'function_call', call_id: 'call_7', name: 'getWeather', arguments: '{"location":"Austin"}' },
          { type: 'function_call_output', call_id: 'call_7', output: 'hot' },
        ],
        [weatherTool],
      ),
    );
    const messages = runs[0]!.inputs.messages;
    expect(messages[0]).toEqual({ role: 'system', content: 'Be brief.' });
    expect(messages[1]).toEqual({ role: 'user', content: 'Weather in Austin?' });
    expect(messages[2]).toMatchObject({
      role: 'assistant',
      tool_calls: [
        { id: 'call_7', type: 'function', function: { name: 'getWeather', arguments: '{"location":"Austin"}' } },
      ],
    });
    expect(messages[3]).toMatchObject({ role: 'tool', tool_call_id: 'call_7', content: 'hot' });
  });

  it('a binding that throws becomes ModelError', async () => {
    const { model: workersAi } = model(() => {
      throw new Error('AiError: 3040: Capacity temporarily exceeded');
    });
    await expect(workersAi.generate(request(hello))).rejects.toBeInstanceOf(ModelError);
    await expect(collectStream(workersAi.stream(request(hello)))).rejects.toBeInstanceOf(ModelError);
  });

  it('a binding stream that ends without [DONE] becomes ModelError', async () => {
    const { model: workersAi } = model(() => sseStream('data: {"response":"Hel"}\n\n'));
    await expect(collectStream(workersAi.stream(request(hello)))).rejects.toBeInstanceOf(ModelError);
  });

  it('a binding that never answers (and ignores the abort signal) gives ModelTimeoutError', async () => {
    const { model: workersAi } = model(() => new Promise(() => {}), { MODEL_TIMEOUT_MS: '100' });
    await expect(workersAi.generate(request(hello))).rejects.toBeInstanceOf(ModelTimeoutError);
    await expect(collectStream(workersAi.stream(request(hello)))).rejects.toBeInstanceOf(ModelTimeoutError);
  });

  it('a binding stream that stalls after its first event gives ModelTimeoutError', async () => {
    const encoder = new TextEncoder();
    const { model: workersAi } = model(
      () =>
        new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(encoder.encode('data: {"response":"Hel"}\n\n'));
          },
        }),
      { MODEL_TIMEOUT_MS: '150' },
    );
    const events: string[] = [];
    const error = await (async () => {
      for await (const event of workersAi.stream(request(hello))) events.push(event.type);
    })().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ModelTimeoutError);
    expect(events).toEqual(['text_delta']);
  });
});

describe('workers-ai adapter: a sampling seed', () => {
  it("reaches the binding's inputs as `seed` when in Workers AI's range, streamed or not", async () => {
    const { model: workersAi, runs } = model(recorded('workers-ai-text.json', 'workers-ai-text.sse'));
    await workersAi.generate({ ...request(hello), settings: { seed: 7 } });
    await collectStream(workersAi.stream({ ...request(hello), settings: { seed: 9_999_999_999 } }));
    // Out of the range its models take (1 to 9999999999), it is left out, as a provider without one ignores it.
    await workersAi.generate({ ...request(hello), settings: { seed: 0 } });
    await workersAi.generate(request(hello));
    expect(runs.map((run) => run.inputs.seed)).toEqual([7, 9_999_999_999, undefined, undefined]);
    expect(runs[1]!.inputs.stream).toBe(true);
  });
});

describe('workers-ai adapter, an answer without usage', () => {
  // workers-ai-provider reads a missing `usage` as 0 tokens: a call with a prompt has input, so it is unreported.
  const unreported = (run: RecordedRun) => {
    if (!run.inputs.stream) {
      const { usage: _usage, ...json } = JSON.parse(fixture('workers-ai-text.json'));
      return json;
    }
    const events = fixture('workers-ai-text.sse').split('\n\n');
    return sseStream(events.filter((event) => !event.includes('"usage"')).join('\n\n'));
  };

  it('is unreported, generated or streamed, so the call is estimated', async () => {
    const { model: workersAi } = model(unreported);
    expect((await workersAi.generate(request(hello))).usage).toEqual({
      input_tokens: 0,
      output_tokens: 0,
      unreported: true,
    });
    const done = (await collectStream(workersAi.stream(request(hello)))).at(-1);
    expect(done?.type === 'done' && done.result.usage).toEqual({ input_tokens: 0, output_tokens: 0, unreported: true });
  });

  it('one with usage stays reported', async () => {
    const { model: workersAi } = model(recorded('workers-ai-text.json', 'workers-ai-text.sse'));
    const done = (await collectStream(workersAi.stream(request(hello)))).at(-1);
    expect(done?.type === 'done' && done.result.usage).toEqual({ input_tokens: 35, output_tokens: 10 });
  });
});

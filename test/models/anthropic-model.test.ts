import { afterEach, describe, expect, it } from 'vitest';
import type { PromptItem, Tool } from '../../lib/items.ts';
import type { Model, ModelRequest } from '../../lib/models/model.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { resolveStrategyConfig } from '../../lib/strategies/strategy-config.ts';
import { assemblePrompt } from '../../lib/turn/assemble-prompt.ts';
import { replayAnthropicCache } from '../support/fake-providers/anthropic-cache.ts';
import { anthropicStreamOf } from '../support/fake-providers/anthropic-stream.ts';
import { collectStream, streamedText } from '../support/fake-providers/collect-stream.ts';
import { recordedThinking } from '../support/fake-providers/thinking.ts';
import { toolLoopPrompt, weatherTool } from '../support/fake-providers/tool-loop.ts';
import {
  fixture,
  startFakeProvider,
  type FakeProvider,
  type FakeReply,
  type RecordedRequest,
} from '../support/fake-providers/fake-provider-server.ts';

const toolLoop = toolLoopPrompt('toolu_1');

let provider: FakeProvider | undefined;
afterEach(async () => {
  await provider?.close();
  provider = undefined;
});

async function start(reply: (request: RecordedRequest) => FakeReply) {
  provider = await startFakeProvider(reply);
  const model = resolveModel('anthropic:claude-sonnet-4-5', {
    ANTHROPIC_API_KEY: 'sk-ant-test',
    ANTHROPIC_BASE_URL: provider.baseURL,
    MODEL_MAX_RETRIES: '0',
  });
  return { model, requests: provider.requests };
}

const byStream =
  (json: string, sse: string) =>
  (request: RecordedRequest): FakeReply =>
    request.body.stream ? { sse: fixture(sse) } : { text: fixture(json) };

const request = (prompt: PromptItem[], tools: Tool[] = [], cacheBreakpoint?: number): ModelRequest => ({
  prompt,
  tools,
  maxOutputTokens: 1024,
  ...(cacheBreakpoint !== undefined ? { cacheBreakpoint } : {}),
});

/**
 * Where cache_control appears in a request body: `<path>:<block type>` for each block that
 * carries it. Every breakpoint must be exactly `{type: 'ephemeral'}`.
 */
function cacheControlPaths(body: any): string[] {
  const paths: string[] = [];
  const visit = (block: any, path: string) => {
    if (block.cache_control === undefined) return;
    expect(block.cache_control).toEqual({ type: 'ephemeral' });
    paths.push(`${path}:${block.type ?? 'tool'}`);
  };
  for (const [index, block] of (body.system ?? []).entries()) visit(block, `system[${index}]`);
  for (const [messageIndex, message] of body.messages.entries()) {
    if (typeof message.content === 'string') continue;
    for (const [blockIndex, block] of message.content.entries()) {
      visit(block, `messages[${messageIndex}].content[${blockIndex}]`);
    }
  }
  for (const [index, tool] of (body.tools ?? []).entries()) visit(tool, `tools[${index}]`);
  return paths;
}

describe('anthropic adapter against a fake Messages server', () => {
  it('generates text and reports usage from a non-streaming answer', async () => {
    const { model, requests } = await start(byStream('anthropic-message-text.json', 'anthropic-message-text.sse'));
    const result = await model.generate(request([{ type: 'message', role: 'user', content: 'Hello' }]));
    expect(result).toEqual({
      output: [{ type: 'message', role: 'assistant', content: 'Hi! My name is Claude.' }],
      usage: { input_tokens: 2095, output_tokens: 503 },
    });
    expect(requests).toHaveLength(1);
    expect(requests[0]!.path).toBe('/v1/messages');
    expect(requests[0]!.headers['x-api-key']).toBe('sk-ant-test');
    expect(requests[0]!.headers['anthropic-version']).toBeDefined();
    expect(requests[0]!.body).toMatchObject({
      model: 'claude-sonnet-4-5',
      max_tokens: 1024,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Hello' }] }],
    });
  });

  it('streams text deltas, then the finished message, then done with usage', async () => {
    const { model, requests } = await start(byStream('anthropic-message-text.json', 'anthropic-message-text.sse'));
    const events = await collectStream(model.stream(request([{ type: 'message', role: 'user', content: 'Hello' }])));
    expect(events.filter((event) => event.type === 'text_delta')).toEqual([
      { type: 'text_delta', delta: 'Hello' },
      { type: 'text_delta', delta: '!' },
    ]);
    const message = { type: 'message', role: 'assistant', content: 'Hello!' };
    expect(events.slice(-2)).toEqual([
      { type: 'item_done', item: message },
      { type: 'done', result: { output: [message], usage: { input_tokens: 25, output_tokens: 15 } } },
    ]);
    expect(requests[0]!.body.stream).toBe(true);
  });

  it('returns text and a tool_use block as a message and a function_call item', async () => {
    const { model, requests } = await start(
      byStream('anthropic-message-tool-use.json', 'anthropic-message-tool-use.sse'),
    );
    const result = await model.generate(
      request([{ type: 'message', role: 'user', content: 'Weather?' }], [weatherTool]),
    );
    expect(result.output).toEqual([
      { type: 'message', role: 'assistant', content: "I'll check the current weather in San Francisco for you." },
      {
        type: 'function_call',
        call_id: 'toolu_01A09q90qw90lq917835lq9',
        name: 'get_weather',
        arguments: JSON.stringify({ location: 'San Francisco, CA', unit: 'celsius' }),
      },
    ]);
    expect(requests[0]!.body.tools).toEqual([
      {
        name: 'get_weather',
        description: 'Current weather for a place',
        input_schema: weatherTool.parameters,
        cache_control: { type: 'ephemeral' },
      },
    ]);
  });

  it('ends the text, then passes the tool_use input_json_delta pieces on as they come', async () => {
    const { model } = await start(byStream('anthropic-message-tool-use.json', 'anthropic-message-tool-use.sse'));
    const events = await collectStream(
      model.stream(request([{ type: 'message', role: 'user', content: 'Weather?' }], [weatherTool])),
    );
    const text = "Okay,  let's check the weather for San Francisco, CA:";
    expect(streamedText(events)).toBe(text);
    const call_id = 'toolu_01T1x1fJ34qAmk2tNTrN7Up6';
    const pieces = events.flatMap((event) => (event.type === 'arguments_delta' ? [event.delta] : []));
    expect(pieces.length).toBeGreaterThan(3);
    // The model's own text of the input (its spacing kept), which the pieces make up.
    const args = pieces.join('');
    expect(JSON.parse(args)).toEqual({ location: 'San Francisco, CA', unit: 'fahrenheit' });
    const output = [
      { type: 'message', role: 'assistant', content: text },
      { type: 'function_call', call_id, name: 'get_weather', arguments: args },
    ];
    const started = events.findIndex((event) => event.type === 'call_start');
    expect(events.slice(started - 1, started + 1)).toEqual([
      { type: 'item_done', item: output[0] },
      { type: 'call_start', call_id, name: 'get_weather' },
    ]);
    expect(events.slice(started + 1, -2).every((event) => event.type === 'arguments_delta')).toBe(true);
    expect(events.slice(-2)).toEqual([
      { type: 'item_done', item: output[1] },
      { type: 'done', result: { output, usage: { input_tokens: 472, output_tokens: 89 } } },
    ]);
  });

  it('sends a function_call and its output as tool_use and tool_result blocks', async () => {
    const { model, requests } = await start(byStream('anthropic-message-text.json', 'anthropic-message-text.sse'));
    await model.generate(request(toolLoop, [weatherTool]));
    const cache_control = { type: 'ephemeral' };
    expect(requests[0]!.body.system).toEqual([{ type: 'text', text: 'You are terse.', cache_control }]);
    expect(requests[0]!.body.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'Weather in Paris?' }] },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Let me look.' },
          { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { location: 'Paris' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_1', content: '18C, sunny', cache_control },
          { type: 'text', text: 'And tomorrow?', cache_control },
        ],
      },
    ]);
    expect(cacheControlPaths(requests[0]!.body)).toEqual(withTools);
  });

  it('sends a call_id used again under an id of its own: the Messages API takes only unique ids', async () => {
    const { model, requests } = await start(byStream('anthropic-message-text.json', 'anthropic-message-text.sse'));
    const again: PromptItem[] = [
      ...toolLoop.slice(0, -1),
      { type: 'function_call', call_id: 'toolu_1', name: 'get_weather', arguments: '{"location":"Rome"}' },
      { type: 'function_call_output', call_id: 'toolu_1', output: '21C, clear' },
      { type: 'message', role: 'user', content: 'Thanks.' },
    ];
    await model.generate(request(again, [weatherTool]));
    const blocks = requests[0]!.body.messages.flatMap((message: { content: { type: string }[] }) => message.content);
    const uses = blocks.filter((block: { type: string }) => block.type === 'tool_use');
    const results = blocks.filter((block: { type: string }) => block.type === 'tool_result');
    expect(uses.map((block: { id: string }) => block.id)).toEqual(['toolu_1', 'toolu_1_2']);
    expect(
      results.map((block: { tool_use_id: string; content: string }) => [block.tool_use_id, block.content]),
    ).toEqual([
      ['toolu_1', '18C, sunny'],
      ['toolu_1_2', '21C, clear'],
    ]);
  });

  const withTools = [
    'system[0]:text',
    'messages[2].content[0]:tool_result',
    'messages[2].content[1]:text',
    'tools[0]:tool',
  ];
  it.each([
    { tools: [weatherTool], cacheBreakpoint: undefined, expected: withTools },
    // Four are taken already, and nothing after the stable end is compacted: it gets none.
    { tools: [weatherTool], cacheBreakpoint: 1, expected: withTools },
    { tools: [], cacheBreakpoint: undefined, expected: withTools.slice(0, 3) },
    {
      tools: [],
      cacheBreakpoint: 1,
      expected: ['system[0]:text', 'messages[0].content[0]:text', ...withTools.slice(1, 3)],
    },
    { tools: [], cacheBreakpoint: 4, expected: withTools.slice(0, 3) },
  ])(
    'marks the last tool, the instructions, the last two blocks, then the stable end ' +
      '(tools $tools.length, stable end $cacheBreakpoint)',
    async ({ tools, cacheBreakpoint, expected }) => {
      const { model, requests } = await start(byStream('anthropic-message-text.json', 'anthropic-message-text.sse'));
      await model.generate(request(toolLoop, tools, cacheBreakpoint));
      expect(cacheControlPaths(requests[0]!.body)).toEqual(expected);
    },
  );

  it("gives the stable end the instructions' slot when tools leave none and a later item is compacted", async () => {
    const { model, requests } = await start(byStream('anthropic-message-text.json', 'anthropic-message-text.sse'));
    const prompt = toolLoop.map((item, index) => (index === 2 ? { ...item, compacted: true as const } : item));
    await model.generate(request(prompt, [weatherTool], 1));
    expect(cacheControlPaths(requests[0]!.body)).toEqual(['messages[0].content[0]:text', ...withTools.slice(1)]);
  });

  it('marks the last of several tools and skips an empty assistant message for the anchors', async () => {
    const { model, requests } = await start(byStream('anthropic-message-text.json', 'anthropic-message-text.sse'));
    const tools = [weatherTool, { ...weatherTool, name: 'get_forecast' }];
    const prompt: PromptItem[] = [...toolLoop, { type: 'message', role: 'assistant', content: '' }];
    await model.generate(request(prompt, tools));
    expect(cacheControlPaths(requests[0]!.body)).toEqual(withTools.slice(0, 3).concat('tools[1]:tool'));
  });

  it(
    'reads tools and instructions from the cache across an epoch boundary move, ' +
      'the whole previous prompt within an epoch',
    async () => {
      const { model, requests } = await start(byStream('anthropic-message-text.json', 'anthropic-message-text.sse'));
      const config = resolveStrategyConfig({
        request: {
          epoch_tool_call_threshold: 4,
          epoch_full_tool_calls: 2,
          epoch_compacted_tool_calls: 3,
          epoch_size: 2,
        },
      });
      const history: PromptItem[] = [{ type: 'message', role: 'user', content: 'Read the pages.' }];
      const prompts: PromptItem[][] = [];
      for (let index = 1; index <= 12; index++) {
        history.push({
          type: 'function_call',
          call_id: `toolu_${index}`,
          name: 'get_weather',
          arguments: `{"n":${index}}`,
        });
        history.push({ type: 'function_call_output', call_id: `toolu_${index}`, output: `page ${index} `.repeat(80) });
        const { prompt, cacheBreakpoint } = assemblePrompt({
          history,
          contextStart: null,
          strategies: ['shorten_tools_epoch'],
          strategyConfig: config,
          env: {},
          notices: [],
          instructions: 'You are careful.',
        });
        prompts.push(prompt);
        await model.generate({
          prompt,
          tools: [weatherTool],
          ...(cacheBreakpoint !== undefined ? { cacheBreakpoint } : {}),
        });
      }
      const replay = replayAnthropicCache(requests.map((recorded) => recorded.body));
      let moves = 0;
      for (let turn = 0; turn < prompts.length; turn++) {
        expect(cacheControlPaths(requests[turn]!.body)).toEqual(
          expect.arrayContaining(['system[0]:text', 'tools[0]:tool']),
        );
        expect(replay.breakpoints[turn]).toHaveLength(4);
        if (turn === 0) continue;
        const previous = prompts[turn - 1]!;
        const extends_ = JSON.stringify(prompts[turn]!.slice(0, previous.length)) === JSON.stringify(previous);
        if (extends_) {
          // The previous turn's whole prompt is read back.
          expect(replay.readBlocks[turn]).toBe(replay.blocks[turn - 1]);
        } else {
          moves++;
          // Tools (1 block) and instructions (1 block) at least.
          expect(replay.readBlocks[turn]).toBeGreaterThanOrEqual(2);
        }
      }
      expect(moves).toBeGreaterThanOrEqual(2);
    },
  );

  it('reads the prompt up to the context notice across an image boundary move, with tools offered', async () => {
    const { model, requests } = await start(byStream('anthropic-message-text.json', 'anthropic-message-text.sse'));
    const config = resolveStrategyConfig({
      request: {
        epoch_tool_call_threshold: 4,
        epoch_full_tool_calls: 2,
        epoch_compacted_tool_calls: 1,
        epoch_size: 8,
        full_images: 1,
        image_epoch_size: 3,
      },
    });
    const history: PromptItem[] = [{ type: 'message', role: 'user', content: 'Click through the pages.' }];
    const prompts: PromptItem[][] = [];
    const stableEnds: number[] = [];
    for (let index = 1; index <= 16; index++) {
      history.push({ type: 'function_call', call_id: `toolu_${index}`, name: 'click', arguments: `{"n":${index}}` });
      history.push({
        type: 'function_call_output',
        call_id: `toolu_${index}`,
        output: [
          { type: 'input_text', text: `clicked ${index}` },
          { type: 'input_image', image_url: `https://example.com/shot-${index}.png` },
        ],
      });
      const { prompt, cacheBreakpoint } = assemblePrompt({
        history,
        contextStart: null,
        strategies: ['shorten_tools_epoch', 'shorten_images'],
        strategyConfig: config,
        env: {},
        notices: [],
        instructions: 'You click.',
      });
      prompts.push(prompt);
      stableEnds.push(cacheBreakpoint ?? 0);
      await model.generate({
        prompt,
        tools: [weatherTool],
        ...(cacheBreakpoint !== undefined ? { cacheBreakpoint } : {}),
      });
    }
    const replay = replayAnthropicCache(requests.map((recorded) => recorded.body));
    const same = (a: PromptItem[], b: PromptItem[], length: number) =>
      JSON.stringify(a.slice(0, length)) === JSON.stringify(b.slice(0, length));
    let moves = 0;
    for (let turn = 1; turn < prompts.length; turn++) {
      const [previous, prompt, stableEnd] = [prompts[turn - 1]!, prompts[turn]!, stableEnds[turn]!];
      const boundaryMove = !same(prompt, previous, previous.length) && same(prompt, previous, stableEnd + 1);
      if (!boundaryMove || stableEnd === 0) continue;
      moves++;
      // The tools, then one block per item up to the stable end: nothing before it is written again.
      expect(replay.readBlocks[turn]).toBeGreaterThanOrEqual(1 + stableEnd + 1);
    }
    expect(moves).toBeGreaterThanOrEqual(2);
  });

  it('places the breakpoints in streaming requests too', async () => {
    const { model, requests } = await start(byStream('anthropic-message-text.json', 'anthropic-message-text.sse'));
    await collectStream(model.stream(request(toolLoop, [weatherTool], 4)));
    expect(requests[0]!.body.stream).toBe(true);
    expect(cacheControlPaths(requests[0]!.body)).toEqual(withTools);
  });

  it('thinks when a call starts from a user message, not where a tool loop goes on without its thinking', async () => {
    // The Messages API refuses thinking in a call whose last assistant message holds a tool_use
    // without the thinking block it was answered with, which these prompts (as history kept
    // before reasoning was) do not hold.
    const { model, requests } = await start(byStream('anthropic-message-text.json', 'anthropic-message-text.sse'));
    const settings = { reasoningEffort: 'medium' } as const;
    const question: PromptItem = { type: 'message', role: 'user', content: 'Weather in Paris?' };
    const answered: PromptItem[] = [...toolLoop.slice(0, 5), { type: 'message', role: 'assistant', content: 'Sunny.' }];
    const calls = [[question], toolLoop, toolLoop.slice(0, 5), [...answered, question]];
    for (const prompt of calls) await model.generate({ ...request(prompt, [weatherTool]), settings });
    await collectStream(model.stream({ ...request(toolLoop, [weatherTool]), settings }));
    expect(requests.map((sent) => sent.body.thinking?.type ?? 'none')).toEqual([
      'enabled',
      'none',
      'none',
      'enabled',
      'none',
    ]);
  });

  describe('thinking across a tool loop', () => {
    const { thinking, signature, redacted } = recordedThinking;
    const settings = { reasoningEffort: 'medium' } as const;
    const question: PromptItem = { type: 'message', role: 'user', content: 'Weather in Paris?' };
    const reply = byStream('anthropic-message-thinking-tool-use.json', 'anthropic-message-thinking-tool-use.sse');
    const output = (callId: string): PromptItem => ({ type: 'function_call_output', call_id: callId, output: '18C' });

    it('keeps a streamed thinking block with its signature and sends it back unchanged in the next call', async () => {
      const { model, requests } = await start(reply);
      const events = await collectStream(model.stream({ ...request([question], [weatherTool]), settings }));
      const done = events.at(-1)!;
      if (done.type !== 'done') throw new Error('no done event');
      const [call] = done.result.output;
      expect(done.result.output).toHaveLength(1);
      expect(call).toEqual({
        type: 'function_call',
        call_id: 'toolu_01NbC7Pf1cLh2zRtyRyFoMuP',
        name: 'get_weather',
        arguments: '{"location": "Paris"}',
        reasoning: [
          {
            type: 'reasoning',
            summary: [{ type: 'summary_text', text: thinking }],
            encrypted_content: JSON.stringify({ anthropic: { signature } }),
          },
        ],
      });
      // The item_done event carries it too.
      expect(events.filter((event) => event.type === 'item_done').map((event) => event.item)).toEqual([call]);

      const loop = [question, call!, output('toolu_01NbC7Pf1cLh2zRtyRyFoMuP')];
      await collectStream(model.stream({ ...request(loop, [weatherTool]), settings }));
      const second = requests[1]!.body;
      expect(second.thinking?.type).toBe('enabled');
      expect(second.messages[1]).toEqual({
        role: 'assistant',
        content: [
          { type: 'thinking', thinking, signature },
          {
            type: 'tool_use',
            id: 'toolu_01NbC7Pf1cLh2zRtyRyFoMuP',
            name: 'get_weather',
            input: { location: 'Paris' },
            cache_control: { type: 'ephemeral' },
          },
        ],
      });
    });

    it('keeps thinking and redacted thinking of a generated answer and sends both back in order', async () => {
      const { model, requests } = await start(reply);
      const result = await model.generate({ ...request([question], [weatherTool]), settings });
      const [call] = result.output;
      expect(call?.type === 'function_call' && call.reasoning).toEqual([
        {
          type: 'reasoning',
          summary: [{ type: 'summary_text', text: thinking }],
          encrypted_content: JSON.stringify({ anthropic: { signature } }),
        },
        {
          type: 'reasoning',
          summary: [],
          encrypted_content: JSON.stringify({ anthropic: { redactedData: redacted } }),
        },
      ]);
      const loop = [question, call!, output('toolu_01NbC7Pf1cLh2zRtyRyFoMuP')];
      await model.generate({ ...request(loop, [weatherTool]), settings });
      expect(requests[1]!.body.thinking?.type).toBe('enabled');
      expect(requests[1]!.body.messages[1].content.slice(0, 2)).toEqual([
        { type: 'thinking', thinking, signature },
        { type: 'redacted_thinking', data: redacted },
      ]);
    });

    /** The recorded JSON answer `name`, and the same answer as a stream. */
    const recorded = (name: string) => (sent: RecordedRequest) =>
      sent.body.stream ? { sse: anthropicStreamOf(fixture(name)) } : { text: fixture(name) };
    const streamedOutput = async (model: Model, asked: ModelRequest) => {
      const events = await collectStream(model.stream(asked));
      const done = events.at(-1)!;
      if (done.type !== 'done') throw new Error('no done event');
      return { events, result: done.result };
    };

    it('stores the same output for an answer streamed or not, each reasoning block on the item after it', async () => {
      const answers = [
        'anthropic-message-text.json',
        'anthropic-message-tool-use.json',
        'anthropic-message-thinking-tool-use.json',
        'anthropic-message-thinking-interleaved.json',
        'anthropic-message-thinking-only.json',
      ];
      for (const name of answers) {
        const { model } = await start(recorded(name));
        const asked = { ...request([question], [weatherTool]), settings };
        const { result } = await streamedOutput(model, asked);
        expect(result, name).toEqual(await model.generate(asked));
        await provider?.close();
      }
      // Thinking, text, redacted thinking, a call: each block on the item it came before.
      const { model, requests } = await start(recorded('anthropic-message-thinking-interleaved.json'));
      const { events, result } = await streamedOutput(model, { ...request([question], [weatherTool]), settings });
      const answer = JSON.parse(fixture('anthropic-message-thinking-interleaved.json'));
      const signed = JSON.stringify({ anthropic: { signature: answer.content[0].signature } });
      const said = answer.content[0].thinking;
      const thought = {
        type: 'reasoning' as const,
        summary: [{ type: 'summary_text' as const, text: said }],
        encrypted_content: signed,
      };
      const data = answer.content[2].data;
      const hidden = {
        type: 'reasoning' as const,
        summary: [],
        encrypted_content: JSON.stringify({ anthropic: { redactedData: data } }),
      };
      const callId = 'toolu_01Rk8VtP3mWqZx2LnB7cYd4F';
      expect(result.output).toEqual([
        { type: 'message', role: 'assistant', content: 'Let me look up the weather in Paris.', reasoning: [thought] },
        {
          type: 'function_call',
          call_id: callId,
          name: 'get_weather',
          arguments: '{"location":"Paris"}',
          reasoning: [hidden],
        },
      ]);
      expect(
        events.flatMap((event) => (event.type === 'reasoning_done' || event.type === 'item_done' ? [event.type] : [])),
      ).toEqual(['reasoning_done', 'item_done', 'reasoning_done', 'item_done']);
      // They go back as the provider gave them: thinking before the text, redacted thinking before the tool_use.
      await model.generate({ ...request([question, ...result.output, output(callId)], [weatherTool]), settings });
      expect(requests[1]!.body.thinking?.type).toBe('enabled');
      expect(requests[1]!.body.messages[1].content.map((block: any) => block.type)).toEqual([
        'thinking',
        'text',
        'redacted_thinking',
        'tool_use',
      ]);
    });

    it('keeps reasoning with no item after it on an empty assistant message, never sent alone', async () => {
      const { model, requests } = await start(recorded('anthropic-message-thinking-only.json'));
      const asked = { ...request([question], [weatherTool]), settings };
      const { events, result } = await streamedOutput(model, asked);
      const said = 'The user wants the weather in Paris. Which tool gives it? get_weather, with';
      expect(result.incomplete).toBe('max_output_tokens');
      // The message it stopped in (in its reasoning) is the item marked `incomplete`.
      expect(result.output).toEqual([
        {
          type: 'message',
          role: 'assistant',
          content: '',
          incomplete: true,
          reasoning: [
            {
              type: 'reasoning',
              summary: [{ type: 'summary_text', text: said }],
              encrypted_content: expect.stringContaining('"signature"'),
            },
          ],
        },
      ]);
      // Its reasoning.done comes before the item_done that carries it.
      expect(events.map((event) => event.type)).toEqual(['input_reported', 'reasoning_done', 'item_done', 'done']);
      // The input usage message_start reported, before any output: what a call stopped then is charged.
      const { usage } = JSON.parse(fixture('anthropic-message-thinking-only.json'));
      const input = usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens;
      expect(events[0]).toEqual({ type: 'input_reported', usage: { input_tokens: input, output_tokens: 0 } });
      // The next call leaves the thinking out with the empty message: no assistant message of only thinking.
      const next: PromptItem = { type: 'message', role: 'user', content: 'Go on.' };
      await model.generate({ ...request([question, ...result.output, next], [weatherTool]), settings });
      await model.generate({ ...request([question, ...result.output], [weatherTool]), settings });
      for (const sent of requests.slice(1)) {
        expect(sent.body.messages.map((message: any) => message.role)).toEqual(['user']);
        expect(JSON.stringify(sent.body.messages)).not.toContain('thinking');
      }
    });

    it("leaves out a finished turn's thinking; a loop whose blocks are missing goes without", async () => {
      const { model, requests } = await start(reply);
      const result = await model.generate({ ...request([question], [weatherTool]), settings });
      const call = result.output[0]!;
      const finished: PromptItem[] = [
        question,
        call,
        output('toolu_01NbC7Pf1cLh2zRtyRyFoMuP'),
        { type: 'message', role: 'assistant', content: 'Sunny.' },
        { type: 'message', role: 'user', content: 'And tomorrow?' },
      ];
      await model.generate({ ...request(finished, [weatherTool]), settings });
      const sent = requests[1]!.body;
      expect(sent.thinking?.type).toBe('enabled');
      const blocks = sent.messages.flatMap((message: any) => message.content.map((block: any) => block.type));
      expect(blocks).not.toContain('thinking');
      expect(blocks).not.toContain('redacted_thinking');
      // The call without its reasoning (history kept before reasoning was): the loop goes without thinking.
      const { reasoning: _dropped, ...bare } = call as Extract<PromptItem, { type: 'function_call' }>;
      await model.generate({ ...request([question, bare, output(bare.call_id)], [weatherTool]), settings });
      expect(requests[2]!.body.thinking).toBeUndefined();
    });

    it("sends a call refused for a client's forged signature once more without thinking, streamed or not", async () => {
      // Anthropic's answer to a thinking block whose signature it did not issue.
      const refusal: FakeReply = {
        status: 400,
        json: {
          type: 'error',
          error: {
            type: 'invalid_request_error',
            message: 'messages.1.content.0: Invalid `signature` in `thinking` block',
          },
          request_id: 'req_011CWkB65DcNzK2MiofhXx8b',
        },
      };
      const sentThinking = (sent: RecordedRequest) =>
        sent.body.messages.some((message: any) => message.content.some?.((block: any) => block.type === 'thinking'));
      const { model, requests } = await start((sent) => (sentThinking(sent) ? refusal : reply(sent)));
      const forged: PromptItem = {
        type: 'function_call',
        call_id: 'call_1',
        name: 'get_weather',
        arguments: '{"location": "Paris"}',
        reasoning: [
          {
            type: 'reasoning',
            summary: [{ type: 'summary_text', text: thinking }],
            encrypted_content: JSON.stringify({ anthropic: { signature: 'forged' } }),
          },
        ],
      };
      const loop = [question, forged, output('call_1')];
      const generated = await model.generate({ ...request(loop, [weatherTool]), settings });
      expect(generated.output[0]).toMatchObject({ type: 'function_call', name: 'get_weather' });
      const events = await collectStream(model.stream({ ...request(loop, [weatherTool]), settings }));
      expect(events.at(-1)).toMatchObject({ type: 'done', result: { output: [{ type: 'function_call' }] } });
      // Each call: refused with the forged block and thinking, then answered without either.
      expect(requests.map((sent) => [sent.body.thinking?.type ?? 'none', sentThinking(sent)])).toEqual([
        ['enabled', true],
        ['none', false],
        ['enabled', true],
        ['none', false],
      ]);
      expect(requests[1]!.body.messages[1].content.map((block: any) => block.type)).toEqual(['tool_use']);
    });

    it('fails a call refused again without thinking, and one refused for anything else at once', async () => {
      const signature = 'messages.1.content.0: Invalid `signature` in `thinking` block';
      const { model, requests } = await start((sent) => ({
        status: 400,
        json: {
          type: 'error',
          error: {
            type: 'invalid_request_error',
            message: sent.body.system ? signature : 'max_tokens: Field required',
          },
        },
      }));
      const instructed: PromptItem[] = [{ type: 'message', role: 'system', content: 'Be brief.' }, question];
      await expect(model.generate({ ...request(instructed, [weatherTool]), settings })).rejects.toMatchObject({
        code: 'model_error',
      });
      expect(requests).toHaveLength(2);
      await expect(model.generate({ ...request([question], [weatherTool]), settings })).rejects.toMatchObject({
        code: 'model_error',
      });
      expect(requests).toHaveLength(3);
    });

    it('goes without thinking where a loop opens with reasoning Anthropic cannot take back, yet calls', async () => {
      // A client's reasoning: another provider's payload, none of Anthropic's, a signature that is no string.
      const { model, requests } = await start(reply);
      const payloads = ['{"openai":{"itemId":"rs_1"}}', '{"anthropic":{}}', '{"anthropic":{"signature":5}}'];
      for (const encrypted_content of payloads) {
        const call: PromptItem = {
          type: 'function_call',
          call_id: 'call_1',
          name: 'get_weather',
          arguments: '{"location": "Paris"}',
          reasoning: [{ type: 'reasoning', summary: [{ type: 'summary_text', text: 'Hmm.' }], encrypted_content }],
        };
        await model.generate({ ...request([question, call, output('call_1')], [weatherTool]), settings });
      }
      expect(requests.map((sent) => sent.body.thinking)).toEqual([undefined, undefined, undefined]);
      expect(requests.map((sent) => sent.body.messages[1].content[0].type)).toEqual([
        'tool_use',
        'tool_use',
        'tool_use',
      ]);
    });
  });
});

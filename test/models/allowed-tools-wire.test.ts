import { afterEach, describe, expect, it } from 'vitest';
import type { Tool } from '../../lib/items.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { toolLoopPrompt, weatherTool } from '../support/fake-providers/tool-loop.ts';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';

let provider: FakeProvider | undefined;
afterEach(async () => {
  await provider?.close();
  provider = undefined;
});

const lookupTool: Tool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: {} } };

describe('allowed tools on a provider that gets the allowed ones alone', () => {
  it('puts the Anthropic tool breakpoint on the last tool sent, the history calling a tool left out', async () => {
    provider = await startFakeProvider(() => ({ text: fixture('anthropic-message-text.json') }));
    const model = resolveModel('anthropic:claude-sonnet-4-5', {
      ANTHROPIC_API_KEY: 'sk-ant-test',
      ANTHROPIC_BASE_URL: provider.baseURL,
      MODEL_MAX_RETRIES: '0',
    });
    await model.generate({
      prompt: toolLoopPrompt('toolu_1'),
      // The history calls get_weather, which this call leaves out.
      tools: [lookupTool, weatherTool],
      settings: { toolChoice: 'auto', allowedTools: ['lookup'] },
    });
    const sent = provider.requests[0]!.body;
    expect(sent.tools.map((tool: { name: string }) => tool.name)).toEqual(['lookup']);
    expect(sent.tools[0].cache_control).toEqual({ type: 'ephemeral' });
    const blocks = sent.messages.flatMap((message: { content: unknown }) =>
      Array.isArray(message.content) ? message.content : [],
    );
    expect(blocks).toContainEqual(expect.objectContaining({ type: 'tool_use', name: 'get_weather' }));
    expect(blocks).toContainEqual(expect.objectContaining({ type: 'tool_result', tool_use_id: 'toolu_1' }));
  });
});

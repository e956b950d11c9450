import { afterEach, describe, expect, it } from 'vitest';
import type { PromptItem } from '../../lib/items.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { replayAnthropicCache } from '../support/fake-providers/anthropic-cache.ts';
import { collectStream } from '../support/fake-providers/collect-stream.ts';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { weatherTool } from '../support/fake-providers/tool-loop.ts';

// Tools come first in Anthropic's cache order: a tool definition that differs between two calls
// of a session leaves every block after it unread from the cache.

let provider: FakeProvider | undefined;
afterEach(async () => {
  await provider?.close();
  provider = undefined;
});

describe('the tool definitions a session sends Anthropic', () => {
  it('are the same for a streamed call and a generated one, so either reads the other from the cache', async () => {
    provider = await startFakeProvider((request) =>
      request.body.stream
        ? { sse: fixture('anthropic-message-text.sse') }
        : { text: fixture('anthropic-message-text.json') },
    );
    const model = resolveModel('anthropic:claude-sonnet-4-5', {
      ANTHROPIC_API_KEY: 'sk-ant-test',
      ANTHROPIC_BASE_URL: provider.baseURL,
      MODEL_MAX_RETRIES: '0',
    });
    const prompt: PromptItem[] = [{ type: 'message', role: 'user', content: 'Weather in Paris?' }];
    const later: PromptItem[] = [...prompt, { type: 'message', role: 'assistant', content: 'Sunny.' }];
    await model.generate({ prompt, tools: [weatherTool] });
    await collectStream(model.stream({ prompt: later, tools: [weatherTool] }));
    await model.generate({
      prompt: [...later, { type: 'message', role: 'user', content: 'And Rome?' }],
      tools: [weatherTool],
    });
    const bodies = provider.requests.map((request) => request.body);
    expect(bodies[1].tools).toEqual(bodies[0].tools);
    const cache = replayAnthropicCache(bodies);
    expect(cache.readBlocks.slice(1)).toEqual([cache.blocks[0], cache.blocks[1]]);
  });
});

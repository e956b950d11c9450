import { afterEach, describe, expect, it } from 'vitest';
import type { Tool } from '../../lib/items.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { runTurn } from '../../lib/turn/index.ts';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { weatherTool } from '../support/fake-providers/tool-loop.ts';
import { servicesFor } from '../support/recording-model.ts';
import { SessionLog } from '../support/session-log.ts';

/**
 * A turn's `prefix_reused_chars` (its receipt's prompt shape) counts the tools the provider got,
 * as its prompt cache does: with `allowedTools`, Anthropic
 * gets the allowed tools alone (its prompt changes with the subset), OpenAI every tool.
 */

let provider: FakeProvider | undefined;
afterEach(async () => {
  await provider?.close();
  provider = undefined;
});

const lookupTool: Tool = { type: 'function', name: 'lookup', parameters: { type: 'object', properties: {} } };
const tools = [weatherTool, lookupTool];

async function reusedOf(id: string, env: (baseURL: string) => Record<string, string>, reply: string) {
  provider = await startFakeProvider(() => ({ text: fixture(reply) }));
  const model = resolveModel(id, { ...env(provider.baseURL), MODEL_MAX_RETRIES: '0' });
  const store = new MemoryStore();
  const sessions = new SessionLog(store);
  const services = servicesFor(sessions, store, model);
  await sessions.create({ id: 's' });
  for (const [turn, allowed] of [['get_weather'], ['lookup']].entries()) {
    await runTurn(services, 's', {
      input: [{ type: 'message', role: 'user', content: `turn ${turn}` }],
      tools,
      model_settings: { toolChoice: 'auto', allowedTools: allowed },
    });
    await services.settle();
  }
  return (await sessions.getTurn('s', 2)).prefix_reused_chars;
}

describe('prefix_reused_chars under allowed tools', () => {
  it('is 0 after another subset where the provider gets the allowed tools alone (Anthropic)', async () => {
    const env = (url: string) => ({ ANTHROPIC_API_KEY: 'sk-ant-test', ANTHROPIC_BASE_URL: url });
    // Its tools come first in its prompt: another subset is another prompt from the start.
    expect(await reusedOf('anthropic:claude-sonnet-4-5', env, 'anthropic-message-text.json')).toBe(0);
  });

  it('counts the prompt kept where the provider restricts the tools itself (OpenAI)', async () => {
    const env = (url: string) => ({ OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: url });
    expect(await reusedOf('openai:gpt-5.2', env, 'openai-chat-text.json')).toBeGreaterThan(0);
  });
});

import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { TOKEN } from '../http/http-suite.ts';

// With `compact` in the strategies, a parallel step whose first output alone is larger than the
// window fails its turn (413: its own input does not fit), and the next turn's compaction must not
// keep that step whole: a cut moved back to the step's calls would leave every later prompt too large.
const store = new MemoryStore();
const app = createApp({ store: () => store, readEnvironment: () => ({ API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' }) });

async function post(path: string, body: unknown): Promise<{ status: number; body: any }> {
  const response = await app.request(path, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

describe('a parallel step with an output larger than the window, under compact', () => {
  it('fails its own turn, and the next message compacts past it', async () => {
    await post('/v1/sessions', {
      id: 'oversized',
      strategies: ['shorten_tools_epoch_increment', 'compact', 'inbox'],
      strategy_config: { context_limit: 4000, response_reserve: 500 },
      tools: [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: {} } }],
    });
    await post('/v1/sessions/oversized/turns', { input: 'hello' });
    const appended = await post('/v1/sessions/oversized/items', {
      items: [
        { type: 'message', role: 'user', content: 'weather in two cities?' },
        { type: 'function_call', call_id: 'c_a', name: 'get_weather', arguments: '{}' },
        { type: 'function_call', call_id: 'c_b', name: 'get_weather', arguments: '{}' },
      ],
    });
    expect(appended.status).toBe(201);
    const step = await post('/v1/sessions/oversized/turns', {
      input: [
        { type: 'function_call_output', call_id: 'c_a', output: 'word '.repeat(4000) },
        { type: 'function_call_output', call_id: 'c_b', output: 'sunny' },
      ],
    });
    expect(step).toMatchObject({ status: 413, body: { error: { code: 'context_too_large' } } });

    const next = await post('/v1/sessions/oversized/turns', { input: 'what now?' });
    expect(next.status).toBe(200);
    expect(next.body.context.compaction.summarized.last_seq).toBe(7);
    expect(next.body.output[0].content).toBe('echo: what now?');
  });
});

import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, TOKEN } from '../http/http-suite.ts';

// With `compact` in the strategies, a parallel step whose first output alone is larger than the
// window fails its turn (413: its own input does not fit), and the next turn's compaction must not
// keep that step whole: a cut moved back to the step's calls would leave every later prompt too large.
const api = createClient(appHarness(new MemoryStore(), { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' }));

/** A session whose parallel step (seqs 4 to 7) has a first output of `words` words, its turn refused (413). */
async function oversizedStep(
  id: string,
  words: number,
  options: { description?: string; instructions?: string; strategies?: string[] } = {},
) {
  await api.post('/v1/sessions', {
    id,
    strategies: options.strategies ?? ['shorten_tools_epoch_increment', 'compact', 'inbox'],
    strategy_config: { context_limit: 4000, response_reserve: 500 },
    ...(options.instructions ? { instructions: options.instructions } : {}),
    tools: [
      {
        type: 'function',
        name: 'get_weather',
        ...(options.description ? { description: options.description } : {}),
        parameters: { type: 'object', properties: {} },
      },
    ],
  });
  await api.post(`/v1/sessions/${id}/turns`, { input: 'hello' });
  const appended = await api.post(`/v1/sessions/${id}/items`, {
    items: [
      { type: 'message', role: 'user', content: 'weather in two cities?' },
      { type: 'function_call', call_id: 'c_a', name: 'get_weather', arguments: '{}' },
      { type: 'function_call', call_id: 'c_b', name: 'get_weather', arguments: '{}' },
    ],
  });
  expect(appended.status).toBe(201);
  const step = await api.post(`/v1/sessions/${id}/turns`, {
    input: [
      { type: 'function_call_output', call_id: 'c_a', output: 'word '.repeat(words) },
      { type: 'function_call_output', call_id: 'c_b', output: 'sunny' },
    ],
  });
  expect(step).toMatchObject({ status: 413, body: { error: { code: 'context_too_large' } } });
}

describe('a parallel step with an output larger than the window, under compact', () => {
  it('fails its own turn, and the next message compacts past it', async () => {
    await oversizedStep('oversized', 4000);
    const next = await api.post('/v1/sessions/oversized/turns', { input: 'what now?' });
    expect(next.status).toBe(200);
    expect(next.body.context.compaction.summarized.last_seq).toBe(7);
    expect(next.body.output[0].content).toBe('echo: what now?');
  });

  it('compacts past a step that fits beside the summary but not beside the tools and instructions too', async () => {
    // The output alone is under the prompt limit less the summary's share; the tools' and the
    // instructions' tokens, in every prompt, leave the step too large to keep.
    await oversizedStep('beside', 2200, { description: 'd '.repeat(200), instructions: 'i '.repeat(1200) });
    const next = await api.post('/v1/sessions/beside/turns', { input: 'what now?' });
    expect(next.status, JSON.stringify(next.body)).toBe(200);
    expect(next.body.context.compaction.summarized.last_seq).toBe(7);
  });

  it('is summarized by a compaction on demand too, so the prompt after it fits', async () => {
    // Without `compact` in the strategies its turn compacted nothing; `POST /compact` does.
    const options = { description: 'd '.repeat(200), instructions: 'i '.repeat(1200), strategies: ['inbox'] };
    await oversizedStep('manual', 2200, options);
    const compacted = await api.post('/v1/sessions/manual/compact', {});
    expect(compacted).toMatchObject({ status: 200, body: { compacted: true, context: { start_seq: 8 } } });
    const preview = await api.get('/v1/sessions/manual/prompt');
    expect(preview.status).toBe(200);
  });
});

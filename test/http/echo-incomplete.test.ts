import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, TOKEN } from './http-suite.ts';

// The echo model stops at max_output_tokens (4 characters a token) as a provider does, so an
// incomplete answer can be tried offline.
const api = createClient(
  appHarness(new MemoryStore(), { API_TOKEN: TOKEN, ALLOW_ANONYMOUS: 'false', DEFAULT_MODEL: 'echo' }),
);

describe('the echo model at max_output_tokens', () => {
  it('answers a response incomplete, reason max_output_tokens, and a native turn incomplete', async () => {
    const response = await api.post('/v1/responses', {
      model: 'echo',
      input: 'tell me three things',
      max_output_tokens: 3,
    });
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({
      status: 'incomplete',
      incomplete_details: { reason: 'max_output_tokens' },
      output_text: 'echo: tell m',
      usage: { output_tokens: 3 },
    });
    const id = (await api.post('/v1/sessions', {})).body.id as string;
    const turn = await api.post(`/v1/sessions/${id}/turns`, { input: 'tell me three things', max_output_tokens: 3 });
    expect(turn.body).toMatchObject({ incomplete: 'max_output_tokens', output: [{ content: 'echo: tell m' }] });
    const complete = await api.post('/v1/responses', { model: 'echo', input: 'hi', max_output_tokens: 3 });
    expect(complete.body).toMatchObject({ status: 'completed', output_text: 'echo: hi' });
  });
});

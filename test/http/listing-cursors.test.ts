import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, TOKEN } from './http-suite.ts';

// A listing's cursor it cannot have issued (a client that mangled it) is a 400 naming the
// cursor's parameter, on every listing, never the first page again (a client paging on would
// loop forever).
const api = createClient(appHarness(new MemoryStore(), { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' }));

describe('a mangled listing cursor', () => {
  it('is a 400 naming its parameter on every listing', async () => {
    const id = await api.session();
    const turn = await api.post(`/v1/sessions/${id}/turns`, { input: 'hi' });
    expect(turn.status).toBe(200);
    const conversation = await api.post('/v1/conversations', { items: [{ role: 'user', content: 'hi' }] });
    const response = await api.post('/v1/responses', { model: 'echo', input: 'hi' });
    const listings: [string, string][] = [
      ['/v1/sessions?after=garbage', 'after'],
      [`/v1/sessions/${id}/forks?after=garbage`, 'after'],
      [`/v1/sessions/${id}/items?before=garbage`, 'before'],
      [`/v1/sessions/${id}/turns?before=garbage`, 'before'],
      [`/v1/sessions/${id}/turns/1/items?before=garbage`, 'before'],
      [`/v1/sessions/${id}/turns/1/events?after=garbage`, 'after'],
      [`/v1/conversations/${conversation.body.id}/items?after=garbage`, 'after'],
      [`/v1/responses/${response.body.id}/input_items?after=garbage`, 'after'],
    ];
    for (const [path, param] of listings) {
      const listed = await api.get(path);
      expect({ path, status: listed.status }).toEqual({ path, status: 400 });
      // tailgate's error JSON names it in details.field, the OpenAI-compatible routes' in param.
      const { error } = listed.body;
      expect({ path, named: error.details?.field ?? error.param }).toEqual({ path, named: param });
      // tailgate's message starts with the query's field, as every refusal's does (docs/API.md, "Conventions").
      if (error.details)
        expect({ path, message: error.message }).toEqual({
          path,
          message: expect.stringMatching(new RegExp(`^query\\.${param}: `)),
        });
    }
  });
});

import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, TOKEN } from './http-suite.ts';

// A turn the session does not have is one 404 whichever route names it: the same message
// (`session <id> has no turn <n>`, as a missing blob's `session <id> has no blob <sha256>`) and
// details (docs/API.md, "Errors": `details.id` the session, `details.turn` the turn).
const api = createClient(appHarness(new MemoryStore(), { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' }));

describe('a missing turn', () => {
  it('is worded one way by every route that names a turn', async () => {
    const id = await api.session();
    expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'hi' })).status).toBe(200);
    const turn = `/v1/sessions/${id}/turns/99`;
    const answers = await Promise.all([
      api.get(turn),
      api.get(`${turn}/items`),
      api.get(`${turn}/events`),
      api.post(`${turn}/cancel`),
      api.delete(turn),
    ]);
    for (const answer of answers) {
      expect(answer.status, JSON.stringify(answer.body)).toBe(404);
      expect(answer.body.error).toEqual({
        code: 'not_found',
        message: `session ${id} has no turn 99`,
        details: { id, turn: 99 },
      });
    }
  });
});

import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, TOKEN } from './http-suite.ts';

// A session's strategies are stored as the names its list resolves to, and its export's header
// carries them to an import, which takes at most 50 (as a list sent as an array is): a list sent
// as a comma-separated string is held to the same bound, so no session stores strategies its own
// export cannot bring back.
const api = createClient(appHarness(new MemoryStore(), { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' }));

/** `count` names of the `inbox` strategy, comma-separated. */
const names = (count: number) => Array.from({ length: count }, () => 'inbox').join(',');

describe('a strategy list sent as a string', () => {
  it('of more than 50 names is refused, on create, PATCH and a turn', async () => {
    const created = await api.post('/v1/sessions', { strategies: names(51) });
    expect(created.status, JSON.stringify(created.body)).toBe(400);
    expect(created.body.error.details).toMatchObject({ field: 'strategies' });
    const id = await api.session();
    const patched = await api.patch(`/v1/sessions/${id}`, { strategies: names(51) });
    expect(patched.status, JSON.stringify(patched.body)).toBe(400);
    const turn = await api.post(`/v1/sessions/${id}/turns`, { input: 'hi', strategies: names(51) });
    expect(turn.status, JSON.stringify(turn.body)).toBe(400);
  });

  it('of 50 names is stored, and its export imports', async () => {
    const id = await api.session({ strategies: names(50) });
    const imported = await api.importCopy(id);
    expect(imported.status, JSON.stringify(imported.body)).toBe(201);
    expect(imported.body.strategies).toHaveLength(50);
  });
});

import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, SIGNING_KEY, TOKEN } from './http-suite.ts';

// docs/SECURITY.md, "Revocation": a bound token opens only the incarnation it was minted for. A
// delete of the newest turn keeps it; deleting the session and importing its export under the
// same id makes another one, whose created_at the export carries over.
const harness = appHarness(new MemoryStore(), {
  API_TOKEN: TOKEN,
  DEFAULT_MODEL: 'echo',
  TOKEN_SIGNING_KEY: SIGNING_KEY,
});
const api = createClient(harness);

describe("a bound token and its session's incarnation", () => {
  it('is refused (401) by the session imported under its id after a delete, and kept across a rewind', async () => {
    const id = await api.session();
    for (const input of ['one', 'two'])
      expect((await api.post(`/v1/sessions/${id}/turns`, { input })).status).toBe(200);
    const minted = await api.post('/v1/tokens', { scopes: ['session:read'], session_id: id });
    const bound = { authorization: `Bearer ${minted.body.token}` };
    expect((await api.delete(`/v1/sessions/${id}/turns/2`)).status).toBe(200);
    expect((await api.get(`/v1/sessions/${id}`, bound)).status).toBe(200);
    const exported = await api.get(`/v1/sessions/${id}/export`);
    expect(exported.status).toBe(200);
    expect((await api.delete(`/v1/sessions/${id}`)).status).toBe(204);
    const imported = await api.post('/v1/sessions/import', exported.body as string, {
      'content-type': 'application/x-ndjson',
    });
    expect(imported.status, JSON.stringify(imported.body)).toBe(201);
    const read = await api.get(`/v1/sessions/${id}`, bound);
    expect(read.status, JSON.stringify(read.body)).toBe(401);
    // Its message names both ways a session of that id is another one now, not a delete alone.
    expect(read.body.error.message).toMatch(/deleted or replaced by an import/);
    expect(read.body.error.message).toMatch(/mint a new token/);
    // A token minted for the imported session opens it.
    const fresh = await api.post('/v1/tokens', { scopes: ['session:read'], session_id: id });
    expect((await api.get(`/v1/sessions/${id}`, { authorization: `Bearer ${fresh.body.token}` })).status).toBe(200);
  });
});

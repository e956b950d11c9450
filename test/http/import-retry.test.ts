import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { createClient, freshId, TOKEN } from './http-suite.ts';

// POST /v1/sessions/import stopped after its commit point (docs/STORAGE.md, "Import"): the
// client's retry of the same export, with or without an Idempotency-Key (an import takes none:
// the session's id is its key), writes what is left and is answered 201 with the whole session.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };
const store = new FaultyStore(new MemoryStore());
const api = createClient(appHarness(store, environment));

function importText(text: string, headers: Record<string, string> = {}) {
  return api.post('/v1/sessions/import', text, { 'content-type': 'application/x-ndjson', ...headers });
}

async function exportText(id: string): Promise<string> {
  const response = await api.get<string>(`/v1/sessions/${id}/export`);
  expect(response.status).toBe(200);
  return response.body;
}

describe('POST /v1/sessions/import sent again after it stopped past its commit point', () => {
  it.each([
    ['without an Idempotency-Key', {}],
    ['with the same Idempotency-Key', { 'idempotency-key': 'import-retry-1' }],
  ])('%s: the retry is 201 with the whole session, delivered notices included', async (_name, headers) => {
    const source = await api.session({ strategies: 'inbox' });
    expect(
      (await api.post(`/v1/sessions/${source}/items`, { items: [{ type: 'message', role: 'user', content: 'a' }] }))
        .status,
    ).toBe(201);
    expect((await api.post(`/v1/sessions/${source}/inbox`, { name: 'note.md', content: 'hello' })).status).toBe(201);
    expect((await api.post(`/v1/sessions/${source}/turns`, { input: 'hi' })).status).toBe(200);
    const copy = freshId('import');
    const [header, ...rest] = (await exportText(source)).split('\n');
    const exported = [JSON.stringify({ ...JSON.parse(header!), id: copy }), ...rest].join('\n');
    expect(exported).toContain('"type":"notice"');

    // Every call fails from the first delivered-notice record on: the process stopped there.
    let stopped = false;
    store.failWhen(({ operation, key }) => {
      stopped ||= operation === 'put' && key.includes(`/${copy}/inbox_removed/`);
      return stopped;
    });
    const failed = await importText(exported, headers);
    store.heal();
    expect(failed.status, JSON.stringify(failed.body)).toBe(503);
    expect(await exportText(copy)).not.toContain('"type":"notice"');

    const retried = await importText(exported, headers);
    expect(retried.status, JSON.stringify(retried.body)).toBe(201);
    expect(retried.body).toMatchObject({ id: copy, counts: { turns: 0 } });
    expect(await exportText(copy)).toBe(exported);
    const delivered = await api.get(`/v1/sessions/${copy}/inbox/delivered`);
    expect(delivered.body.delivered).toMatchObject([{ name: 'note.md', turn: 1 }]);
    // Whole now: the next one is refused as any import of a taken id.
    const again = await importText(exported, headers);
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ code: 'session_exists' });
  });
});

import { describe, expect, it } from 'vitest';
import { sessionPrefix } from '../../lib/session/keys.ts';
import { headerLine, itemLine, messageLine } from '../support/export-lines.ts';
import { createClient, freshId, TOKEN, type HttpHarness } from './http-suite.ts';

/**
 * GET /v1/sessions/{id}/export and POST /v1/sessions/import through the real app: the round
 * trip (segments, out-of-line outputs and delivered notices included), and refusals that name
 * the line and store nothing. Runs in Node (test/http/http.test.ts) and inside workerd with R2
 * (test/workers/http.test.ts).
 */
export function defineTransferSuite(label: string, harness: HttpHarness): void {
  const api = createClient(harness);

  async function exportText(id: string): Promise<string> {
    const response = await api.get<string>(`/v1/sessions/${id}/export`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/x-ndjson');
    return response.body;
  }

  function importText(text: string, headers: Record<string, string> = {}) {
    return api.post('/v1/sessions/import', text, { 'content-type': 'application/x-ndjson', ...headers });
  }

  /** The export with the header's id replaced (an import under another id of the same bucket). */
  function renamed(text: string, id: string): string {
    const [header, ...rest] = text.split('\n');
    return [JSON.stringify({ ...JSON.parse(header!), id }), ...rest].join('\n');
  }

  async function storedKeys(id: string): Promise<string[]> {
    const listed = await harness.store.list(sessionPrefix(harness.keyPrefix, id));
    return listed.objects.map((object) => object.key);
  }

  describe(`${label}: retention settings`, () => {
    it('sets, shows and resets expires_after_days, and lists expires_at', async () => {
      const id = await api.session({ expires_after_days: 3 });
      const session = await api.get(`/v1/sessions/${id}`);
      expect(session.body.expires_after_days).toBe(3);
      const row = async () => {
        for (let after: string | undefined; ; ) {
          const page = await api.get(`/v1/sessions?limit=100${after ? `&after=${after}` : ''}`);
          const found = page.body.sessions.find((candidate: { id: string }) => candidate.id === id);
          if (found || !page.body.has_more) return found;
          after = page.body.next_after;
        }
      };
      const listed = await row();
      expect(Date.parse(listed.expires_at) - Date.parse(listed.last_activity_at)).toBe(3 * 86_400_000);
      const reset = await api.patch(`/v1/sessions/${id}`, { expires_after_days: null });
      expect(reset.status).toBe(200);
      expect(reset.body).not.toHaveProperty('expires_after_days');
      // The harness sets no SESSION_TTL_DAYS: without its own retention the session never expires.
      expect((await row()).expires_at).toBeNull();
      for (const bad of [0, 1.5, 40_000]) {
        const refused = await api.patch(`/v1/sessions/${id}`, { expires_after_days: bad });
        expect(refused.status).toBe(400);
        expect(refused.body.error.details.field).toBe('expires_after_days');
      }
    });
  });

  describe(`${label}: export and import`, () => {
    it('round-trips a session with segments, out-of-line outputs and a delivered notice', async () => {
      const id = await api.session({ instructions: 'Be brief.', strategies: 'inbox', metadata: { team: 'a' } });
      // Outputs of 200 kB: an import of these writes several records, packed into segments
      // with the outputs out of line.
      for (let index = 0; index < 6; index++) {
        const appended = await api.post(`/v1/sessions/${id}/items`, {
          items: [
            { type: 'function_call', call_id: `c${index}`, name: 'read', arguments: '{}' },
            { type: 'function_call_output', call_id: `c${index}`, output: `${index}`.repeat(200_000) },
          ],
        });
        expect(appended.status).toBe(201);
      }
      expect((await api.post(`/v1/sessions/${id}/inbox`, { name: 'note.md', content: 'hello' })).status).toBe(201);
      expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'hi' })).status).toBe(200);
      const exported = await exportText(id);
      const lines = exported
        .trimEnd()
        .split('\n')
        .map((line) => JSON.parse(line));
      expect(lines[0]).toMatchObject({ type: 'session', id, instructions: 'Be brief.', metadata: { team: 'a' } });
      expect(lines[2]).toMatchObject({ type: 'function_call_output', output: '0'.repeat(200_000) });
      expect(lines[lines.length - 1]).toMatchObject({ type: 'notice', name: 'note.md', content: 'hello', turn: 1 });

      const copy = freshId('import');
      const imported = await importText(renamed(exported, copy));
      expect(imported.status, JSON.stringify(imported.body)).toBe(201);
      expect(imported.body).toMatchObject({ id: copy, counts: { items: lines.length - 2, turns: 0 } });
      expect(await exportText(copy)).toBe(renamed(exported, copy));
      const keys = await storedKeys(copy);
      expect(keys.some((key) => key.endsWith('.seg'))).toBe(true);
      expect(keys.some((key) => key.includes('/blob/'))).toBe(true);
      const delivered = await api.get(`/v1/sessions/${copy}/inbox/delivered`);
      expect(delivered.body.delivered).toMatchObject([{ name: 'note.md', turn: 1 }]);
      // The copy takes turns like any session.
      expect((await api.post(`/v1/sessions/${copy}/turns`, { input: 'again' })).status).toBe(200);
    });

    it('refuses a dangling call output with 400 naming the line, and stores nothing', async () => {
      const id = freshId('import');
      const header = headerLine(id);
      const body = [
        header,
        messageLine(1),
        itemLine(2, { type: 'function_call_output', call_id: 'none', output: 'x' }),
      ].join('\n');
      const refused = await importText(body);
      expect(refused.status).toBe(400);
      expect(refused.body.error).toMatchObject({ code: 'invalid_request', details: { field: 'line 3.call_id' } });
      expect((await api.get(`/v1/sessions/${id}`)).status).toBe(404);
      expect(await storedKeys(id)).toEqual([]);

      const oversize = itemLine(1, { type: 'message', role: 'user', content: 'x'.repeat(1_100_000) });
      const tooLarge = await importText([header, oversize].join('\n'));
      expect(tooLarge.status).toBe(413);
      expect(tooLarge.body.error.message).toContain('line 2');
      expect(await storedKeys(id)).toEqual([]);

      const notJsonLines = await importText(header, { 'content-type': 'application/json' });
      expect(notJsonLines.status).toBe(400);
      expect(notJsonLines.body.error.details).toEqual({ field: 'content-type' });
    });

    it('refuses a header ledger the listing cannot hold or whose cache reads pass its input', async () => {
      const ledger = {
        turns: 1,
        input_tokens: 10,
        cached_input_tokens: 5,
        cache_write_tokens: 0,
        output_tokens: 2,
        reasoning_tokens: 0,
        cost_usd: 0.5,
        unpriced_turns: 0,
      };
      const withLedger = (id: string, changed: Record<string, number>) =>
        // Created now: the newest session, on the listing's first page.
        JSON.stringify({
          ...JSON.parse(headerLine(id)),
          created_at: new Date().toISOString(),
          ledger: { ...ledger, ...changed },
        });
      for (const [changed, field] of [
        [{ cost_usd: 10_000_000 }, 'line 1.ledger.cost_usd'],
        [{ cached_input_tokens: 50 }, 'line 1.ledger.cached_input_tokens'],
      ] as const) {
        const id = freshId('import');
        const refused = await importText(withLedger(id, changed));
        expect(refused.status).toBe(400);
        expect(refused.body.error).toMatchObject({ code: 'invalid_request', details: { field } });
        expect(await storedKeys(id)).toEqual([]);
      }
      // At the bound, the session is imported and listed with its totals.
      const id = freshId('import');
      const accepted = await importText(withLedger(id, { cost_usd: 9_000_000, cached_input_tokens: 10 }));
      expect(accepted.status, JSON.stringify(accepted.body)).toBe(201);
      expect(accepted.body.usage).toMatchObject({ cost_usd: 9_000_000, cache_read_share: 1 });
      const listing = await api.get('/v1/sessions?limit=100');
      expect(listing.body.sessions.find((row: any) => row.id === id)?.usage).toEqual(accepted.body.usage);
    });

    it('carries the expires_after_days of a session through the round trip', async () => {
      const id = await api.session({ expires_after_days: 12 });
      const exported = await exportText(id);
      expect(JSON.parse(exported.split('\n')[0]!)).toMatchObject({ expires_after_days: 12 });
      const copy = freshId('import');
      expect((await importText(renamed(exported, copy))).body).toMatchObject({ expires_after_days: 12 });
    });

    it('export is 404 for a missing session; import needs admin', async () => {
      expect((await api.get(`/v1/sessions/${freshId('none')}/export`)).status).toBe(404);
      const minted = await api.post('/v1/tokens', { scopes: ['session:turn'] });
      const response = await harness.fetch('/v1/sessions/import', {
        method: 'POST',
        headers: { authorization: `Bearer ${minted.body.token ?? TOKEN}`, 'content-type': 'application/x-ndjson' },
        body: '{}',
      });
      expect(response.status).toBe(403);
    });
  });
}

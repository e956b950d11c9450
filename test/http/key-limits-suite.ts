import { describe, expect, it } from 'vitest';
import { createClient, type HttpHarness } from './http-suite.ts';

/**
 * The longest names the API accepts become object keys that every store must take: a session
 * id of 64 characters, notice names of 200 (and their delivered slots, a little longer), and
 * session metadata up to the size the session index keeps in its keys. Upper case is the worst
 * case for the file store (escaped as three bytes). Run on memory and the file store and S3
 * (test/http/key-limits.test.ts), and on R2 inside workerd (test/workers/http-tokens.test.ts).
 */
export function defineKeyLimitsSuite(name: string, harness: HttpHarness): void {
  const api = createClient(harness);

  describe(`the longest names the API accepts fit the store: ${name}`, () => {
    it('a 64-character session id and 200-character notice names: posted, delivered twice, listed', async () => {
      const id = `${'S'.repeat(56)}${Math.random().toString(36).slice(2, 10).padEnd(8, 'X')}`;
      expect((await api.post('/v1/sessions', { id })).status).toBe(201);
      const notice = `${'N'.repeat(197)}.MD`;
      for (const content of ['first', 'second']) {
        const posted = await api.post(`/v1/sessions/${id}/inbox`, { name: notice, content });
        expect(posted.status, JSON.stringify(posted.body)).toBe(201);
        expect((await api.get(`/v1/sessions/${id}/inbox`)).body.pending.map((entry: any) => entry.name)).toEqual([
          notice,
        ]);
        const turn = await api.post(`/v1/sessions/${id}/turns`, { input: 'go' });
        expect(turn.status, JSON.stringify(turn.body)).toBe(200);
        expect(turn.body.context.notices_delivered).toEqual([notice]);
      }
      const delivered = (await api.get(`/v1/sessions/${id}/inbox/delivered`)).body.delivered;
      expect(delivered.map((entry: any) => entry.stored_as).sort()).toEqual([notice, `${'N'.repeat(197)}.1.MD`].sort());
      expect((await api.get(`/v1/sessions/${id}/inbox`)).body.pending).toEqual([]);
    });

    it('session metadata as large as the listing keeps, and larger: PATCHed, listed, never dropped', async () => {
      const id = await api.session();
      const listed = async () => {
        for (let cursor: string | undefined; ; ) {
          const page = await api.get(`/v1/sessions?limit=100${cursor ? `&after=${cursor}` : ''}`);
          expect(page.status).toBe(200);
          const row = page.body.sessions.find((session: any) => session.id === id);
          if (row || !page.body.has_more) return row;
          cursor = page.body.next_after;
        }
      };
      // Upper-case JSON keys and values: the index key's base64 of them is mostly upper case too.
      for (const size of [100, 400, 650, 2000, 60_000]) {
        const metadata = { NOTE: 'M'.repeat(size) };
        const patched = await api.patch(`/v1/sessions/${id}`, { metadata });
        expect(patched.status, JSON.stringify(patched.body)).toBe(200);
        const row = await listed();
        expect(row, `metadata of ${size} characters`).toBeDefined();
        if (size <= 650) expect(row.metadata_complete).toBe(true);
        if (row.metadata_complete) expect(row.metadata).toEqual(metadata);
        expect((await api.get(`/v1/sessions/${id}`)).body.metadata).toEqual(metadata);
      }
    });
  });
}

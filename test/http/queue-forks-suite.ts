import { describe, expect, it } from 'vitest';
import { freshId, createClient, type HttpHarness } from './http-suite.ts';

/**
 * GET /v1/sessions/{id}/queue, DELETE .../queue/{queued_turn} and GET /v1/sessions/{id}/forks
 * through the real app. Queued
 * inputs are put into the bucket as an enqueue stores them (docs/STORAGE.md, "Queued inputs"),
 * since no turn can be held open here, in a session whose budget is spent, so that the pickup a
 * listing runs leaves them waiting; test/ui/inspector.test.ts queues them behind a running turn.
 * Runs in Node (test/http/http.test.ts) and inside workerd with R2 (test/workers/http-turns.test.ts).
 */
export function defineQueueForksSuite(label: string, harness: HttpHarness): void {
  const api = createClient(harness);

  async function generation(id: string): Promise<string> {
    const config = await harness.store.get(`${harness.keyPrefix}sessions/${id}/session.json`);
    return JSON.parse(new TextDecoder().decode(config!.body)).generation;
  }

  async function queue(id: string, keyHash: string, text: string, enqueuedAt: string): Promise<void> {
    const entry = {
      format: 'tailgate.queued.v1',
      key_sha256: keyHash,
      enqueued_at: enqueuedAt,
      writer: crypto.randomUUID(),
      input: [
        { type: 'message', role: 'user', content: text },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'second' }] },
      ],
      request: {},
    };
    const key = `${harness.keyPrefix}sessions/${id}/queue/${await generation(id)}/${keyHash}`;
    await harness.store.put(key, JSON.stringify(entry));
  }

  describe(`${label}: queued inputs and forks`, () => {
    it('lists the queued inputs oldest first with a bounded preview', async () => {
      const id = await api.session({ on_busy: 'enqueue', budget: { max_turns: 1 } });
      expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'spends the budget' })).status).toBe(200);
      expect((await api.get(`/v1/sessions/${id}/queue`)).body).toEqual({ queued: [], total: 0 });
      // Upload order decides: the second key sorts first but was stored later.
      await queue(id, 'b'.repeat(64), 'first input', '2026-01-01T00:00:00.000Z');
      await new Promise((resolve) => setTimeout(resolve, 20));
      await queue(id, 'a'.repeat(64), 'x'.repeat(400), '2026-01-01T00:00:01.000Z');
      const listed = await api.get(`/v1/sessions/${id}/queue`);
      expect(listed.status, JSON.stringify(listed.body)).toBe(200);
      expect(listed.body).toEqual({
        total: 2,
        // The spent budget that keeps them waiting.
        held: { reason: 'budget_exhausted', budget: 'session', limit: 'max_turns', spent: 1, value: 1 },
        queued: [
          {
            queued_turn: 'b'.repeat(64),
            position: 1,
            enqueued_at: '2026-01-01T00:00:00.000Z',
            items: 2,
            preview: 'first input\nsecond',
            preview_truncated: false,
          },
          {
            queued_turn: 'a'.repeat(64),
            position: 2,
            enqueued_at: '2026-01-01T00:00:01.000Z',
            items: 2,
            preview: 'x'.repeat(280),
            preview_truncated: true,
          },
        ],
      });
      const first = await api.get(`/v1/sessions/${id}/queue?limit=1`);
      expect(first.body.total).toBe(2);
      expect(first.body.queued.map((row: { position: number }) => row.position)).toEqual([1]);
    });

    it('withdraws a queued input: the listing goes on without it, and a second withdraw is 404', async () => {
      const id = await api.session({ on_busy: 'enqueue', budget: { max_turns: 1 } });
      expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'spends the budget' })).status).toBe(200);
      await queue(id, 'c'.repeat(64), 'withdrawn', '2026-01-01T00:00:00.000Z');
      await new Promise((resolve) => setTimeout(resolve, 20));
      await queue(id, 'd'.repeat(64), 'kept', '2026-01-01T00:00:01.000Z');
      const withdrawn = await api.delete(`/v1/sessions/${id}/queue/${'c'.repeat(64)}`);
      expect(withdrawn.status, JSON.stringify(withdrawn.body)).toBe(200);
      expect(withdrawn.body).toEqual({ session_id: id, queued_turn: 'c'.repeat(64), deleted: true });
      const listed = await api.get(`/v1/sessions/${id}/queue`);
      expect(listed.body.total).toBe(1);
      expect(listed.body.queued.map((row: { queued_turn: string }) => row.queued_turn)).toEqual(['d'.repeat(64)]);
      expect((await api.delete(`/v1/sessions/${id}/queue/${'c'.repeat(64)}`)).status).toBe(404);
    });

    it('holds a queued input behind a budget limit of 0 until a PATCH raises it', async () => {
      const id = await api.session({ on_busy: 'enqueue', budget: { max_turns: 0 } });
      await queue(id, 'e'.repeat(64), 'held', '2026-01-01T00:00:00.000Z');
      // The listing's pickup meets the spent budget: the input waits.
      const held = (await api.get(`/v1/sessions/${id}/queue`)).body;
      expect(held.total).toBe(1);
      expect(held.held).toEqual({
        reason: 'budget_exhausted',
        budget: 'session',
        limit: 'max_turns',
        spent: 0,
        value: 0,
      });
      expect((await api.get(`/v1/sessions/${id}`)).body.counts.turns).toBe(0);
      const raised = await api.patch(`/v1/sessions/${id}`, { budget: { max_turns: 1 } });
      expect(raised.status, JSON.stringify(raised.body)).toBe(200);
      await expect
        .poll(async () => (await api.get(`/v1/sessions/${id}`)).body.counts.turns, { timeout: 15_000 })
        .toBe(1);
      expect((await api.get(`/v1/sessions/${id}/queue`)).body.total).toBe(0);
    });

    it('answers bad queries and missing sessions with 4xx', async () => {
      const id = await api.session();
      for (const path of [`/v1/sessions/${id}/queue?limit=0`, `/v1/sessions/${id}/forks?after=nope`]) {
        const refused = await api.get(path);
        expect(refused.status, path).toBe(400);
        expect(refused.body.error.code).toBe('invalid_request');
      }
      for (const kind of ['queue', 'forks']) {
        const missing = await api.get(`/v1/sessions/${freshId('none')}/${kind}`);
        expect(missing.status, kind).toBe(404);
        expect(missing.body.error.code).toBe('not_found');
      }
    });

    it('lists the live forks made from the session, page by page, and not deleted ones', async () => {
      const parent = await api.session();
      expect(
        (await api.post(`/v1/sessions/${parent}/items`, { items: [{ type: 'message', role: 'user', content: 'a' }] }))
          .status,
      ).toBe(201);
      expect((await api.get(`/v1/sessions/${parent}/forks`)).body).toEqual({
        forks: [],
        has_more: false,
        next_after: null,
      });
      const children = [freshId('fa'), freshId('fb'), freshId('fc')];
      for (const child of children) {
        const forked = await api.post(`/v1/sessions/${parent}/fork`, { at_seq: 1, id: child });
        expect(forked.status, JSON.stringify(forked.body)).toBe(201);
      }
      // A fork of a fork references the parent too, but is not the parent's fork.
      const grandchild = freshId('fg');
      expect((await api.post(`/v1/sessions/${children[0]}/fork`, { at_seq: 1, id: grandchild })).status).toBe(201);
      expect((await api.delete(`/v1/sessions/${children[1]}`)).status).toBe(204);

      const all = await api.get(`/v1/sessions/${parent}/forks`);
      expect(all.status, JSON.stringify(all.body)).toBe(200);
      const expected = [children[0], children[2]].sort();
      expect(all.body.forks.map((fork: { id: string }) => fork.id).sort()).toEqual(expected);
      expect(all.body.forks[0]).toMatchObject({ seq: 1, created_at: expect.any(String) });
      expect(all.body.has_more).toBe(false);
      expect(
        (await api.get(`/v1/sessions/${children[0]}/forks`)).body.forks.map((fork: { id: string }) => fork.id),
      ).toEqual([grandchild]);

      const seen: string[] = [];
      let after: string | null = null;
      let pages = 0;
      do {
        const page: { status: number; body: any } = await api.get(
          `/v1/sessions/${parent}/forks?limit=1${after ? `&after=${encodeURIComponent(after)}` : ''}`,
        );
        expect(page.status, JSON.stringify(page.body)).toBe(200);
        seen.push(...page.body.forks.map((fork: { id: string }) => fork.id));
        after = page.body.next_after;
        pages += 1;
      } while (after !== null && pages < 20);
      expect(seen.sort()).toEqual(expected);
      expect(pages).toBeGreaterThanOrEqual(2);
    });
  });
}

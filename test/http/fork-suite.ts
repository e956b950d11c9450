import { describe, expect, it } from 'vitest';
import { SessionLog } from '../support/session-log.ts';
import { freshId, createClient, type HttpHarness } from './http-suite.ts';

/**
 * POST /v1/sessions/{id}/fork through the real app: the fork shares its parent's history up to
 * a turn or seq, goes on by itself, and survives its parent's delete; bad fork points are 4xx.
 * Runs in Node (test/http/http.test.ts) and inside workerd with R2 (test/workers/http-turns.test.ts).
 */
export function defineForkSuite(label: string, harness: HttpHarness): void {
  const api = createClient(harness);

  async function contents(id: string): Promise<unknown[]> {
    const listed = await api.get(`/v1/sessions/${id}/items?limit=1000`);
    expect(listed.status).toBe(200);
    return listed.body.items.map((item: { seq: number; type: string }) => [item.seq, item.type]).reverse();
  }

  describe(`${label}: forks`, () => {
    it('forks at a turn and at a seq, keeps the fork whole when the parent is deleted', async () => {
      const parent = await api.session({ instructions: 'Be brief.', metadata: { team: 'a' } });
      for (let index = 0; index < 3; index++) {
        const appended = await api.post(`/v1/sessions/${parent}/items`, {
          items: [
            { type: 'function_call', call_id: `c${index}`, name: 'read', arguments: '{}' },
            { type: 'function_call_output', call_id: `c${index}`, output: `${index}`.repeat(50_000) },
          ],
        });
        expect(appended.status).toBe(201);
      }
      // The newest record is never packed: a fork at it is always possible.
      const atSeq = await api.post(`/v1/sessions/${parent}/fork`, { at_seq: 6 });
      expect(atSeq.status, JSON.stringify(atSeq.body)).toBe(201);
      expect((await api.post(`/v1/sessions/${parent}/turns`, { input: 'hi' })).status).toBe(200);
      const history = await contents(parent);
      const child = freshId('fork');
      const forked = await api.post(`/v1/sessions/${parent}/fork`, { at_turn: 1, id: child, metadata: { b: 1 } });
      expect(forked.status, JSON.stringify(forked.body)).toBe(201);
      expect(forked.body).toMatchObject({
        id: child,
        instructions: 'Be brief.',
        metadata: { b: 1 },
        counts: { items: history.length, turns: 1 },
        forked_from: { id: parent, seq: history.length },
      });
      expect(await contents(child)).toEqual(history);
      expect(await contents(atSeq.body.id)).toEqual(history.slice(0, 6));
      expect((await api.delete(`/v1/sessions/${parent}`)).status).toBe(204);
      expect((await api.get(`/v1/sessions/${parent}`)).status).toBe(404);
      expect(await contents(child)).toEqual(history);
      const exported = await api.get<string>(`/v1/sessions/${child}/export`);
      expect(exported.body).toContain('2'.repeat(50_000));
      expect((await api.post(`/v1/sessions/${child}/turns`, { input: 'again' })).status).toBe(200);
      expect((await contents(child)).length).toBe(history.length + 2);
    });

    it('answers a bad fork point with a 4xx naming it', async () => {
      const parent = await api.session();
      await api.post(`/v1/sessions/${parent}/items`, {
        items: [
          { type: 'message', role: 'user', content: 'a' },
          { type: 'message', role: 'user', content: 'b' },
        ],
      });
      const both = await api.post(`/v1/sessions/${parent}/fork`, { at_turn: 1, at_seq: 2 });
      expect(both.status).toBe(400);
      expect(both.body.error.code).toBe('invalid_request');
      const neither = await api.post(`/v1/sessions/${parent}/fork`, {});
      expect(neither.status).toBe(400);
      const inside = await api.post(`/v1/sessions/${parent}/fork`, { at_seq: 1 });
      expect(inside.status).toBe(400);
      expect(inside.body.error).toMatchObject({
        message: expect.stringContaining('seq 1'),
        details: { field: 'at_seq' },
      });
      const noTurn = await api.post(`/v1/sessions/${parent}/fork`, { at_turn: 1 });
      expect(noTurn.status).toBe(400);
      expect(noTurn.body.error.details).toEqual({ field: 'at_turn' });
      expect((await api.post(`/v1/sessions/${freshId('none')}/fork`, { at_seq: 2 })).status).toBe(404);
      const taken = await api.post(`/v1/sessions/${parent}/fork`, { at_seq: 2, id: parent });
      expect(taken.status).toBe(409);
      expect(taken.body.error.code).toBe('session_exists');
    });

    it('refuses a fork at a turn still running with 409 fork_refused naming the session and the turn', async () => {
      const parent = await api.session();
      expect((await api.post(`/v1/sessions/${parent}/turns`, { input: 'one' })).status).toBe(200);
      // A turn claimed and not completed: still running.
      const log = new SessionLog(harness.store, { keyPrefix: harness.keyPrefix });
      const begun = await log.beginTurn(parent, { input: [{ type: 'message', role: 'user', content: 'two' }] });
      expect(begun.kind).toBe('claimed');
      // A seq names the turn it is in, which is what runs.
      for (const [point, named, running] of [
        [{ at_turn: 2 }, { turn: 2 }, `turn 2 of session ${parent} is still running`],
        [{ at_seq: 3 }, { seq: 3 }, `seq 3 of session ${parent} is in turn 2, still running`],
      ] as const) {
        const refused = await api.post(`/v1/sessions/${parent}/fork`, point);
        expect(refused.status, JSON.stringify(refused.body)).toBe(409);
        expect(refused.body.error).toEqual({
          code: 'fork_refused',
          message: expect.stringContaining(running),
          details: { id: parent, ...named },
        });
      }
      // The turn before it is forked at.
      expect((await api.post(`/v1/sessions/${parent}/fork`, { at_turn: 1 })).status).toBe(201);
    });

    it("names and lists a fork by its parent after a delete of the fork's newest turn", async () => {
      const parent = await api.session();
      await api.post(`/v1/sessions/${parent}/turns`, { input: 'one' });
      const fork = (await api.post(`/v1/sessions/${parent}/fork`, { at_turn: 1 })).body.id;
      for (const input of ['fork two', 'fork three']) await api.post(`/v1/sessions/${fork}/turns`, { input });
      expect((await api.get(`/v1/sessions/${parent}/forks`)).body.forks).toMatchObject([{ id: fork, seq: 2 }]);
      expect((await api.delete(`/v1/sessions/${fork}/turns/3`)).status).toBe(200);
      expect(await contents(fork)).toEqual([
        [1, 'message'],
        [2, 'message'],
        [3, 'message'],
        [4, 'message'],
      ]);
      expect((await api.get(`/v1/sessions/${parent}/forks`)).body.forks).toMatchObject([{ id: fork, seq: 2 }]);
      expect((await api.get(`/v1/sessions/${fork}`)).body.forked_from).toEqual({ id: parent, seq: 2 });
      // A session that is no fork names none after a delete of its newest turn.
      await api.post(`/v1/sessions/${parent}/turns`, { input: 'two' });
      expect((await api.delete(`/v1/sessions/${parent}/turns/2`)).status).toBe(200);
      expect((await api.get(`/v1/sessions/${parent}`)).body.forked_from).toBeUndefined();
    });
  });
}

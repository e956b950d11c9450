import { describe, expect, it } from 'vitest';
import { createClient, type HttpHarness } from './http-suite.ts';

/**
 * Background turns through the real app: `background: true` answers 202 at once and the
 * turn runs with no client connected (in the process on Node, through the Cloudflare Queues
 * consumer inside workerd: test/workers/http-turns.test.ts), its receipt following it to its end.
 */
export function defineBackgroundSuite(label: string, harness: HttpHarness): void {
  const api = createClient(harness);

  describe(`${label}: background turns`, () => {
    it('answers 202 queued at once and runs the turn to completion with no client connected', async () => {
      const id = await api.session();
      const queued = await api.post(`/v1/sessions/${id}/turns`, { input: 'later', background: true });
      expect(queued.status, JSON.stringify(queued.body)).toBe(202);
      expect(queued.body).toEqual({ session_id: id, turn: 1, status: 'queued' });
      const ended = await settled(api, id, 1);
      expect(ended).toMatchObject({ turn: 1, status: 'completed', error: null, output: { first_seq: 2, last_seq: 2 } });
      const items = (await api.get(`/v1/sessions/${id}/items`)).body.items;
      expect(items.map((item: any) => item.content)).toEqual(['echo: later', 'later']);
      // The next turn follows it as after any turn.
      const next = await api.post(`/v1/sessions/${id}/turns`, { input: 'after' });
      expect(next.status, JSON.stringify(next.body)).toBe(200);
      expect(next.body.turn).toBe(2);
    });

    it('keeps one Idempotency-Key to one input: a repeat answers the turn and its state', async () => {
      const id = await api.session();
      const key = { 'idempotency-key': `bg-${id}` };
      const first = await api.post(`/v1/sessions/${id}/turns`, { input: 'once', background: true }, key);
      expect(first.status, JSON.stringify(first.body)).toBe(202);
      await settled(api, id, 1);
      const again = await api.post(`/v1/sessions/${id}/turns`, { input: 'once', background: true }, key);
      expect(again.status, JSON.stringify(again.body)).toBe(202);
      expect(again.body).toEqual({ session_id: id, turn: 1, status: 'completed' });
      // The same key without `background` replays the stored answer.
      const foreground = await api.post(`/v1/sessions/${id}/turns`, { input: 'once' }, key);
      expect(foreground.status).toBe(200);
      expect(foreground.body.output[0].content).toBe('echo: once');
      expect((await api.get(`/v1/sessions/${id}`)).body.counts).toMatchObject({ items: 2, turns: 1 });
    });

    it('refuses a bad request before storing anything, and a streamed background turn', async () => {
      const id = await api.session();
      const unknown = await api.post(`/v1/sessions/${id}/turns`, { input: 'x', background: true, model: 'nope:x' });
      expect(unknown.status).toBe(400);
      const streamed = await api.post(`/v1/sessions/${id}/turns`, { input: 'x', background: true, stream: true });
      expect(streamed.status).toBe(400);
      expect(streamed.body.error).toMatchObject({ code: 'invalid_request', details: { field: 'stream' } });
      // The message says what to change: drop one, and where a background turn's events are read.
      expect(streamed.body.error.message).toBe(
        'stream: a background turn is not streamed (send stream or background, not both); ' +
          `follow its events with GET /v1/sessions/${id}/turns/{turn}/events`,
      );
      expect((await api.get(`/v1/sessions/${id}`)).body.counts).toMatchObject({ items: 0, turns: 0 });
      const missing = await api.post(`/v1/sessions/${id}-gone/turns`, { input: 'x', background: true });
      expect(missing.status).toBe(404);
    });
  });
}

/** Polls a turn's receipt until it has ended (no time is asserted: only that it ends). */
export async function settled(api: ReturnType<typeof createClient>, id: string, turn: number): Promise<any> {
  for (let polls = 0; polls < 600; polls++) {
    const receipt = await api.get(`/v1/sessions/${id}/turns/${turn}`);
    expect(receipt.status, JSON.stringify(receipt.body)).toBe(200);
    if (!['queued', 'in_progress'].includes(receipt.body.status)) return receipt.body;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`turn ${turn} of ${id} did not end`);
}
